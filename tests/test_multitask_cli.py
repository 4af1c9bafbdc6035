"""The multi-task kind end to end through the real CLI, on tiny real teachers of two
architectures: a BERT that knows the topics sports and politics and a RoBERTa (its own BPE
tokenizer) that knows music and cooking answer the single-label task `topic` (which needs
integrating), a sigmoid BERT answers the multi-label task `tags`. Score, integrate (each task
by its kind; VENUS' mean consensus), train (with and without the feature loss, supervised),
evaluate, export (read back by the documented snippet, in the model card and the kind's page),
predict, a conflict labeled per task, an exported multi-task student as a teacher whose head
is named; and the bad input, each one line with nothing written."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from test_bad_input import assert_refused, run_kiwb
from tiny import (
    TEACHER_A_LABELS,
    TEACHER_B_LABELS,
    build_teacher,
    tiny_bert_config,
    wordpiece_tokenizer,
    write_jsonl,
)
from tiny_multilabel import build_multilabel_teacher
from tiny_multitask import make_multitask_texts

from kiwb.project.run_folder import read_best

pytestmark = pytest.mark.slow

TOPICS = ["sports", "politics", "music", "cooking"]
TASKS = """
[[tasks]]
name = "topic"
[[tasks]]
name = "tags"
kind = "multi-label"
"""
TRAINING = """
[training]
student = "{student}"
epochs = 6
min_steps = 0
learning_rate = 0.006
batch_size = 16
eval_every = 20
"""
KIND_PAGE = Path(__file__).resolve().parents[1] / "docs" / "kinds" / "multi-task.md"


@pytest.fixture(scope="module")
def mt_root(tmp_path_factory) -> Path:
    import torch
    from transformers import BertForSequenceClassification

    root = tmp_path_factory.mktemp("multitask")
    build_teacher(root / "bert_topics", "bert", TEACHER_A_LABELS, seed=1)
    build_teacher(root / "roberta_topics", "roberta", TEACHER_B_LABELS, seed=2)
    build_multilabel_teacher(root / "tagger", tuple(TOPICS), seed=3)
    torch.manual_seed(0)
    tokenizer = wordpiece_tokenizer(None)
    BertForSequenceClassification(tiny_bert_config(("x", "y"), len(tokenizer))).save_pretrained(
        root / "base")
    tokenizer.save_pretrained(root / "base")
    write_jsonl(root / "pool.jsonl", make_multitask_texts(160, seed=21))
    write_jsonl(root / "eval.jsonl", make_multitask_texts(48, seed=22))
    return root


def write_mt_project(project: Path, root: Path, *, tasks: str = TASKS, teachers=None,
                     eval_extra: str = "", eval_file: Path | None = None,
                     training: str = "") -> Path:
    teachers = teachers if teachers is not None else [
        ("a", root / "bert_topics", ["topic"]), ("b", root / "roberta_topics", ["topic"]),
        ("c", root / "tagger", ["tags"])]
    project.mkdir(parents=True, exist_ok=True)
    lines = ['name = "mt"', tasks]
    for name, path, answered, *extra in teachers:
        lines += ["[[teachers]]", f"name = {json.dumps(name)}", f"path = {json.dumps(str(path))}",
                  f"tasks = {json.dumps(answered)}", *extra]
    lines += ["[data.unlabeled]", f"path = {json.dumps(str(root / 'pool.jsonl'))}",
              "[data.eval]", f"path = {json.dumps(str(eval_file or root / 'eval.jsonl'))}",
              eval_extra, "[scoring]", "mc_passes = 4", "shard_size = 64", 'device = "cpu"',
              TRAINING.format(student=root / "base"), training]
    (project / "kiwb.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return project


@pytest.fixture(scope="module")
def scored(mt_root, tmp_path_factory) -> Path:
    project = write_mt_project(tmp_path_factory.mktemp("proj") / "proj", mt_root)
    done = run_kiwb("score", project, "--foreground", cwd=project.parent)
    assert done.returncode == 0, done.stderr
    return project


def integrate(project: Path, *options: str) -> dict:
    done = run_kiwb("integrate", project, *options, "--json", cwd=project.parent)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_each_task_is_integrated_by_its_kind(scored):
    summary = integrate(scored)
    assert summary["teachers_kind"] == "multi-task"
    assert summary["labels"] == [f"topic/{t}" for t in TOPICS] + [f"tags/{t}" for t in TOPICS]
    assert summary["teacher_labels"]["b"] == ["topic/music", "topic/cooking"]
    tasks = summary["details"]["tasks"]
    assert list(tasks) == ["topic", "tags"]
    topic, tags = tasks["topic"], tasks["tags"]
    assert topic["teachers"] == ["a", "b"] and tags["teachers"] == ["c"]
    # the shared single-label task is routed as a single-label project is (rank by default)
    assert topic["summary"]["routing"]["name"] == "rank"
    assert sum(each["wins"] for each in topic["summary"]["per_teacher"]) == 160
    assert tags["summary"] is None  # one teacher: its answers, nothing to route
    # the untrained references per task on the eval set: the Ensemble beats either half alone
    assert topic["eval"]["ensemble"] > max(topic["eval"]["teachers"].values())
    assert 0 < tags["eval"]["ensemble"] <= 1
    mean = integrate(scored, "--method", "mean")
    assert mean["details"]["consensus"] == "mean of logits"
    assert mean["key"] != summary["key"]


def test_train_evaluate_export_predict_and_the_snippet(scored, mt_root, tmp_path):
    project = shutil.copytree(scored, tmp_path / "proj")
    done = run_kiwb("train", project, "--run", "venus", "--foreground", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "eval mean task score" in done.stdout + done.stderr
    manifest = json.loads((project / "runs" / "venus" / "manifest.json").read_text())
    assert manifest["kind"] == "multi-task" and manifest["feature_weight"] > 0
    best = read_best(project / "runs" / "venus")["metrics"]
    figures = best["details"]["tasks"]
    assert figures["topic"]["headline"] > 0.6 and figures["tags"]["headline"] > 0.5
    # heads only, and the gold-trained student
    (project / "kiwb.toml").write_text((project / "kiwb.toml").read_text().replace(
        "[training]", "[training]\nfeature_weight = 0.0"))
    for run, method in (("heads", "muki-hard"), ("gold", "supervised")):
        done = run_kiwb("train", project, "--run", run, "--method", method, "--foreground",
                        cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    assert json.loads((project / "runs" / "heads" / "manifest.json").read_text())[
        "feature_weight"] == 0.0
    report = json.loads(run_kiwb("evaluate", project, "--run", "venus", "--json",
                                 cwd=tmp_path).stdout)
    assert report["kind"] == "multi-task" and set(report["tasks"]) == {"topic", "tags"}
    assert report["tasks"]["topic"]["headline"] == figures["topic"]["headline"]
    out = tmp_path / "exported"
    done = run_kiwb("export", project, "--run", "venus", "--to", out, "--foreground",
                    cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    config = json.loads((out / "config.json").read_text())
    assert [head["name"] for head in config["task_heads"]] == ["topic", "tags"]
    assert "auto_map" not in config  # plain transformers, no remote code
    assert not any("kiwb_feature_adapters" in line for line in
                   (out / "model.safetensors").read_bytes()[:20000].decode("latin-1").split(","))
    texts = ["goal match referee team coach", "guitar album song recipe oven"]
    card = (out / "README.md").read_text()
    snippet = card.split("## Use")[1].split("```python\n")[1].split("```")[0]
    page = KIND_PAGE.read_text()
    assert snippet.split("\n", 1)[1] in page  # the kind's page documents the same lines
    namespace = {}
    exec(snippet.replace('"PATH/TO/THIS/FOLDER", ["your text here"]',
                         f"{str(out)!r}, {texts!r}"), namespace)
    answers = namespace["answers"]
    assert set(answers) == {"topic", "tags"} and len(answers["topic"]) == 2
    assert set(answers["topic"]) <= set(TOPICS) and all(set(t) <= set(TOPICS) for t in answers["tags"])
    printed = run_kiwb("predict", out, *texts, cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr
    lines = printed.stdout.strip().splitlines()
    assert len(lines) == 2 and all("topic:" in line and "tags:" in line for line in lines)
    assert f"topic: {answers['topic'][0]}" in lines[0]


def test_a_conflict_of_one_task_is_labeled_and_fed_back(scored, tmp_path):
    from kiwb.project.paths import ProjectPaths
    from kiwb.project.store import Store

    project = shutil.copytree(scored, tmp_path / "proj")
    key = integrate(project)["key"]
    with Store(ProjectPaths(project).store) as store:
        rows = store.connection.execute(
            "SELECT text, confidences FROM instances WHERE integration = ? ORDER BY margin",
            (key,)).fetchall()
    text, details = rows[0][0], json.loads(rows[0][1])
    assert text.startswith("[topic] ") and details["task"] == "topic"
    labels = tmp_path / "labels.csv"
    labels.write_text(f"text,label\n{json.dumps(text)},topic/cooking\n", encoding="utf-8")
    done = run_kiwb("labels", "import", project, labels, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    given = integrate(project, "--labels")
    assert given["key"] != key
    assert given["details"]["tasks"]["topic"]["summary"]["gold_labels"]["labeled"] == 1
    _a_run_reads_every_tasks_targets(project, given["key"])


def _a_run_reads_every_tasks_targets(project: Path, key: str) -> None:
    """A training run finds the integration kiwb integrate recorded by its key (the labels
    given, per task, as the tasks' own integrations fingerprint them), reads every task's
    targets kept beside it into its head slices, and pins the key."""
    import torch

    from kiwb.kinds.multitask.integrate_job import given_labels, integrate_tasks
    from kiwb.project.paths import ProjectPaths
    from kiwb.project.records import IntegrationSettings
    from kiwb.project.store import Store
    from kiwb.project.teacher_kinds import load_project
    from kiwb.workers.integration_targets import load_targets
    from kiwb.workers.score import plan_scoring
    from kiwb.workers.train import prepare
    from kiwb.workers.training_data import TrainRequest

    loaded = load_project(project)
    with Store(ProjectPaths(project).store) as store:
        settings = IntegrationSettings.from_dict(store.integration(key)["settings"])
        integration = integrate_tasks(loaded.config, store, settings,
                                      plan_scoring(loaded.config, store, kind=loaded.kind))
        assert integration.key == key
        assert given_labels(integration.data, settings, store) == {
            name: found.fingerprint for name, found in integration.tasks.items()}
        data = prepare(loaded.config, store, TrainRequest(run="r", settings=settings),
                       loaded.kind)
    kept = load_targets(project, key)
    assert data.manifest["integration"] == key
    columns = sum(len(part.labels) for part in integration.data.parts.values())
    assert torch.equal(data.targets[:, :columns], kept["targets"])  # then the features'
    assert torch.equal(data.weights[:, :columns], kept["weights"])


def test_an_exported_student_teaches_a_task_by_a_named_head(scored, mt_root, tmp_path):
    project = shutil.copytree(scored, tmp_path / "proj")
    assert run_kiwb("train", project, "--run", "r", "--foreground", cwd=tmp_path).returncode == 0
    out = tmp_path / "student"
    assert run_kiwb("export", project, "--run", "r", "--to", out, "--foreground",
                    cwd=tmp_path).returncode == 0
    second = write_mt_project(tmp_path / "second", mt_root, tasks=(
        '[[tasks]]\nname = "subject"\n'), teachers=[
        ("student", out, ["subject"], 'heads = ["topic"]'), ("a", mt_root / "bert_topics",
                                                            ["subject"])],
        eval_file=_renamed(mt_root, tmp_path, {"topic": "subject"}))
    done = run_kiwb("score", second, "--foreground", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = integrate(second)
    assert summary["details"]["tasks"]["subject"]["teachers"] == ["student", "a"]
    assert summary["teacher_labels"]["student"] == [f"subject/{t}" for t in TOPICS]
    # without [[tasks]], the multi-task model is refused in one line, naming the fix
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "kiwb.toml").write_text(
        f'name = "p"\n[[teachers]]\nname = "student"\npath = "{out}"\n[[teachers]]\n'
        f'name = "other"\npath = "{out}"\n[data.unlabeled]\npath = "{mt_root / "pool.jsonl"}"\n',
        encoding="utf-8")
    assert_refused(run_kiwb("score", plain, "--foreground", cwd=tmp_path),
                   "teacher 'student' is a kiwb multi-task model", "add the [[tasks]]")


def _renamed(root: Path, tmp: Path, columns: dict) -> Path:
    rows = [json.loads(line) for line in (root / "eval.jsonl").read_text().splitlines()]
    return write_jsonl(tmp / "renamed.jsonl", [{columns.get(k, k): v for k, v in row.items()}
                                                for row in rows])


def test_bad_input_is_one_line_and_writes_nothing(mt_root, tmp_path):
    def refused(project: Path, *fragments: str) -> None:
        assert_refused(run_kiwb("score", project, "--foreground", cwd=tmp_path), *fragments)
        assert not (project / "scores").exists() or not any((project / "scores").rglob("*.npz"))

    refused(write_mt_project(tmp_path / "unknown", mt_root, teachers=[
        ("a", mt_root / "bert_topics", ["topic"]), ("c", mt_root / "tagger", ["tag"])]),
        'teachers[2].tasks names "tag", which no [[tasks]] entry defines')
    refused(write_mt_project(tmp_path / "unanswered", mt_root, tasks=TASKS + '[[tasks]]\nname = "mood"\n'),
            'tasks[3].name "mood" is answered by no teacher')
    refused(write_mt_project(tmp_path / "twice", mt_root, tasks=TASKS + '[[tasks]]\nname = "topic"\n'),
            'tasks[3].name "topic" is already used by tasks[1]')
    refused(write_mt_project(tmp_path / "labels", mt_root, tasks=TASKS.replace(
        'name = "topic"', 'name = "topic"\nlabels = ["sports", "politics"]')),
        "teacher 'b': its head for task 'topic' has 2 labels", "not among the task's 2")
    refused(write_mt_project(tmp_path / "kinds", mt_root, teachers=[
        ("a", mt_root / "bert_topics", ["topic"]), ("c", mt_root / "tagger", ["topic"])],
        tasks=TASKS.replace('[[tasks]]\nname = "tags"\nkind = "multi-label"\n', "")),
        "its head for task 'topic' is multi-label but the task is single-label")
    assert_refused(run_kiwb("train", tmp_path / "unknown", "--feature-weight", "-1", cwd=tmp_path),
                   "--feature-weight: feature_weight must be >= 0, got -1.0")
    refused(write_mt_project(tmp_path / "one_head_two_tasks", mt_root, teachers=[
        ("a", mt_root / "bert_topics", ["topic"]), ("c", mt_root / "tagger", ["tags", "topic"])]),
        "teacher 'c' has one head", "cannot answer 2 tasks")
    labeled = write_mt_project(tmp_path / "labeled", mt_root)
    with open(labeled / "kiwb.toml", "a", encoding="utf-8") as handle:
        handle.write(f'[data.labeled]\npath = "{mt_root / "eval.jsonl"}"\n')
    refused(labeled, "[data.labeled] path is not read by multi-task projects")
    single = tmp_path / "single"
    single.mkdir()
    (single / "kiwb.toml").write_text(
        f'name = "s"\n[[teachers]]\nname = "a"\npath = "{mt_root / "bert_topics"}"\n'
        f'[[teachers]]\nname = "b"\npath = "{mt_root / "roberta_topics"}"\n'
        f'[data.unlabeled]\npath = "{mt_root / "pool.jsonl"}"\n'
        '[training]\nfeature_weight = 1.0\n', encoding="utf-8")
    refused(single, "[training] feature_weight applies to multi-task projects")
    (single / "kiwb.toml").write_text((single / "kiwb.toml").read_text().replace(
        "feature_weight = 1.0\n", ""), encoding="utf-8")
    assert_refused(run_kiwb("train", single, "--feature-weight", "1", cwd=tmp_path),
                   "--feature-weight does not apply to single-label text classification "
                   "teachers: it applies to multi-task text classification teachers only")
    prior = write_mt_project(tmp_path / "prior", mt_root)
    done = run_kiwb("score", prior, "--foreground", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert_refused(run_kiwb("integrate", prior, "--class-weighting", "0.5", cwd=tmp_path),
                   "class_weighting = 0.5 does not apply to multi-task text classification "
                   "teachers: it applies to a project of single-label teachers", "default (0)")
    no_tags = tmp_path / "no_tags.jsonl"
    write_jsonl(no_tags, [{k: v for k, v in row.items() if k != "tags"}
                          for row in make_multitask_texts(16, seed=5)])
    message = assert_refused(run_kiwb("score", write_mt_project(
        tmp_path / "column", mt_root, eval_file=no_tags), "--foreground", cwd=tmp_path),
        "no column 'tags' with the gold labels of task 'tags'", 'set tasks = ["topic"]')
    assert "[data.eval]" in message
    # as the line says: evaluate the other tasks only
    done = run_kiwb("score", write_mt_project(tmp_path / "column_ok", mt_root, eval_file=no_tags,
                                              eval_extra='tasks = ["topic"]'),
                    "--foreground", cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_the_documented_snippet_is_the_one_the_model_card_carries():
    from kiwb.kinds.multitask.heads import SNIPPET

    block = re.search(r"```python\n(path, texts = .*?)```", KIND_PAGE.read_text(), re.S)
    assert block is not None and block.group(1).split("\n", 1)[1] == SNIPPET


def test_merge_is_refused_for_multi_task_teachers(mt_root, tmp_path):
    project = write_mt_project(tmp_path / "merge", mt_root)
    assert_refused(run_kiwb("merge", project, "--method", "average", cwd=tmp_path),
                   "kiwb merge does not merge a multi-task project's teachers",
                   "distill them instead (kiwb train)")
    assert not (project / "runs").exists() or not any((project / "runs").iterdir())
