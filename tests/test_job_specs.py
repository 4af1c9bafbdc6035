"""Job specs: one definition of each job's options for the CLI, the store, the worker and resume."""

from __future__ import annotations

import argparse
import dataclasses
import shlex

import pytest

from kiwb.cli import build_parser
from kiwb.errors import KiwbError
from kiwb.project.config import IntegrationConfig
from kiwb.project.job_specs import (
    JOB_SPECS,
    ExportSpec,
    IntegrateSpec,
    ScoreSpec,
    TrainSpec,
    default_run_name,
    job_label,
    spec_of,
)
from kiwb.project.jobs import JobState, taken_over_by

# One fully given spec of each kind: every option set away from its default.
GIVEN = [
    ScoreSpec(device="cpu", batch_size=8),
    IntegrateSpec(method="uhc", tau=0.5, reweight=False, use_mc=False, routing="stacked",
                  conflict_threshold=0.25),
    TrainSpec(run="r1", method="muki-soft", tau=2.0, reweight=False, use_mc=False,
              routing="confidence", student="/models/base", epochs=1.5, min_steps=0,
              device="cuda:1", resume=True),
    ExportSpec(run="r1", checkpoint="last", destination="/tmp/out", force=True),
]


def _parsed(command: str):
    """The spec `kiwb ...` would start, parsed by kiwb's own parser."""
    words = shlex.split(command)[1:]
    args = build_parser().parse_args(words)
    return JOB_SPECS[args.command].from_args(args)


@pytest.mark.parametrize("spec", GIVEN, ids=lambda spec: spec.kind)
def test_a_spec_survives_the_store_and_the_command_line(spec):
    assert spec_of(spec.kind, spec.settings()) == spec
    command = spec.command("proj")
    assert _parsed(command) == spec, command


@pytest.mark.parametrize("kind", JOB_SPECS)
def test_every_spec_field_is_a_flag_of_its_command(kind):
    """The parser is built from the specs, so no option can exist on one side only."""
    spec_class = JOB_SPECS[kind]
    subcommand = next(action for action in build_parser()._actions
                      if action.dest == "command").choices[kind]
    dests = {action.dest for action in subcommand._actions}
    assert {field.name for field in dataclasses.fields(spec_class)} <= dests


def test_defaults_are_left_off_the_command():
    assert ScoreSpec().command("proj") == "kiwb score proj"
    assert ExportSpec(run="r").command("my proj") == "kiwb export 'my proj' --run r"
    assert IntegrateSpec(routing="rank").command("p") == "kiwb integrate p --routing rank"


def test_the_train_resume_command_names_the_run_first_and_resumes():
    spec = TrainSpec(run="muki-hard", method="muki-hard", epochs=2.0, reweight=False)
    assert spec.resume_command("p") == ("kiwb train p --run muki-hard --method muki-hard "
                                        "--no-reweight --epochs 2.0 --resume")
    assert _parsed(spec.resume_command("p")) == dataclasses.replace(spec, resume=True)


def test_stored_settings_with_an_unknown_key_are_refused_in_one_line():
    with pytest.raises(KiwbError) as refused:
        spec_of("train", {"run": "r", "epochz": 3})
    assert str(refused.value).startswith("train job settings: unknown key 'epochz'")
    assert "\n" not in str(refused.value)
    with pytest.raises(KiwbError, match="unknown job kind 'teach'"):
        spec_of("teach", {})


def test_older_settings_without_a_run_take_the_jobs_run():
    assert spec_of("train", {"epochs": 1}, run="r7") == TrainSpec(run="r7", epochs=1)
    assert spec_of("export", {}, run="r7").run == "r7"


def test_a_negative_min_steps_is_refused_wherever_the_spec_is_made():
    with pytest.raises(KiwbError, match="^--min-steps: min_steps must be >= 0, got -1"):
        TrainSpec(run="r", min_steps=-1)


def test_job_labels_name_the_run_only_where_there_are_several():
    assert [job_label(spec.kind, spec.job_run()) for spec in GIVEN] == [
        "score", "integrate", "train r1", "export r1"]


def test_a_job_state_resumes_from_its_typed_spec():
    spec = GIVEN[2]
    job = JobState(id=1, kind="train", run="r1", settings=spec.settings(), pid=None, host=None,
                   device=None, log_path=None, created_at=0.0, started_at=None, ended_at=None,
                   heartbeat_at=None, status="cancelled")
    assert job.spec == spec and job.label == "train r1"
    assert job.resume_command("p") == spec.resume_command("p")


def _job(job_id: int, spec, status: str) -> JobState:
    return JobState(id=job_id, kind=spec.kind, run=spec.job_run(), settings=spec.settings(),
                    pid=None, host=None, device=None, log_path=None, created_at=0.0,
                    started_at=None, ended_at=None, heartbeat_at=None, status=status)


def test_a_failed_job_is_taken_over_only_by_a_later_job_doing_the_same_work():
    integrate, train = GIVEN[1], GIVEN[2]
    failed = _job(10, integrate, "failed")
    other = _job(12, dataclasses.replace(integrate, method="muki-hard"), "finished")  # another one
    again = _job(13, integrate, "finished")  # the same integration, run again
    assert taken_over_by(failed, [failed, other]) is None
    assert taken_over_by(failed, [failed, other, again]) is again
    lost = _job(20, train, "lost")
    resumed = _job(21, dataclasses.replace(train, resume=True, device="cpu"), "finished")
    assert taken_over_by(lost, [lost, resumed]) is resumed
    assert taken_over_by(lost, [lost, _job(22, train, "running")]).id == 22


@pytest.mark.parametrize(("settings", "expected"), [
    (("muki-hard", 1.0, True, True, "rank"), "muki-hard"),
    (("muki-soft", 0.5, True, True, "confidence"), "muki-soft-tau0.5-confidence"),
    (("muki-soft", 0.5, True, True, "rank"), "muki-soft"),  # tau acts on raw confidences only
    (("muki-hard", 1.0, False, False, "rank"), "muki-hard-no-mc-no-reweight"),
    (("uhc", 1.0, True, True, "stacked"), "uhc-stacked"),
    (("supervised", 1.0, True, True, "stacked"), "supervised"),
])
def test_default_run_name_names_what_differs_from_the_defaults(settings, expected):
    method, tau, reweight, use_mc, routing = settings
    given = {"method": method, "tau": tau, "reweight": reweight, "use_mc": use_mc,
             "routing": routing}
    assert default_run_name(TrainSpec(**given).resolved(IntegrationConfig())) == expected
    project = IntegrationConfig(method="muki-hard" if method != "muki-hard" else "uhc",
                                tau=tau, reweight=reweight, use_mc=use_mc, routing=routing)
    assert TrainSpec(method=method).named(project).run == expected
    assert TrainSpec(run="mine").named(project).run == "mine"


def test_the_integration_settings_are_declared_once():
    """kiwb.toml's [integration] table declares them; the record, the jobs' choices and the run
    name read the same names, so a setting added there reaches every form."""
    from kiwb.project.job_specs import INTEGRATION_CHOICES
    from kiwb.project.records import IntegrationSettings

    declared = [each.name for each in dataclasses.fields(IntegrationConfig)]
    assert list(INTEGRATION_CHOICES) == declared
    assert {each.name for each in dataclasses.fields(IntegrationSettings)} == set(declared)
    assert set(TrainSpec().resolved(IntegrationConfig())) == set(declared)
    # transfer, set in kiwb.toml alone, reaches the run's name
    from kiwb.core.choices import DEFAULT_ROUTING

    project = IntegrationConfig(transfer=True, routing=DEFAULT_ROUTING)
    assert TrainSpec(method="ant").named(project).run == "ant-transfer"


def test_the_workbench_forms_read_the_declaration_and_name_runs_as_the_cli_does():
    """The forms' [integration] fields take their choices, flags and checks from kiwb.toml's
    declaration; their answers become the same spec, and the same run name, as the flags."""
    from kiwb.core.choices import AUTO_ROUTING, DEFAULT_ROUTING, ROUTINGS
    from kiwb.errors import ConfigError
    from kiwb.project.setting_form import TRAIN_FORM, form_overrides

    by_name = {setting.name: setting for setting in TRAIN_FORM}
    # "auto" too: single-label teachers choose per project, other kinds take their own
    assert by_name["routing"].choices() == (AUTO_ROUTING, *ROUTINGS)
    assert [s.name for s in TRAIN_FORM if s.flag] == ["use_mc", "reweight", "labels"]
    project = IntegrationConfig(routing=DEFAULT_ROUTING, transfer=True)
    answers = {"method": "muki-soft", "routing": DEFAULT_ROUTING, "tau": "0.5",
               "reweight": False, "use_mc": True, "labels": False}
    chosen = form_overrides(project, TRAIN_FORM, answers, "the train form")
    # what equals kiwb.toml's is left to kiwb.toml, as `kiwb train` without the flag leaves it
    assert chosen == {"method": "muki-soft", "tau": 0.5, "reweight": False}
    parser = argparse.ArgumentParser()
    TrainSpec.add_arguments(parser)
    flags = parser.parse_args(["--method", "muki-soft", "--tau", "0.5", "--no-reweight"])
    from_cli = TrainSpec(**{name: getattr(flags, name) for name in chosen})
    assert TrainSpec(**chosen) == from_cli
    assert TrainSpec(**chosen).named(project).run == from_cli.named(project).run
    assert TrainSpec(method="ant").named(project).run == TrainSpec(
        **form_overrides(project, TRAIN_FORM, {**answers, "method": "ant", "tau": "0.2",
                                               "reweight": True}, "f")).named(project).run
    # refused in kiwb.toml's words, naming the form and the key
    for key, answer, words in (("tau", "0", "the train form: tau must be > 0, got 0.0"),
                               ("tau", "sharp", 'the train form: tau must be a number, got "sharp"'),
                               ("routing", "temperature", "the train form: routing = "
                                '"temperature" was removed')):
        with pytest.raises(ConfigError, match=words):
            form_overrides(project, TRAIN_FORM, {**answers, key: answer}, "the train form")
    assert form_overrides(project, TRAIN_FORM, {**answers, "method": "supervised"},
                          "f")["method"] == "supervised"
    # an embedding project's methods are its pair weightings, which [integration] never lists
    pairs = dataclasses.replace(project, method="mc")
    assert "method" not in form_overrides(pairs, TRAIN_FORM, {**answers, "method": "mc"}, "f")
    assert form_overrides(pairs, TRAIN_FORM, {**answers, "method": "maskout"},
                          "f")["method"] == "maskout"


def test_the_given_labels_switch_keeps_its_old_spelling_hidden():
    """`--given-labels` (kiwb teach's `--labels` names labels); `--labels` still reads, unshown."""
    parser = argparse.ArgumentParser()
    TrainSpec.add_arguments(parser)
    assert parser.parse_args(["--given-labels"]).labels is True
    assert parser.parse_args(["--labels"]).labels is True  # the former spelling, for one release
    assert parser.parse_args([]).labels is None
    shown = parser.format_help()
    assert "--given-labels" in shown and "--labels " not in shown.replace("--given-labels", "")
    assert TrainSpec(labels=True).command("proj").split()[3:] == ["--given-labels"]


@pytest.mark.parametrize(("given", "demo"), [("sequence", "sequence"), ("token", "token"),
                                             ("classification", "sequence"), ("ner", "token"),
                                             ("multi-label", "multi-label")])
def test_the_demo_is_named_by_its_kind_and_reads_its_former_names(given, demo):
    """`kiwb demo --kind` names a demo by its teachers' kind, as kiwb.toml and the kinds table
    do; the names it had before (classification, ner) are still read, not shown."""
    assert build_parser().parse_args(["demo", "--kind", given]).kind == demo
    assert "classification" not in build_parser().format_help()
