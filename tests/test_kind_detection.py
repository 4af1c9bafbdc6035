"""Which kind a checkpoint is: its model class, and for a sequence classifier its problem_type
(a sigmoid head is the multi-label kind's; kiwb.toml's problem_type overrides the checkpoint's,
and a head of no kind is refused in one line naming the override)."""

from __future__ import annotations

import json
import shutil
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
      "problem_type": "multi_label_classification"}, None, "multi-label"),
    ({"architectures": ["BertForSequenceClassification"]}, "multi_label_classification",
     "multi-label"),
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


def test_a_regression_head_is_refused_in_one_line_naming_the_override(tmp_path, sigmoid_teacher):
    regression = tmp_path / "regression"
    shutil.copytree(sigmoid_teacher, regression)
    config = json.loads((regression / "config.json").read_text())
    (regression / "config.json").write_text(json.dumps({**config, "problem_type": "regression"}))
    project = _project(tmp_path / "proj", regression)
    result = run_kiwb("score", project, "--foreground", cwd=tmp_path)
    assert_refused(result, "'tags'", "problem_type 'regression'",
                   '"single_label_classification"', '"multi_label_classification"')
    assert not score_files(project)


def test_problem_type_reads_a_sigmoid_head_as_multi_label_or_single_label(tmp_path, sigmoid_teacher):
    """The checkpoint's problem_type decides its kind; kiwb.toml's overrides it."""
    from kiwb.project.config import load_config
    from kiwb.tui.inspect import inspect_teacher as summarize
    from kiwb.workers.project_inputs import inspect_teachers

    as_saved = load_config(_project(tmp_path / "saved", sigmoid_teacher))
    assert inspect_teachers(as_saved)[0].kind == "multi-label"
    assert summarize(as_saved, as_saved.teachers[0]).kind == "multi-label"
    config = load_config(_project(tmp_path / "proj", sigmoid_teacher,
                                  'problem_type = "single_label_classification"\n'))
    teacher = inspect_teachers(config)[0]
    assert (teacher.kind, teacher.labels) == ("sequence", TEACHER_A_LABELS)
    summary = summarize(config, config.teachers[0])
    assert (summary.kind, summary.labels) == ("sequence", TEACHER_A_LABELS)


def test_each_kind_takes_its_own_methods():
    from kiwb.kinds import KINDS, SEQUENCE
    EMBEDDING, TOKEN = KINDS["embedding"], KINDS["token"]
    MULTI_LABEL = KINDS["multi-label"]

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
    with pytest.raises(ValueError, match=r"^unknown method 'muki-hrd': did you mean muki-hard\? "
                                         r"\(choose one of muki-hard, muki-soft, vanilla-kd, uhc "
                                         r"\(or supervised\)\)$"):
        SEQUENCE.check_method("muki-hrd")  # a typo, not another kind's method
    with pytest.raises(ValueError, match=r"^unknown method 'maskot': did you mean maskout\? "
                                         r"\(choose a pair weighting: mc, maskout, equal\)$"):
        EMBEDDING.check_method("maskot")
    with pytest.raises(ValueError, match=r"^method 'mean' does not apply to single-label"):
        SEQUENCE.check_method("mean")  # near none of theirs, and another kind's


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
