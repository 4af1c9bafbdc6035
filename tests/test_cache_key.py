"""Score caches are keyed by content: what a teacher and the data hold and the settings that
change the draws, never where the files live or which process scores them."""

from __future__ import annotations

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


@pytest.mark.parametrize(("device", "dtype", "drawing"), [
    ("cpu", "float32", {"dtype": "float32"}),   # the key CPU scores always had
    ("cpu", "bfloat16", {"dtype": "float32"}),  # no autocast off CUDA: float32 numbers
    ("cuda", "float32", {"dtype": "float32", "device_type": "cuda"}),  # Philox draws, not numpy's
    ("cuda:1", "float16", {"dtype": "float16", "device_type": "cuda"}),  # which GPU does not matter
    ("cuda", "bfloat16", {"dtype": "bfloat16", "device_type": "cuda"}),
    ("mps", "float16", {"dtype": "float32", "device_type": "mps"}),
])
def test_scores_drawn_or_rounded_differently_are_keyed_apart(device, dtype, drawing):
    import torch

    from kiwb.workers.score import drawing_key

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
