"""A setting is declared once, beside its kiwb.toml key. An [integration] setting added there
alone reaches the command-line flag, the workbench's form, the stored record, the run's name
and the kinds' refusals, and the records, keys and manifests made before it read as before; a
[training] one reaches the flag and its check, the train form, the run's manifest (and so the
resume check) and the kinds' refusals."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import pytest

from kiwb.errors import ConfigError
from kiwb.kinds import KINDS, SEQUENCE
from kiwb.project.config_schema import IntegrationConfig, ProjectConfig, TrainingConfig, _setting
from kiwb.project.job_specs import TrainSpec, default_run_name, job_options
from kiwb.project.records import IntegrationSettings
from kiwb.project.setting_form import TRAIN_FORM, TRAINING_FORM, form_overrides, form_settings
from kiwb.project.setting_knobs import Flag, Shown, unless_supervised
from kiwb.project.teacher_kinds import check_method, check_training_overrides

MULTI_LABEL, TOKEN = KINDS["multi-label"], KINDS["token"]


@dataclass(frozen=True)
class WithSmoothing(IntegrationConfig):
    """kiwb.toml's [integration] with one setting more, declared in this one place."""

    smoothing: float = _setting(
        "Label smoothing of the targets.", 0.0, min=0, max=1,
        shown=Shown(Flag("--smoothing", "label smoothing of the targets", type=float),
                    name_part=unless_supervised(lambda value: f"-ls{value:g}" if value else ""),
                    off=0.0, stored_when_off=False, kinds=("sequence",),
                    form="label smoothing"))


@dataclass(frozen=True)
class SmoothingTrainSpec(job_options("train", WithSmoothing)):
    kind: ClassVar[str] = "train"


@dataclass(frozen=True, kw_only=True)
class SmoothingSettings(IntegrationSettings, WithSmoothing):
    """The stored record of the wider declaration: no field restated."""


def test_a_setting_declared_once_has_a_flag_that_resumes_as_given():
    parser = argparse.ArgumentParser()
    SmoothingTrainSpec.add_arguments(parser)
    assert "--smoothing SMOOTHING" in parser.format_help()
    assert "label smoothing of the targets" in parser.format_help()
    spec = SmoothingTrainSpec.from_args(parser.parse_args(["--smoothing", "0.1", "--no-mc"]))
    assert (spec.smoothing, spec.use_mc) == (0.1, False)
    assert spec.command("proj") == "kiwb train proj --no-mc --smoothing 0.1"
    assert SmoothingTrainSpec.from_args(parser.parse_args([])).smoothing is None  # kiwb.toml's


def test_a_setting_declared_once_names_runs_only_when_on():
    project = WithSmoothing(routing="rank")
    given = SmoothingTrainSpec(smoothing=0.1).resolved(project)
    assert given["smoothing"] == 0.1
    assert default_run_name(given, declared=WithSmoothing) == "muki-hard-ls0.1"
    assert default_run_name({**given, "method": "supervised"}, declared=WithSmoothing) == "supervised"
    # kiwb.toml's value is read when the flag is not given; off, the name is as before
    assert default_run_name(SmoothingTrainSpec().resolved(WithSmoothing(routing="rank", smoothing=0.3)),
                            declared=WithSmoothing) == "muki-hard-ls0.3"
    assert default_run_name(SmoothingTrainSpec().resolved(project), declared=WithSmoothing) == \
        default_run_name(TrainSpec().resolved(IntegrationConfig(routing="rank"))) == "muki-hard"


def test_a_setting_declared_once_is_on_the_form_and_checked_there_as_in_kiwb_toml():
    form = form_settings("train", WithSmoothing)
    assert [s.name for s in form] == [s.name for s in TRAIN_FORM] + ["smoothing"]
    smoothing = form[-1]
    assert (smoothing.label, smoothing.flag, smoothing.shown(WithSmoothing())) == \
        ("label smoothing", False, "0.0")
    answers = {s.name: s.shown(WithSmoothing()) for s in form}
    assert form_overrides(WithSmoothing(), form, {**answers, "smoothing": "0.1"}, "the train form") \
        == {"smoothing": 0.1}
    with pytest.raises(ConfigError, match=r"the train form.*smoothing"):
        form_overrides(WithSmoothing(), form, {**answers, "smoothing": "2"}, "the train form")
    assert "smoothing" not in [s.name for s in form_settings("integrate", WithSmoothing)]


def test_a_setting_declared_once_is_in_the_record_and_off_reads_as_before():
    on = SmoothingSettings(smoothing=0.1)
    assert on.to_dict()["smoothing"] == 0.1
    assert SmoothingSettings.from_dict(on.to_dict()) == on
    # off, it is left out: records, run manifests and integration keys made before it existed
    # match, and such a record reads back as off without a store migration
    older = IntegrationSettings()
    assert SmoothingSettings().to_dict() == older.to_dict()
    assert SmoothingSettings().pinned() == older.pinned()
    assert SmoothingSettings().keyed() == older.keyed()
    assert SmoothingSettings.from_dict(older.to_dict()).smoothing == 0.0
    assert on.keyed()["smoothing"] == 0.1


def test_a_setting_declared_for_some_kinds_is_refused_by_the_others_in_one_line(tmp_path):
    config = ProjectConfig(root=tmp_path, file=tmp_path / "kiwb.toml", name="p")
    on = {"smoothing": 0.1}
    check_method(config, SEQUENCE, "muki-hard", "rank", on, declared=WithSmoothing)
    check_method(config, MULTI_LABEL, "ant", "confidence", {"smoothing": 0.0},
                 declared=WithSmoothing)  # at its default: nothing to refuse
    check_method(config, MULTI_LABEL, "supervised", None, on, declared=WithSmoothing)
    with pytest.raises(ConfigError) as refused:
        check_method(config, MULTI_LABEL, "ant", "confidence", on, declared=WithSmoothing)
    assert str(refused.value) == (
        f"{tmp_path / 'kiwb.toml'}: [integration] smoothing = 0.1 does not apply to multi-label "
        "text classification teachers: it applies to single-label text classification teachers "
        "only; leave it at its default (0)")


def test_a_flag_is_checked_against_its_declaration_before_a_job_is_recorded():
    SmoothingTrainSpec(smoothing=0.5, class_weighting=1.0, tau=0.1).check()
    with pytest.raises(ConfigError) as refused:
        SmoothingTrainSpec(smoothing=1.5).check()
    assert str(refused.value) == ("--smoothing: smoothing must be >= 0 and <= 1, got 1.5; for "
                                  "example smoothing = 0.0 (the default)")
    for spec, flag in ((TrainSpec(class_weighting=-0.5), "--class-weighting"),
                       (TrainSpec(tau=0.0), "--tau")):
        with pytest.raises(ConfigError, match=f"^{flag}: "):
            spec.check()


@dataclass(frozen=True)
class WithClipping(TrainingConfig):
    """kiwb.toml's [training] with one setting more that `kiwb train` overrides, declared in
    this one place."""

    max_grad_norm: float = _setting(
        "Clip the gradients' norm to this.", 1.0, gt=0,
        shown=Shown(Flag("--max-grad-norm", "override [training] max_grad_norm", type=float),
                    jobs=("train",), kinds=("sequence",), form="clip norm"))


@dataclass(frozen=True)
class ClippingTrainSpec(job_options("train", IntegrationConfig, WithClipping)):
    kind: ClassVar[str] = "train"


def test_a_training_setting_declared_once_has_a_checked_flag_and_reaches_the_manifest():
    parser = argparse.ArgumentParser()
    ClippingTrainSpec.add_arguments(parser)
    assert "override [training] max_grad_norm" in parser.format_help()
    spec = ClippingTrainSpec.from_args(parser.parse_args(["--max-grad-norm", "0.5", "--epochs", "2"]))
    assert spec.training_overrides() == {"epochs": 2.0, "max_grad_norm": 0.5}
    assert spec.integration_overrides() == {}
    assert spec.command("p") == "kiwb train p --epochs 2.0 --max-grad-norm 0.5"
    # what the run pins (and a resume compares) is the table with the flags put over it
    training = WithClipping(**spec.training_overrides())
    assert (training.manifest()["max_grad_norm"], training.manifest()["epochs"]) == (0.5, 2.0)
    # checked as kiwb.toml's key is, wherever the spec is made
    with pytest.raises(ConfigError) as refused:
        ClippingTrainSpec(max_grad_norm=0.0)
    assert str(refused.value).startswith("--max-grad-norm: max_grad_norm must be > 0, got 0.0")


def test_a_training_setting_declared_once_is_on_the_train_form_and_refused_by_other_kinds(tmp_path):
    form = form_settings("train", WithClipping)
    assert [s.name for s in form] == [s.name for s in TRAINING_FORM] + ["max_grad_norm"]
    answers = {s.name: s.shown(WithClipping(student="base")) for s in form}
    assert answers["max_grad_norm"] == "1.0" and answers["student"] == "base"
    assert form_overrides(WithClipping(student="base"), form, {**answers, "max_grad_norm": "0.5"},
                          "the train form") == {"max_grad_norm": 0.5}
    config = ProjectConfig(root=tmp_path, file=tmp_path / "kiwb.toml", name="p")
    check_training_overrides(config, SEQUENCE, {"max_grad_norm": 0.5}, declared=WithClipping)
    with pytest.raises(ConfigError) as refused:
        check_training_overrides(config, TOKEN, {"max_grad_norm": 0.5}, declared=WithClipping)
    assert str(refused.value) == (
        f"{tmp_path / 'kiwb.toml'}: --max-grad-norm does not apply to token classification (named entities) teachers: it "
        "applies to single-label text classification teachers only; leave it out")


@dataclass(frozen=True)
class WithPairMargin(TrainingConfig):
    """[training] with a setting for a kind that kiwb.toml itself declares ([embedding])."""

    pair_margin: float = _setting(
        "Margin of the pair loss.", 0.0, min=0,
        shown=Shown(Flag("--pair-margin", "override [training] pair_margin", type=float),
                    jobs=("train",), kinds=("embedding",)))


def test_a_setting_for_a_kind_kiwb_toml_declares_is_refused_as_kiwb_toml_is_read(tmp_path):
    """Where the kinds a setting is for are declared by a kiwb.toml table ([[tasks]],
    [embedding]), a project without it refuses the setting as kiwb.toml is read, in kiwb.toml's
    words, from its declaration alone: feature_weight's check is this one."""
    from kiwb.project.config_checks import _check_declared_kind_settings
    from kiwb.project.config_schema import EmbeddingConfig

    file = tmp_path / "kiwb.toml"
    config = ProjectConfig(root=tmp_path, file=file, name="p",
                           training=WithPairMargin(pair_margin=0.5))
    with pytest.raises(ConfigError) as refused:
        _check_declared_kind_settings(config)
    assert str(refused.value) == (f"{file}: [training] pair_margin applies to embedding projects, "
                                  "and kiwb.toml has no [embedding]: remove it")
    _check_declared_kind_settings(dataclasses.replace(config, embedding=EmbeddingConfig()))
    _check_declared_kind_settings(dataclasses.replace(config, training=WithPairMargin()))
    with pytest.raises(ConfigError) as refused:
        _check_declared_kind_settings(ProjectConfig(root=tmp_path, file=file, name="p",
                                                    training=TrainingConfig(feature_weight=1.0)))
    assert str(refused.value) == (f"{file}: [training] feature_weight applies to multi-task "
                                  "projects, and kiwb.toml has no [[tasks]]: remove it")
