"""Device names: the one grammar of --device, --devices and kiwb.toml (checked without torch,
before a job is recorded), and the one-line refusal of a device this machine lacks."""

from __future__ import annotations

import pytest

from kiwb.errors import KiwbError
from kiwb.project.devices import check_device, device_list, is_device
from kiwb.project.job_specs import (
    ExportSpec,
    IntegrateSpec,
    ScoreSpec,
    TeachSpec,
    TrainSpec,
    spec_of,
)

FORMS = "auto, cpu, cuda, cuda:N or mps"

DEVICES = [
    ("auto", True), ("cpu", True), ("cuda", True), ("cuda:0", True), ("cuda:7", True),
    ("cuda:12", True), ("mps", True),
    ("", False), ("foo", False), ("gpu", False), ("CPU", False), ("Cuda:0", False),
    ("cuda:", False), ("cuda:01", False),  # torch refuses a leading zero
    ("cuda:-1", False), ("cuda: 1", False), ("cuda:1.0", False), ("cuda:\u0661", False),
    (" cpu", False), ("cpu ", False), ("cpu:0", False), ("mps:0", False), ("xpu", False),
    ("all", False), ("cpu,cpu", False),  # lists are --devices' only
]


@pytest.mark.parametrize(("name", "accepted"), DEVICES)
def test_device_names_follow_one_grammar(name, accepted):
    assert is_device(name) is accepted
    if accepted:
        assert check_device(name) == name
        return
    with pytest.raises(KiwbError) as refused:
        check_device(name)
    assert str(refused.value) == f"--device {name!r}: unknown device; use {FORMS}"


DEVICE_LISTS = [
    (None, None), ("cpu", ["cpu"]), ("cuda:0,cuda:1", ["cuda:0", "cuda:1"]),
    (" cpu , cpu ", ["cpu", "cpu"]), ("cpu,,cpu", ["cpu", "cpu"]), ("all", ["all"]),
    ("mps", ["mps"]), ("auto", ["auto"]),
]


@pytest.mark.parametrize(("devices", "names"), DEVICE_LISTS)
def test_device_lists_are_split_into_names(devices, names):
    assert device_list(devices) == names


BAD_DEVICE_LISTS = [
    ("foo", "unknown device 'foo'"), ("cpu,foo", "unknown device 'foo'"),
    ("cuda:0,cuda:01", "unknown device 'cuda:01'"), ("cuda0,cuda1", "unknown device 'cuda0'"),
    ("", "give a comma list"), (" , ", "give a comma list"), ("cpu,all", "give a comma list"),
    ("all,all", "give a comma list"),
]


@pytest.mark.parametrize(("devices", "problem"), BAD_DEVICE_LISTS)
def test_bad_device_lists_are_refused_naming_the_value_and_the_forms(devices, problem):
    with pytest.raises(KiwbError) as refused:
        device_list(devices)
    message = str(refused.value)
    assert message.startswith(f"--devices {devices!r}: ") and problem in message
    assert f"a comma list of devices ({FORMS};" in message and message.endswith(" or all")


@pytest.mark.parametrize("spec", [
    ScoreSpec(device="foo"), ScoreSpec(devices="cpu,foo"), TrainSpec(device="gpu"),
    TrainSpec(devices="cuda:01"), TeachSpec(base="b", data="d", labels="x,y", out="o", device="cuda0"),
])
def test_a_spec_with_a_misspelt_device_is_refused_before_it_is_recorded(spec):
    with pytest.raises(KiwbError, match="unknown device"):
        spec.check()


@pytest.mark.parametrize("spec", [
    ScoreSpec(), ScoreSpec(device="cuda:3", devices="cpu,cpu"), TrainSpec(devices="all"),
    IntegrateSpec(), ExportSpec(run="r"), TeachSpec(base="b", data="d", labels="x,y", out="o"),
])
def test_a_spec_with_good_devices_passes_the_check(spec):
    spec.check()  # whether cuda:3 is here is the worker's question, not the spelling's


def test_an_old_job_with_a_misspelt_device_still_reads():
    # Jobs recorded before the check existed must not break `kiwb jobs` and its resume hints.
    assert spec_of("score", {"devices": "foo"}).resume_command("p") == "kiwb score p --devices foo"


def test_a_misspelt_device_never_reaches_torch():
    from kiwb.workers.runtime import resolve_device

    with pytest.raises(KiwbError) as refused:
        resolve_device("foo")
    assert str(refused.value) == f"device 'foo': unknown device; use {FORMS}"


def test_a_gpu_that_is_not_here_is_refused_naming_what_is():
    import torch

    from kiwb.workers.runtime import available_devices, resolve_device

    here = available_devices()
    assert here[0] == "cpu" and all(is_device(name) for name in here)
    missing = f"cuda:{torch.cuda.device_count()}"  # one past the last GPU, or any on a CPU box
    with pytest.raises(KiwbError) as refused:
        resolve_device(missing)
    message = str(refused.value)
    assert message.startswith(f"device {missing!r}: ")
    assert f"(available here: {', '.join(here)})" in message


def test_mps_where_there_is_none_is_refused_in_one_line():
    import torch

    from kiwb.workers.runtime import resolve_device

    if torch.backends.mps.is_available():
        pytest.skip("this machine has Apple MPS")
    with pytest.raises(KiwbError, match=r"device 'mps': Apple MPS is not available here "
                       r"\(available here: cpu"):
        resolve_device("mps")
