"""Which precision a job computes in on a given device, and the one line saying why when it is
not the one asked for: bfloat16 only where the GPU has it natively, not where it emulates it."""

from __future__ import annotations

import pytest
import torch

from kiwb.workers.runtime import (
    agreed_training_precision,
    native_bf16,
    scoring_precision,
    scoring_precision_for,
    training_precision,
    training_precision_for,
)

# Compute capabilities of real GPUs: bfloat16 is native from Ampere (8.0) on.
GPUS = {(7, 0): "Tesla V100-SXM2-16GB", (7, 5): "Tesla T4", (8, 0): "NVIDIA A100-SXM4-80GB",
        (9, 0): "NVIDIA H100 80GB HBM3"}
CUDA = torch.device("cuda:0")  # made without a GPU; only the answers below are patched


@pytest.fixture
def gpu(monkeypatch):
    """Make cuda:0 answer as the GPU of the compute capability given."""
    def install(capability: tuple[int, int]) -> None:
        monkeypatch.setattr(torch.version, "hip", None)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: GPUS[capability])
    return install


@pytest.mark.parametrize(("capability", "native"), [((7, 0), False), ((7, 5), False),
                                                    ((8, 0), True), ((9, 0), True)])
def test_bfloat16_is_native_from_compute_capability_8(gpu, capability, native):
    gpu(capability)
    assert native_bf16(CUDA) is native
    assert native_bf16(torch.device("cpu")) is False


@pytest.mark.parametrize(("setting", "capability", "used"), [
    ("auto", (7, 0), "no"),     # auto's choice needs no note
    ("auto", (8, 0), "bf16"),
    ("bf16", (9, 0), "bf16"),
    ("fp16", (7, 0), "fp16"),   # fp16 is every GPU's own
    ("fp16", (9, 0), "fp16"),
    ("no", (9, 0), "no"),
])
def test_the_training_precision_is_the_one_asked_for_where_the_gpu_has_it(gpu, setting, capability, used):
    gpu(capability)
    assert training_precision_for(setting, CUDA) == (used, None)
    assert training_precision(setting, CUDA) == used


def test_explicit_bf16_trains_in_fp16_on_a_gpu_that_emulates_it(gpu):
    gpu((7, 5))
    precision, note = training_precision_for("bf16", CUDA)
    assert precision == "fp16"
    assert note == ('mixed_precision = "bf16": cuda:0 (Tesla T4, compute capability 7.5) only '
                    "emulates bfloat16, slowly; training in fp16 with loss scaling instead")


@pytest.mark.parametrize(("setting", "note"), [
    ("auto", None), ("no", None),
    ("fp16", "mixed_precision = 'fp16' applies on CUDA only; training in float32 on cpu"),
    ("bf16", "mixed_precision = 'bf16' applies on CUDA only; training in float32 on cpu"),
])
def test_off_cuda_training_is_float32_and_an_explicit_half_precision_gets_a_note(setting, note):
    assert training_precision_for(setting, torch.device("cpu")) == ("no", note)


@pytest.mark.parametrize(("dtype", "capability", "used"), [
    ("bfloat16", (8, 0), "bfloat16"),
    ("float16", (7, 0), "float16"),
    ("float32", (7, 0), "float32"),
])
def test_the_scoring_precision_is_the_dtype_asked_for_where_the_gpu_has_it(gpu, dtype, capability, used):
    gpu(capability)
    assert scoring_precision_for(dtype, CUDA) == (used, None)
    assert scoring_precision(dtype, CUDA) == used


def test_bfloat16_scores_in_float32_on_a_gpu_that_emulates_it(gpu):
    gpu((7, 0))
    precision, note = scoring_precision_for("bfloat16", CUDA)
    assert precision == "float32" and scoring_precision("bfloat16", CUDA) == "float32"
    assert note == ('[scoring] dtype = "bfloat16": cuda:0 (Tesla V100-SXM2-16GB, compute '
                    "capability 7.0) only emulates bfloat16, slowly; scoring in float32 instead")


def test_off_cuda_scores_are_float32_without_a_note():
    assert scoring_precision_for("bfloat16", torch.device("cpu")) == ("float32", None)


def member(rank: int, bf16: bool | None, name: str = "Tesla T4") -> dict:
    """What a rank said of its GPU when the ranks met (None: a CPU rank)."""
    if bf16 is None:
        return {"rank": rank, "host": "h", "gpu": None}
    return {"rank": rank, "host": "h", "gpu": f"GPU-{rank}", "gpu_name": name, "bf16": bf16}


def test_every_rank_trains_in_one_precision_chosen_from_every_ranks_gpu():
    """Issue 30, point 6: rank 0's bf16 once reached ranks whose GPU only emulates it."""
    h100 = [member(0, True, "NVIDIA H100 80GB HBM3"), member(1, True, "NVIDIA H100 80GB HBM3")]
    assert agreed_training_precision("bf16", "bf16", h100) == ("bf16", None)
    assert agreed_training_precision("auto", "bf16", h100) == ("bf16", None)
    mixed = [h100[0], member(1, True), member(2, False)]
    precision, note = agreed_training_precision("bf16", "bf16", mixed)
    assert precision == "fp16"  # for all: a scaled fp16 gradient must not meet a bf16 one
    assert note.startswith("rank 2's GPU (Tesla T4 on h) only emulates bfloat16: every rank "
                           "trains in fp16 with loss scaling")
    precision, note = agreed_training_precision("auto", "bf16", mixed)
    assert precision == "no" and "every rank trains in float32" in note  # auto's own rule
    for mine in ("no", "fp16"):  # nothing to agree on
        assert agreed_training_precision("fp16", mine, mixed) == (mine, None)
    cpu = [member(0, None), member(1, None)]
    assert agreed_training_precision("bf16", "no", cpu) == ("no", None)


