"""Which kind a checkpoint is: its model class, and for a sequence classifier its problem_type.

A sigmoid (multi-label) head is no distribution over labels: until the multi-label kind exists
kiwb refuses it in one line, naming problem_type and the kiwb.toml key that overrides it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_bad_input import assert_refused, run_kiwb, score_files
from tiny import TEACHER_A_LABELS, make_texts, tiny_bert_config, wordpiece_tokenizer, write_jsonl

from kiwb.kinds import kind_of_checkpoint


@pytest.mark.parametrize(("config", "override", "kind"), [
    ({"architectures": ["BertForSequenceClassification"]}, None, "sequence"),
    ({"architectures": ["BertForSequenceClassification"],
      "problem_type": "single_label_classification"}, None, "sequence"),
    ({"architectures": ["BertForSequenceClassification"],
      "problem_type": "multi_label_classification"}, None, None),
    ({"architectures": ["BertForSequenceClassification"],
      "problem_type": "multi_label_classification"}, "single_label_classification", "sequence"),
    ({"architectures": ["BertForSequenceClassification"],
      "problem_type": "regression"}, None, None),
    ({"architectures": ["BertForTokenClassification"]}, None, "token"),
    ({"architectures": ["BertModel"]}, None, None),
])
def test_the_kind_of_a_checkpoint(config, override, kind):
    found = kind_of_checkpoint(config, override)
    assert (found[0].name if found else None) == kind


@pytest.fixture(scope="module")
def sigmoid_teacher(tmp_path_factory) -> Path:
    """A tiny BERT sequence classifier saved with problem_type multi_label_classification."""
    from transformers import BertForSequenceClassification

    folder = tmp_path_factory.mktemp("sigmoid_teacher")
    tokenizer = wordpiece_tokenizer(folder)
    config = tiny_bert_config(TEACHER_A_LABELS, len(tokenizer))
    config.problem_type = "multi_label_classification"
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    assert json.loads((folder / "config.json").read_text())["problem_type"] == (
        "multi_label_classification")
    return folder


def _project(root: Path, teacher: Path, extra: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    pool = write_jsonl(root / "pool.jsonl", [{"text": r["text"]} for r in make_texts(8, seed=3)])
    entries = "".join(f'[[teachers]]\nname = "{name}"\npath = {json.dumps(str(teacher))}\n{extra}'
                      for name in ("tags", "more-tags"))
    (root / "kiwb.toml").write_text(
        f'name = "kinds"\n{entries}[data.unlabeled]\npath = {json.dumps(str(pool))}\n'
        '[scoring]\nmc_passes = 2\n', encoding="utf-8")
    return root


def test_a_multi_label_teacher_is_refused_in_one_line_naming_the_override(tmp_path, sigmoid_teacher):
    project = _project(tmp_path / "proj", sigmoid_teacher)
    result = run_kiwb("score", project, "--foreground", cwd=tmp_path)
    assert_refused(result, "'tags'", "multi-label classifier",
                   'problem_type = "single_label_classification"')
    assert not score_files(project)


def test_problem_type_in_kiwb_toml_reads_it_as_single_label(tmp_path, sigmoid_teacher):
    from kiwb.project.config import load_config
    from kiwb.tui.inspect import inspect_teacher as summarize
    from kiwb.workers.project_inputs import inspect_teachers

    refused = load_config(_project(tmp_path / "refused", sigmoid_teacher))
    assert "multi-label classifier" in summarize(refused, refused.teachers[0]).problem
    config = load_config(_project(tmp_path / "proj", sigmoid_teacher,
                                  'problem_type = "single_label_classification"\n'))
    teacher = inspect_teachers(config)[0]
    assert (teacher.kind, teacher.labels) == ("sequence", TEACHER_A_LABELS)
    summary = summarize(config, config.teachers[0])
    assert (summary.kind, summary.labels) == ("sequence", TEACHER_A_LABELS)


def test_each_kind_takes_its_own_methods():
    from kiwb.kinds import SEQUENCE, TOKEN
    from kiwb.kinds.multilabel import MULTI_LABEL

    for method in ("muki-hard", "muki-soft", "vanilla-kd", "uhc", "supervised"):
        SEQUENCE.check_method(method)
        TOKEN.check_method(method)
    for method in ("ant", "vote", "mean", "muki-hard", "muki-soft", "supervised"):
        MULTI_LABEL.check_method(method)
    with pytest.raises(ValueError, match=r"method 'ant' does not apply to single-label text "
                                         r"classification teachers; choose one of muki-hard, "
                                         r"muki-soft, vanilla-kd, uhc \(or supervised\)"):
        SEQUENCE.check_method("ant")
    with pytest.raises(ValueError, match="method 'uhc' does not apply to multi-label"):
        MULTI_LABEL.check_method("uhc")


@pytest.mark.slow
def test_a_method_of_another_kind_is_refused_in_one_line(scored_project, tmp_path):
    def jobs() -> list:
        return json.loads(run_kiwb("jobs", scored_project, "--all", "--json", cwd=tmp_path).stdout)

    before = jobs()
    for verb in ("integrate", "train"):
        result = run_kiwb(verb, scored_project, "--method", "ant", cwd=tmp_path)
        assert_refused(result, "kiwb.toml", "method 'ant' does not apply to single-label",
                       "muki-hard, muki-soft, vanilla-kd, uhc")
    # Refused before a job is recorded: the shared project's job list is as it was.
    assert jobs() == before
