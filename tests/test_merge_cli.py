"""`kiwb merge` end to end on tiny real teachers fine-tuned from one base (tests/tiny_merge.py):
the merged run is chosen on the eval set, evaluated, exported and loaded by the pipeline, used
by `kiwb predict`, shown as a run, and starts a student; bad input is refused in one line
before anything is written."""

from __future__ import annotations

import json
import sqlite3

import pytest
from cli_helpers import run_kiwb, write_project
from test_bad_input import assert_refused
from tiny import build_teacher, make_texts, write_jsonl
from tiny_merge import build_merge_family

from kiwb.core.choices import MERGE_SCALE_GRID, TIES_TOP_K_GRID
from kiwb.kinds import KINDS, SEQUENCE
from kiwb.project.paths import ProjectPaths
from kiwb.project.run_folder import read_best

TOKEN = KINDS["token"]

# Each module of kiwb runs in the README's test command (`-m "not slow"`): one test here
# stays out of the slow mark for that; the others run in CI.

TRAINING = "[training]\nepochs = 2.0\nmin_steps = 0\nlearning_rate = 0.003\nbatch_size = 16\n" \
           "eval_every = 10\n"


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    root = tmp_path_factory.mktemp("merge")
    folders = build_merge_family(root)
    write_jsonl(root / "pool.jsonl", [{"text": r["text"]} for r in make_texts(48, seed=41)])
    write_jsonl(root / "eval.jsonl", make_texts(32, seed=42))
    return root, folders


def _project(root, folders, name: str, *, evaluation: bool = True, student: bool = True):
    extra = TRAINING + (f'student = "{folders["base"]}"\n' if student else "")
    return write_project(root / name, {"a": folders["a"], "b": folders["b"]},
                         root / "pool.jsonl", root / "eval.jsonl" if evaluation else None,
                         extra=extra)


def _jobs(project) -> int:
    path = ProjectPaths(project).store
    if not path.is_file():
        return 0
    with sqlite3.connect(path) as connection:
        return connection.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]


@pytest.fixture(scope="module")
def merged(family):
    """A project merged by TIES with lambda and k chosen on its labeled eval set."""
    root, folders = family
    project = _project(root, folders, "chosen")
    done = run_kiwb("merge", project, "--foreground", cwd=root)
    return project, done.stdout + done.stderr


@pytest.mark.slow
def test_ties_is_chosen_on_the_eval_set_and_recorded(merged, family):
    import torch
    from transformers import AutoModelForSequenceClassification

    project, log = merged
    run_dir = ProjectPaths(project).run_dir("merge-ties")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    record = manifest["merge"]
    assert record["chosen_on"] == "eval"
    assert len(record["tried"]) == len(MERGE_SCALE_GRID["ties"]) * len(TIES_TOP_K_GRID)
    best = max(record["tried"], key=lambda tried: tried["accuracy"])
    assert best["accuracy"] == max(t["accuracy"] for t in record["tried"])
    assert f"Chose lambda {record['lambda']:g}, k {record['top_k']:g}%" in log  # never silent
    assert "different labels (sports, politics / music, cooking)" in log  # the warning
    assert manifest["labels"] == ["sports", "politics", "music", "cooking"]
    # each teacher's head rows sit in their union slots, untouched by the backbone rule
    merged_model = AutoModelForSequenceClassification.from_pretrained(
        run_dir / "checkpoints" / "step-0000000")
    teacher_b = AutoModelForSequenceClassification.from_pretrained(family[1]["b"])
    torch.testing.assert_close(merged_model.classifier.weight[2:], teacher_b.classifier.weight)
    torch.testing.assert_close(merged_model.classifier.bias[2:], teacher_b.classifier.bias)
    assert merged_model.config.id2label[3] == "cooking"


@pytest.mark.slow
def test_the_merge_evaluates_exports_and_predicts(merged, tmp_path):
    project, _ = merged
    manifest = read_best(ProjectPaths(project).run_dir("merge-ties"))
    report = json.loads(run_kiwb("evaluate", project, "--run", "merge-ties", "--json",
                                 cwd=project).stdout)
    assert report["accuracy"] == pytest.approx(manifest["metrics"]["accuracy"])
    assert manifest["metrics"]["metric"] == "accuracy"  # named as a trained run's figure is
    destination = tmp_path / "exported"
    run_kiwb("export", project, "--run", "merge-ties", "--to", destination, "--foreground",
             cwd=project)
    from transformers import pipeline

    classify = pipeline("text-classification", model=str(destination))
    answer = classify("the chef baked bread with garlic in the oven")[0]
    assert answer["label"] in {"sports", "politics", "music", "cooking"}
    card = (destination / "README.md").read_text()
    assert "# Merged model from kiwb run `merge-ties`" in card
    assert "chosen on the labeled eval set among 24 settings" in card
    printed = run_kiwb("predict", destination, "the striker scored a goal", cwd=project).stdout
    assert printed.split()[0] in {"sports", "politics", "music", "cooking"}


def test_without_labels_the_defaults_are_used_and_said(family):
    root, folders = family
    project = _project(root, folders, "unlabeled", evaluation=False)
    done = run_kiwb("merge", project, "--method", "task-arithmetic", "--foreground", cwd=root)
    assert "No labeled eval set to choose on: using the default lambda 0.3" in done.stderr
    record = json.loads((ProjectPaths(project).run_dir("merge-task-arithmetic")
                         / "manifest.json").read_text())["merge"]
    assert (record["lambda"], record["chosen_on"]) == (0.3, "default")
    run_kiwb("merge", project, "--method", "average", "--foreground", cwd=root)
    manifest = json.loads((ProjectPaths(project).run_dir("merge-average")
                           / "manifest.json").read_text())
    average = manifest["merge"]
    assert (average["lambda"], average["base"]) == (None, None)

    # a student may start from it (kiwb train --init-from-merge): the run's training data points
    # at the merge's checkpoint and pins it; a merge of other labels is refused in one line
    from types import SimpleNamespace

    from kiwb.errors import KiwbError
    from kiwb.project.config import load_config
    from kiwb.workers.merge_start import start_from_merge

    config = load_config(project)
    data = SimpleNamespace(labels=manifest["labels"], manifest={}, init_from=None)
    start_from_merge(config, "merge-average", data)
    pinned = data.manifest["init_from_merge"]
    assert data.init_from.name == pinned["checkpoint"] and pinned["run"] == "merge-average"
    assert pinned["method"] == "average" and len(pinned["weights"]) == 64
    other = SimpleNamespace(labels=["x", "y"], manifest={}, init_from=None)
    with pytest.raises(KiwbError, match="not this project's union labels"):
        start_from_merge(config, "merge-average", other)


@pytest.mark.slow
def test_a_student_starts_from_the_merge(merged):
    project, _ = merged
    run_kiwb("score", project, "--foreground", cwd=project)
    done = run_kiwb("train", project, "--init-from-merge", "merge-ties", "--foreground",
                    cwd=project)
    assert "Starting from the weights of merge run merge-ties" in done.stdout + done.stderr
    run_dir = ProjectPaths(project).run_dir("muki-hard-from-merge-ties")
    start = json.loads((run_dir / "manifest.json").read_text())["init_from_merge"]
    assert (start["run"], start["method"]) == ("merge-ties", "ties")
    assert_refused(run_kiwb("train", project, "--init-from-merge", "muki-hard-from-merge-ties",
                            "--run", "other", cwd=project, check=False),
                   "is a trained run, not a merge")
    # the merge replaced under the same name is another start: the run does not resume on it
    run_kiwb("merge", project, "--method", "average", "--run", "merge-ties", "--force",
             "--foreground", cwd=project)
    resumed = run_kiwb("train", project, "--init-from-merge", "merge-ties", "--resume",
                       "--foreground", cwd=project, check=False)
    assert resumed.returncode == 2
    assert "the merge run it started from changed" in resumed.stderr


@pytest.mark.slow
def test_bad_input_is_refused_in_one_line_and_nothing_is_written(family, teachers_dir):
    root, folders = family
    project = _project(root, folders, "refusals", student=False)
    wider = build_teacher(root / "wider", "bert", ("music", "cooking"), trained=True, seed=3)
    config = json.loads((wider / "config.json").read_text())
    config["intermediate_size"] = 48  # the file says what shape its tensors would have
    (wider / "config.json").write_text(json.dumps(config))
    cases = [
        (("--lambda", "0"), "--lambda 0: lambda scales"),
        (("--lambda", "2.5"), "give a number in (0, 2]"),
        (("--top-k", "0"), "--top-k 0: k is the percentage"),
        (("--top-k", "101"), "give a number in (0, 100]"),
        (("--method", "ties"), "pass --base FOLDER or set [training] student"),
        (("--method", "average", "--lambda", "1"), "takes neither --lambda nor --base"),
    ]
    for options, message in cases:
        assert_refused(run_kiwb("merge", project, *options, cwd=root, check=False), message)
    mixed = write_project(root / "mixed", {"a": folders["a"], "r": teachers_dir / "teacher_b"},
                          root / "pool.jsonl", root / "eval.jsonl")
    assert_refused(run_kiwb("merge", mixed, "--method", "average", cwd=root, check=False),
                   "cannot merge teacher 'r' (RobertaForSequenceClassification)")
    shapes = write_project(root / "shapes", {"a": folders["a"], "w": wider},
                           root / "pool.jsonl", root / "eval.jsonl")
    assert_refused(run_kiwb("merge", shapes, "--method", "average", cwd=root, check=False),
                   "intermediate_size is 48 against 64")
    for folder in (project, mixed, shapes):
        assert _jobs(folder) == 0
        assert not any(ProjectPaths(folder).runs.glob("merge-*"))


@pytest.mark.slow
def test_a_teacher_from_another_base_is_refused_by_its_similarity(family):
    """Same architecture and shapes, another starting point: the job refuses it, naming the
    cosine between its weights and the base's, and writes no run."""
    root, folders = family
    stranger = build_teacher(root / "stranger", "bert", ("music", "cooking"), seed=5)
    project = write_project(root / "stranger-project", {"a": folders["a"], "s": stranger},
                            root / "pool.jsonl", root / "eval.jsonl",
                            extra=f'[training]\nstudent = "{folders["base"]}"\n')
    done = run_kiwb("merge", project, "--method", "task-arithmetic", "--lambda", "0.5",
                    "--foreground", cwd=root, check=False)
    assert done.returncode != 0
    assert "teacher 's' was not fine-tuned from the base" in done.stderr + done.stdout
    assert "the cosine between their weights is 0.0" in done.stderr + done.stdout
    assert not (ProjectPaths(project).run_dir("merge-task-arithmetic-lambda0.5")).exists()


@pytest.mark.slow
def test_heads_of_one_shape_with_other_labels_are_explained_where_merging_is_in_question(
        family, merged, tmp_path):
    """kiwb merge says what averaging the heads elsewhere would do; a plain init only notes it,
    in one short line and no warning (the first thing a newcomer sees on the demo)."""
    _, folders = family
    done = run_kiwb("init", tmp_path / "fresh", "--teacher", f"a={folders['a']}", "--teacher",
                    f"b={folders['b']}", cwd=tmp_path)
    assert "Warning" not in done.stdout and "same shape" not in done.stdout
    (note,) = [line for line in done.stdout.splitlines() if line.startswith("Note:")]
    assert note.startswith("Note: 1 pair(s) of teachers have classifier heads of one shape") \
        and "kiwb merge" in note
    _, log = merged
    assert ("Note: teachers a and b have classifier heads of the same shape (2 labels x 32)"
            in " ".join(log.split()))


@pytest.mark.slow
def test_the_merged_config_keeps_no_thresholds_of_teacher_0_and_iob1_taggers_are_refused(
        family, tmp_path):
    """A kiwb export as teacher 0 carries label_thresholds tuned for its own labels: the merged
    model must not inherit them; an IOB1 tagger's I- rows mean other things than BIO2's."""
    import shutil

    from kiwb.errors import TeacherError
    from kiwb.workers.merge import load_merge_inputs, merged_backbone, merged_model
    from kiwb.workers.teachers import TeacherInfo, inspect_teacher

    _, folders = family
    exported = tmp_path / "exported_a"
    shutil.copytree(folders["a"], exported)
    config = json.loads((exported / "config.json").read_text())
    config["label_thresholds"] = {"sports": 0.3, "politics": 0.7}
    (exported / "config.json").write_text(json.dumps(config))
    teachers = [inspect_teacher("a", str(exported)), inspect_teacher("b", str(folders["b"]))]
    inputs = load_merge_inputs(teachers, SEQUENCE, None, needs_base=False)
    model = merged_model(inputs, merged_backbone(inputs, "average", None, None))
    assert getattr(model.config, "label_thresholds", None) is None
    assert model.config.id2label == {0: "sports", 1: "politics", 2: "music", 3: "cooking"}
    tagger = TeacherInfo("t", exported, ("O", "I-PER"), "BertForTokenClassification", "bert",
                         False, "token", ("PER",), "iob1")
    with pytest.raises(TeacherError, match="tags in the iob1 scheme"):
        load_merge_inputs([tagger, tagger], TOKEN, None, needs_base=False)
