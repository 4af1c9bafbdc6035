"""Score caches are keyed by content: what a teacher and the data hold and the settings that
change the draws, never where the files live or which process scores them."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from cli_helpers import write_project
from tiny import make_texts, write_jsonl

from kiwb.project.config import load_config
from kiwb.project.store import Store
from kiwb.workers.score import plan_scoring

# device = "cpu" so that the float16 case below is on the CPU on a GPU box too
SCORING = "mc_passes = 4\nshard_size = 16\nmax_length = 64\nseed = 0\nbatch_size = 8\ndevice = \"cpu\"\n"
TEXTS = [row["text"] for row in make_texts(20, seed=4)]


def _keys(project: Path) -> dict[tuple[str, str], str]:
    with Store(project / "store.sqlite") as store:
        return {(task.teacher.name, task.dataset): task.key
                for task in plan_scoring(load_config(project), store)}


def _edit_json(path: Path, **changes) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def _nudge_weights(folder: Path) -> None:
    from safetensors.torch import load_file, save_file

    weights = load_file(folder / "model.safetensors")
    weights["classifier.bias"] = weights["classifier.bias"] + 1e-3
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})


def _set_scoring(project: Path, old: str, new: str) -> None:
    config = project / "kiwb.toml"
    config.write_text(config.read_text().replace(old, new))


# (change, what it does to a project at `root` whose teacher a is root/a and texts root/texts.jsonl)
CHANGES = {
    "K": lambda root: _set_scoring(root / "proj", "mc_passes = 4", "mc_passes = 8"),
    "max length": lambda root: _set_scoring(root / "proj", "max_length = 64", "max_length = 32"),
    "seed": lambda root: _set_scoring(root / "proj", "seed = 0", "seed = 1"),
    "one text edited": lambda root: write_jsonl(
        root / "texts.jsonl", [{"text": t} for t in [TEXTS[0] + " again", *TEXTS[1:]]]),
    "texts reordered": lambda root: write_jsonl(
        root / "texts.jsonl", [{"text": t} for t in reversed(TEXTS)]),
    "teacher weights": lambda root: _nudge_weights(root / "a"),
    "teacher config": lambda root: _edit_json(root / "a" / "config.json", hidden_dropout_prob=0.2),
    "teacher tokenizer": lambda root: _edit_json(root / "a" / "tokenizer_config.json", do_lower_case=False),
    # Changes that must keep the cache:
    "teacher moved": lambda root: (shutil.move(root / "a", root / "a-moved"),
                                   _set_scoring(root / "proj", str(root / "a"), str(root / "a-moved"))),
    "texts copied elsewhere": lambda root: (shutil.copy(root / "texts.jsonl", root / "copy.jsonl"),
                                            _set_scoring(root / "proj", str(root / "texts.jsonl"),
                                                         str(root / "copy.jsonl"))),
    "batch size": lambda root: _set_scoring(root / "proj", "batch_size = 8", "batch_size = 2"),
    "teacher's model card": lambda root: (root / "a" / "README.md").write_text("# notes\n"),
    # autocast applies on CUDA only: on this CPU float16 scores in float32, the same numbers
    "float16 on the CPU": lambda root: _set_scoring(root / "proj", "seed = 0", 'seed = 0\ndtype = "float16"'),
}
REKEYS = {  # which (teacher, dataset) keys a change must give new values
    "K": {"a", "b"}, "max length": {"a", "b"}, "seed": {"a", "b"},
    "one text edited": {"a", "b"}, "texts reordered": {"a", "b"},
    "teacher weights": {"a"}, "teacher config": {"a"}, "teacher tokenizer": {"a"},
    "teacher moved": set(), "texts copied elsewhere": set(), "batch size": set(),
    "teacher's model card": set(), "float16 on the CPU": set(),
}


@pytest.mark.parametrize("change", CHANGES)
def test_a_score_key_changes_exactly_when_what_is_scored_changes(change, tmp_path, teachers_dir):
    shutil.copytree(teachers_dir / "teacher_a", tmp_path / "a")
    write_jsonl(tmp_path / "texts.jsonl", [{"text": text} for text in TEXTS])
    project = write_project(tmp_path / "proj", {"a": tmp_path / "a", "b": teachers_dir / "teacher_b"},
                            tmp_path / "texts.jsonl", scoring=SCORING)
    before = _keys(project)
    CHANGES[change](tmp_path)
    after = _keys(project)
    changed = {teacher for (teacher, _), key in after.items() if before[(teacher, "unlabeled")] != key}
    assert changed == REKEYS[change]


H100 = "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize(("device", "dtype", "drawing"), [
    ("cpu", "float32", {"dtype": "float32"}),   # the key CPU scores always had
    ("cpu", "bfloat16", {"dtype": "float32"}),  # no autocast off CUDA: float32 numbers
    # Philox draws, not numpy's, laid out by the GPU model's launch grid
    ("cuda", "float32", {"dtype": "float32", "device_type": "cuda", "gpu": H100}),
    ("cuda:1", "float16", {"dtype": "float16", "device_type": "cuda", "gpu": H100}),  # not its index
    ("cuda", "bfloat16", {"dtype": "bfloat16", "device_type": "cuda", "gpu": H100}),
    ("mps", "float16", {"dtype": "float32", "device_type": "mps"}),
])
def test_scores_drawn_or_rounded_differently_are_keyed_apart(device, dtype, drawing, monkeypatch):
    import torch

    from kiwb.workers.score import drawing_key

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *args: H100)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *args: (9, 0))
    assert drawing_key(torch.device(device), dtype) == drawing


@pytest.mark.slow
def test_scores_drawn_on_another_device_are_read_without_that_device(tmp_path, teachers_dir):
    """`kiwb score --device cpu` on a GPU box (here: a kiwb.toml naming cuda:0 on a machine
    without CUDA) leaves scores that integration finds and reads, needing no GPU."""
    from cli_helpers import run_kiwb

    write_jsonl(tmp_path / "texts.jsonl", [{"text": text} for text in TEXTS])
    project = write_project(tmp_path / "proj", {"a": teachers_dir / "teacher_a", "b": teachers_dir / "teacher_b"},
                            tmp_path / "texts.jsonl", scoring=SCORING.replace('"cpu"', '"cuda:0"'))
    run_kiwb("score", project, "--device", "cpu", cwd=tmp_path)
    summary = json.loads(run_kiwb("integrate", project, "--json", cwd=tmp_path).stdout)
    assert sum(summary["wins"].values()) == len(TEXTS)
    jobs = json.loads(run_kiwb("jobs", project, "--json", cwd=tmp_path).stdout)
    assert [job["kind"] for job in jobs] == ["score", "integrate"]
    job = jobs[0]
    assert (job["device"], job["ending"]["precision"], job["ending"]["strategy"]) == ("cpu", "float32", "loop")


def test_auto_replicates_on_cuda_and_loops_elsewhere():
    import torch

    from kiwb.workers.score import resolved_strategy

    assert resolved_strategy("auto", torch.device("cuda", 0)) == "replicate"
    assert resolved_strategy("auto", "cuda") == "replicate"
    assert [resolved_strategy("auto", device) for device in (torch.device("cpu"), "mps", None)] == [
        "loop", "loop", "loop"]
    assert resolved_strategy("loop", torch.device("cuda")) == "loop"  # a named one is kept


@pytest.mark.parametrize(("device", "same_as", "not_as"), [
    ("cpu", "loop", "replicate"),  # the CPU's keys are those of before auto followed the device
    ("cuda:0", "replicate", "loop"),  # read, not checked: planning needs no GPU
])
def test_the_score_key_of_auto_is_the_key_of_the_strategy_it_runs(device, same_as, not_as,
                                                                 tmp_path, teachers_dir):
    write_jsonl(tmp_path / "texts.jsonl", [{"text": text} for text in TEXTS])
    project = write_project(tmp_path / "proj", {"a": teachers_dir / "teacher_a",
                                                "b": teachers_dir / "teacher_b"},
                            tmp_path / "texts.jsonl", scoring=SCORING.replace('"cpu"', f'"{device}"'))
    keys = {}
    for strategy in ("auto", "loop", "replicate"):
        _set_scoring(project, "seed = 0\n", f'seed = 0\nstrategy = "{strategy}"\n')
        keys[strategy] = _keys(project)
        _set_scoring(project, f'seed = 0\nstrategy = "{strategy}"\n', "seed = 0\n")
    assert keys["auto"] == keys[same_as] and keys["auto"] != keys[not_as]


def test_cuda_draws_are_keyed_by_the_gpu_model_and_cpu_keys_stay_as_they_were(monkeypatch):
    import torch

    from kiwb.workers.score import drawing_key

    def drawn_on(name: str) -> dict:
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda *args: name)
        return drawing_key(torch.device("cuda:0"), "float32")

    # Byte for byte the key kiwb always made, so no CPU score set is drawn again.
    assert json.dumps(drawing_key(torch.device("cpu"), "float32"), sort_keys=True) == '{"dtype": "float32"}'
    assert drawn_on("NVIDIA A100-SXM4-80GB") == {"dtype": "float32", "device_type": "cuda",
                                                 "gpu": "NVIDIA A100-SXM4-80GB"}
    assert drawn_on("NVIDIA A100-SXM4-80GB") != drawn_on(H100)


def _gpu_machine(monkeypatch, name: str | None) -> None:
    """Make this machine answer as one with a GPU called `name`, or with none."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: name is not None)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: int(name is not None))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *args: name)


def _score_all(store: Store, tasks, left: tuple[int, int] | None = None) -> None:
    """Register the tasks and record each shard done (but the (task, shard) `left`), as a
    score job does once a shard's file is written."""
    from kiwb.workers.score import register_tasks

    register_tasks(store, tasks)
    for number, task in enumerate(tasks):
        for shard in range(task.num_shards):
            if (number, shard) != left:
                assert store.claim_shard(task.key, shard, "test")
                store.finish_shard(task.key, shard, rows=len(task.shard_rows(shard)), seconds=0.0)


def _project_on(device: str, tmp_path: Path, teachers_dir: Path) -> Path:
    write_jsonl(tmp_path / "texts.jsonl", [{"text": text} for text in TEXTS])
    return write_project(tmp_path / "proj", {"a": teachers_dir / "teacher_a", "b": teachers_dir / "teacher_b"},
                         tmp_path / "texts.jsonl", scoring=SCORING.replace('"cpu"', f'"{device}"'))


@pytest.mark.parametrize("reader", [None, "NVIDIA A100-SXM4-80GB"])
def test_scores_drawn_on_one_gpu_model_are_read_on_a_machine_with_another_or_none(
        reader, monkeypatch, tmp_path, teachers_dir):
    """Readers cannot list GPU models: they find the H100's score sets by the drawing the
    store recorded with them."""
    import torch

    config = load_config(_project_on("auto", tmp_path, teachers_dir))
    with Store(config.root / "store.sqlite") as store:
        _gpu_machine(monkeypatch, H100)
        drawn = plan_scoring(config, store, torch.device("cuda:0"))
        _score_all(store, drawn)
        assert store.score_drawings() == [{"dtype": "float32", "device_type": "cuda", "gpu": H100}]
        _gpu_machine(monkeypatch, reader)
        assert [task.key for task in plan_scoring(config, store)] == [task.key for task in drawn]
        if reader is not None:  # where it scores, it draws sets of its own
            assert plan_scoring(config, store, torch.device("cuda:0"))[0].key != drawn[0].key


def test_an_unfinished_set_of_another_gpu_model_is_not_read(monkeypatch, tmp_path, teachers_dir):
    import torch

    config = load_config(_project_on("cpu", tmp_path, teachers_dir))
    with Store(config.root / "store.sqlite") as store:
        _gpu_machine(monkeypatch, H100)
        drawn = plan_scoring(config, store, torch.device("cuda:0"))
        _score_all(store, drawn, left=(0, 0))
        _gpu_machine(monkeypatch, None)
        read = plan_scoring(config, store)
        assert read[0].key != drawn[0].key and read[0].drawing == {"dtype": "float32"}
        assert [task.key for task in read[1:]] == [task.key for task in drawn[1:]]


def test_gpu_score_sets_of_an_earlier_kiwb_without_the_gpu_name_stay_readable(monkeypatch, tmp_path,
                                                                              teachers_dir):
    """kiwb before GPU names keyed CUDA draws {"dtype", "device_type": "cuda"} and recorded no
    drawing with the set; a reader without the GPU plans exactly that key for a CUDA project."""
    project = _project_on("cuda:0", tmp_path, teachers_dir)
    _gpu_machine(monkeypatch, None)
    with Store(project / "store.sqlite") as store:
        earlier = plan_scoring(load_config(project), store)
        assert {json.dumps(task.drawing) for task in earlier} == {
            json.dumps({"dtype": "float32", "device_type": "cuda"})}
        _score_all(store, [dataclasses.replace(task, drawing=None) for task in earlier])
        assert store.score_drawings() == []
        _set_scoring(project, '"cuda:0"', '"cpu"')  # read where the project scores on the CPU
        assert [task.key for task in plan_scoring(load_config(project), store)] == [
            task.key for task in earlier]
