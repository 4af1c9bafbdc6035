"""What each kind of job is asked to do: one typed spec per kind, the single source for its
command-line flags, the workbench's form values, the settings stored with the job, the
worker's reading of them and the command that resumes it.

A field left None means "as kiwb.toml says"; the worker puts the given ones over the
project's config. Torch-free: the CLI parser and the workbench import this module.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from kiwb.core.choices import (
    DEFAULT_MERGE_METHOD,
    DEFAULT_ROUTING,
    MERGE_METHODS,
    SUPERVISED,
    TRAINING_METHODS,
)
from kiwb.core.training_defaults import AUTO, DEFAULT_EPOCHS, DEFAULT_MIN_STEPS
from kiwb.errors import KiwbError
from kiwb.project.config_schema import IntegrationConfig, TrainingConfig, rules_of
from kiwb.project.devices import DEVICE_FORMS, check_device, device_list
from kiwb.project.setting_knobs import Flag, either, other_kinds_methods, shown_settings

# The integration settings a job may set: those kiwb.toml's [integration] declares (the
# record kiwb.project.records.IntegrationSettings holds the same names).
INTEGRATION_CHOICES = tuple(each.name for each in dataclasses.fields(IntegrationConfig))
SCORE_RUN = "scores"  # scoring jobs write the project's shared score cache: one writer at a time
INTEGRATION_RUN = "integration"  # integration rewrites the project's targets: one at a time


def flag(name: str, help: str, *, default: Any = None, **how) -> Any:
    """A spec field (default `default`) written on the command line as `name`."""
    return field(default=default, metadata={"flag": Flag(name, help, default=default, **how)})


def _for_argparse(help: str) -> str:
    """A help text as argparse reads it: a literal % (TIES' "top-k%") doubled, since argparse
    expands %-formats in help and fails on any other."""
    return help.replace("%", "%%")


class JobSpec:
    """Shared behaviour of the specs; each subclass is a frozen dataclass of its options."""

    kind: ClassVar[str]

    shared_run: ClassVar[str] = ""  # the run of kinds that write project-wide data

    def job_run(self) -> str:
        """The run the job writes (its lock): a training run's name, or the kind's shared run."""
        return getattr(self, "run", None) or self.shared_run

    def settings(self) -> dict[str, Any]:
        """The settings stored with the job (JSON)."""
        return {name: _jsonable(value) for name, value in dataclasses.asdict(self).items()}

    @classmethod
    def from_settings(cls, settings: dict[str, Any], *, run: str | None = None):
        """The spec of stored settings; a key no field has is refused, not ignored."""
        names = {spec_field.name for spec_field in dataclasses.fields(cls)}
        unknown = sorted(set(settings) - names)
        if unknown:
            raise KiwbError(f"{cls.kind} job settings: unknown key {unknown[0]!r}; "
                            f"known: {', '.join(sorted(names))}")
        values = dict(settings)
        if "run" in names and not values.get("run") and run:
            values["run"] = run
        return cls(**values)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """The spec's flags on a subcommand's parser."""
        for spec_field in dataclasses.fields(cls):
            how: Flag | None = spec_field.metadata.get("flag")
            if how is None:
                continue
            if how.type is bool:  # a switch; absent, the field keeps its default (None: unset)
                parser.add_argument(how.name, dest=spec_field.name, help=_for_argparse(how.help),
                                    action="store_const", const=not how.negative,
                                    default=how.default)
                for alias in how.aliases:
                    parser.add_argument(alias, dest=spec_field.name, help=argparse.SUPPRESS,
                                        action="store_const", const=not how.negative,
                                        default=how.default)
                continue
            parser.add_argument(how.name, dest=spec_field.name, type=how.type,
                                help=_for_argparse(how.help),
                                metavar=how.metavar, choices=how.choices, required=how.required,
                                default=how.default)

    @classmethod
    def from_args(cls, args: argparse.Namespace, **given):
        """The spec of parsed command-line arguments (`given` overrides: resolved paths)."""
        values = {spec_field.name: getattr(args, spec_field.name)
                  for spec_field in dataclasses.fields(cls) if hasattr(args, spec_field.name)}
        return cls(**{**values, **given})

    def command(self, project: str) -> str:
        """The `kiwb KIND PROJECT --flags` line that starts this job again."""
        options: list[str] = []
        # The run first: it is what a reader looks for in a resume hint.
        for spec_field in sorted(dataclasses.fields(self), key=lambda each: each.name != "run"):
            how: Flag | None = spec_field.metadata.get("flag")
            value = getattr(self, spec_field.name)
            if how is None or value is None or value == how.default:
                continue
            if how.type is bool:
                options += [how.name] if value is (not how.negative) else []
            else:
                options += [how.name, str(value)]
        return shlex.join(["kiwb", self.kind, project, *options])

    def resume_command(self, project: str) -> str:
        """The command that continues (or repeats) this job from where it stopped."""
        return self.command(project)

    def check(self) -> None:
        """Refuse, in one line, a device no worker could name (a typo in --device or
        --devices); called before the job is recorded, so a refused job leaves no row."""
        if getattr(self, "device", None) is not None:
            check_device(self.device)
        device_list(getattr(self, "devices", None))

    def overrides(self, *names: str) -> dict[str, Any]:
        """The given (not None) values among `names`, to put over a config section."""
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}


@dataclass(frozen=True)
class ScoreSpec(JobSpec):
    """MC-dropout scoring of every text by every teacher."""

    kind: ClassVar[str] = "score"
    shared_run: ClassVar[str] = SCORE_RUN
    device: str | None = flag("--device", f"override [scoring] device ({DEVICE_FORMS})")
    batch_size: int | None = flag("--batch-size", "override [scoring] batch_size", type=int)
    devices: str | None = flag("--devices", "score on several devices at once, one process "
                               "each: a comma list (cuda:0,cuda:1 or cpu,cpu) or all (every "
                               "GPU here); results are those of one process", metavar="LIST")
    representations: bool | None = flag(
        "--representations", "also add each teacher's representation to scores made without it "
        "(one dropout-off forward per text; the mahalanobis and knn routings read it)", type=bool)

    def device_list(self) -> list[str] | None:
        return device_list(self.devices)


class _MethodOptions(JobSpec):
    """The integration choices shared by `integrate` and `train` (None: [integration]'s), and
    for a job that trains, the [training] settings it overrides (None: [training]'s)."""

    declared: ClassVar[type] = IntegrationConfig  # the [integration] declaration its flags come from
    trained: ClassVar[type | None] = None  # the [training] one, for a job that trains

    def _given(self, declared: type | None) -> dict[str, Any]:
        """The given (not None) settings among those `declared` gives this job a field for."""
        if declared is None:
            return {}
        names = {each.name for each in dataclasses.fields(declared)}
        return self.overrides(*[each.name for each in dataclasses.fields(self) if each.name in names])

    def integration_overrides(self) -> dict[str, Any]:
        """The given integration choices, to put over the project's [integration] section."""
        return self._given(self.declared)

    def training_overrides(self) -> dict[str, Any]:
        """The given [training] settings, to put over the project's [training] section."""
        return self._given(self.trained)

    def resolved(self, integration) -> dict[str, Any]:
        """Every integration setting this job resolves to: each given one, else the project's
        `integration` section's."""
        given = self.integration_overrides()
        return {each.name: given.get(each.name, getattr(integration, each.name))
                for each in dataclasses.fields(self.declared)}

    def check_given(self, declared: type | None, *, numbers_only: bool = False) -> None:
        """Refuse, in kiwb.toml's words naming the flag, a given setting its declaration does
        not accept (a type or range: --class-weighting 1.5, --tau 0, --min-steps -1);
        `numbers_only`: only the settings with a range. The method is left to the teachers'
        kind, which checks its own (check_before_recording)."""
        from kiwb.project.config_checks import checked_setting

        for setting, shown in shown_settings(declared) if declared is not None else ():
            value = getattr(self, setting.name, None)
            if value is None or setting.name == "method" or (numbers_only and not _ranged(setting)):
                continue
            checked_setting(declared, setting.name, value, shown.flag.name)

    def __post_init__(self):
        # A [training] number is checked as kiwb.toml's is wherever the spec is made. A name
        # (the device, the student) is not: JobSpec.check refuses a misspelt device before a
        # job is recorded, and a job recorded before that check must still read back.
        self.check_given(self.trained, numbers_only=True)

    def check(self) -> None:
        """Also refuse a given integration setting kiwb.toml's rules do not accept."""
        super().check()
        self.check_given(self.declared)

    def check_routing(self, config) -> None:
        """Refuse, in one line and before a job starts for it, a routing the project cannot
        use (kiwb.project.config_checks.check_routing); `config` has its "auto" settings
        resolved (kiwb.project.teacher_kinds.load_project). The CLI and the workbench's
        forms both ask here. A supervised run routes nothing, so it is never refused."""
        from kiwb.project.config_checks import check_routing

        if self.method == SUPERVISED:
            return
        check_routing(config, self.routing or config.integration.routing, labels=self.labels)


def _ranged(setting: dataclasses.Field) -> bool:
    """Whether a setting's rules give it a range (a number)."""
    rules = rules_of(setting)
    return any(bound is not None for bound in (rules.min, rules.gt, rules.max, rules.lt))


def job_options(job: str, declared: type = IntegrationConfig,
                trained: type | None = None) -> type[_MethodOptions]:
    """The spec base of a job that integrates (`integrate`, `train`): one field per setting
    the [integration] declaration `declared` (and, for a job that trains, the [training] one
    `trained`) gives this job a flag (Shown.jobs), None unless given. Made from the
    declarations, so a new setting's flag needs no edit here."""
    fields = [(setting.name, f"{setting.type} | None", field(default=None, metadata={"flag": shown.flag}))
              for each in (declared, trained) if each is not None
              for setting, shown in shown_settings(each) if job in shown.jobs]
    return dataclasses.make_dataclass(f"_{job.title()}Options", fields, bases=(_MethodOptions,),
                                      frozen=True,
                                      namespace={"__module__": __name__, "declared": declared,
                                                 "trained": trained})


@dataclass(frozen=True)
class IntegrateSpec(job_options("integrate")):
    """Integration of the scores into training targets, conflicts and routing figures."""

    kind: ClassVar[str] = "integrate"
    shared_run: ClassVar[str] = INTEGRATION_RUN


@dataclass(frozen=True)
class TrainSpec(job_options("train", IntegrationConfig, TrainingConfig)):
    """Training of the student on the integrated targets (run None: named by its method)."""

    kind: ClassVar[str] = "train"
    run: str | None = flag("--run", "run name (default: from the method, e.g. muki-hard)")
    method: str | None = flag("--method", either(TRAINING_METHODS) + other_kinds_methods(", or supervised"))
    devices: str | None = flag("--devices", "train data-parallel on several devices, one "
                               "process each (data-parallel, the same global batch): "
                               "a comma list (cuda:0,cuda:1 or cpu,cpu) or all", metavar="LIST")
    init_from_merge: str | None = flag("--init-from-merge", "start the student from the weights "
                                       "of a merge run (kiwb merge) instead of [training] "
                                       "student", metavar="RUN")
    resume: bool = flag("--resume", "continue the run from its last checkpoint", type=bool,
                        default=False)

    def device_list(self) -> list[str] | None:
        return device_list(self.devices)

    def resume_command(self, project: str) -> str:
        return dataclasses.replace(self, resume=True).command(project)

    def named(self, integration, default_routing: str = DEFAULT_ROUTING) -> TrainSpec:
        """This spec with its run named (when not named) from the settings it resolves to over
        the project's `[integration]` section (`default_routing`: the teachers' kind's, which
        the name leaves out)."""
        if self.run:
            return self
        name = default_run_name(self.resolved(integration), default_routing=default_routing)
        return dataclasses.replace(self, run=started_from(name, self.init_from_merge))


def student_missing(config) -> str:
    """Why a run cannot start without a student base, and the fix (refused before a job is
    recorded, kiwb.project.job_checks; by the job too, for a kiwb.toml edited since)."""
    return (f"{config.file}: [training] student is not set; name a base checkpoint (folder or "
            "hub id) there or pass --student")


def started_from(run: str, merge_run: str | None) -> str:
    """A run's default name, with the merge run it starts from (--init-from-merge)."""
    return f"{run}-from-{merge_run}" if merge_run else run


def _checked_range(option: str, value: float, top: float, what: str) -> None:
    """A merge setting within (0, top], else one line saying what it is and what to give."""
    if not 0 < value <= top:
        raise KiwbError(f"{option} {value:g}: {what}; give a number in (0, {top:g}]")


@dataclass(frozen=True)
class MergeSpec(JobSpec):
    """A union classifier made by merging the teachers' weights, without training."""

    kind: ClassVar[str] = "merge"
    run: str | None = flag("--run", "run name (default: merge-METHOD, with any lambda or k "
                           "given)")
    method: str = flag("--method", "; ".join(f"{name}: {text}" for name, text in
                                             MERGE_METHODS.items())
                       + f" (default {DEFAULT_MERGE_METHOD})", choices=tuple(MERGE_METHODS),
                       metavar="NAME", default=DEFAULT_MERGE_METHOD)
    scale: float | None = flag("--lambda", "task arithmetic and TIES: the scale of the summed "
                               "(or merged) changes, in (0, 2] (default: chosen on the labeled "
                               "eval set, else 0.3 for task arithmetic and 1 for TIES)",
                               type=float, metavar="LAMBDA")
    top_k: float | None = flag("--top-k", "TIES: the percentage of each teacher's changes kept, "
                               "in (0, 100] (default: chosen on the labeled eval set, else 20)",
                               type=float, metavar="K")
    base: str | None = flag("--base", "task arithmetic and TIES: the checkpoint the teachers "
                            "were fine-tuned from (default: [training] student)",
                            type=lambda text: str(Path(text).resolve()) if Path(text).exists()
                            else text)
    device: str | None = flag("--device", f"where candidates are evaluated ({DEVICE_FORMS}; "
                              "default: [training] device)")
    force: bool = flag("--force", "replace an existing run of this name", type=bool,
                       default=False)

    def __post_init__(self):
        if self.method not in MERGE_METHODS:
            raise KiwbError(f"merge method {self.method!r}: choose one of "
                            f"{', '.join(MERGE_METHODS)}")
        if self.scale is not None:
            _checked_range("--lambda", self.scale, 2, "lambda scales the teachers' changes from "
                           "the base (0.3 or 1 are usual)")
        if self.top_k is not None:
            _checked_range("--top-k", self.top_k, 100, "k is the percentage of each teacher's "
                           "changes TIES keeps (20 is usual)")
        if self.method == "average" and (self.scale is not None or self.base is not None):
            raise KiwbError("--method average takes neither --lambda nor --base (it averages "
                            "the teachers' weights); use --method task-arithmetic or ties")
        if self.top_k is not None and self.method != "ties":
            raise KiwbError(f"--top-k applies to --method ties, not {self.method}; leave it out")

    def job_run(self) -> str:
        return self.run or default_merge_run_name(self.method, self.scale, self.top_k)

    def named(self) -> MergeSpec:
        return self if self.run else dataclasses.replace(self, run=self.job_run())


def default_merge_run_name(method: str, scale: float | None, top_k: float | None) -> str:
    """merge-METHOD, with the lambda and k given on the command line (chosen ones are not)."""
    return (f"merge-{method}" + (f"-lambda{scale:g}" if scale is not None else "")
            + (f"-k{top_k:g}" if top_k is not None else ""))


@dataclass(frozen=True)
class ExportSpec(JobSpec):
    """Writing a trained student as a Hugging Face model."""

    kind: ClassVar[str] = "export"
    run: str = flag("--run", "the run to export (default: the newest)", default="")
    checkpoint: str = flag("--checkpoint", "best (default), last, or a step number",
                           default="best")
    destination: str | None = flag("--to", "destination folder (default: PROJECT/exports/RUN)",
                                   type=lambda text: str(Path(text).resolve()))
    force: bool = flag("--force", "replace an existing destination", type=bool, default=False)
    push_to_hub: str | None = flag("--push-to-hub", "then upload the folder to this Hub model "
                                   "repository (made if missing)", metavar="ORG/NAME")
    private: bool = flag("--private", "a repository --push-to-hub makes is private", type=bool,
                         default=False)

    def check(self) -> None:
        """Also refuse, before anything is exported, an upload that cannot start here (the
        repository's form, no token, offline)."""
        super().check()
        if self.destination is not None:  # a folder it cannot write: now, not in the job
            from kiwb.project.export_destination import check_writable

            check_writable(Path(self.destination))
        if self.push_to_hub is not None:
            from kiwb.project.hub_upload_check import upload_problem

            problem = upload_problem(self.push_to_hub)
            if problem:
                raise KiwbError(problem)


def learning_rate_value(text: str) -> float | str:
    """--learning-rate's value: a positive number, or auto."""
    if text == AUTO:
        return AUTO
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a positive number like 5e-5, or auto")
    return value


# A teacher trains with the student's [training] defaults for batch and length: one rule for
# both, read from the one place that sets them.
_STUDENT_BATCH = TrainingConfig().batch_size
_STUDENT_LENGTH = TrainingConfig().max_length


@dataclass(frozen=True)
class TeachSpec(JobSpec):
    """Fine-tuning a teacher on a subset of labels (`kiwb teach`; runs in the foreground)."""

    kind: ClassVar[str] = "teach"
    base: str = flag("--base", "base checkpoint folder or hub id", required=True, default="")
    data: str = flag("--data", "labeled training data (csv/jsonl/parquet/folder, or "
                     "hf://datasets/ORG/NAME)", required=True, default="")
    labels: str = flag("--labels", "comma-separated labels this teacher learns", required=True,
                       default="")
    out: str = flag("--out", "folder to write the checkpoint to", required=True, default="")
    dev: str | None = flag("--dev", "labeled dev data to pick the best epoch")
    split: str | None = flag("--split", "split of --data to read, where it has several "
                             "(a saved DatasetDict, a Hub data set)")
    dev_split: str | None = flag("--dev-split", "split of --dev to read (the same data set "
                                 "as --data may give both)")
    subset: str | None = flag("--subset", "subset of a Hub data set --data, where it has several")
    dev_subset: str | None = flag("--dev-subset", "subset of a Hub data set --dev")
    text_column: str = flag("--text-column", "text column of the data (default: text)",
                            default="text")
    label_column: str = flag("--label-column", "label column of the data (default: label)",
                             default="label")
    # The length and learning rate default as the student's [training] do: one rule for both.
    epochs: float = flag("--epochs", f"passes over the data (default {DEFAULT_EPOCHS:g}; a "
                         "teacher still takes --min-steps steps or more)", type=float,
                         default=DEFAULT_EPOCHS)
    min_steps: int = flag("--min-steps", f"train at least this many optimizer steps (default "
                          f"{DEFAULT_MIN_STEPS}; 0: exactly --epochs)", type=int, metavar="N",
                          default=DEFAULT_MIN_STEPS)
    learning_rate: float | str = flag(
        "--learning-rate", "peak learning rate, or auto: 2e-5 x (768 / the base's hidden "
        "size)^2 within 1e-5 and 3e-3, as for students (default auto)",
        type=learning_rate_value, default=AUTO)
    balance: str = flag("--balance", "balance the classes: none, loss (weights n / (C n_c)) or "
                        "sampler (texts drawn so each class comes up alike) (default none)",
                        choices=("none", "loss", "sampler"), default="none")
    batch_size: int = flag("--batch-size", f"texts per step (default {_STUDENT_BATCH})",
                           type=int, default=_STUDENT_BATCH)
    max_length: int = flag("--max-length", f"tokens per text (default {_STUDENT_LENGTH})",
                           type=int, default=_STUDENT_LENGTH)
    seed: int = flag("--seed", "random seed (default 0)", type=int, default=0)
    device: str = flag("--device", f"{DEVICE_FORMS} (default: auto)", default="auto")
    force: bool = flag("--force", "replace an existing --out folder", type=bool, default=False)

    @property
    def label_list(self) -> list[str]:
        return [label.strip() for label in self.labels.split(",") if label.strip()]

    def check(self) -> None:
        super().check()
        from kiwb.project.config_checks import checked_setting
        from kiwb.project.config_schema import TrainingConfig

        checked_setting(TrainingConfig, "epochs", self.epochs, "--epochs")
        if self.min_steps < 0:
            raise KiwbError(f"--min-steps {self.min_steps}: give 0 (teach exactly --epochs) or "
                            "a positive number of steps")


JOB_SPECS: dict[str, type[JobSpec]] = {spec.kind: spec for spec in
                                       (ScoreSpec, IntegrateSpec, TrainSpec, ExportSpec,
                                        MergeSpec)}
JOB_KINDS = tuple(JOB_SPECS)  # the jobs that run recorded (teach runs in the foreground)


def spec_of(kind: str, settings: dict[str, Any], run: str | None = None) -> JobSpec:
    """The typed spec of a stored job's settings."""
    if kind not in JOB_SPECS:
        raise KiwbError(f"unknown job kind {kind!r}; use one of {', '.join(JOB_KINDS)}")
    return JOB_SPECS[kind].from_settings(settings, run=run)


def job_label(kind: str, run: str) -> str:
    """`score`, `integrate`, or `train RUN` / `export RUN`: how a job is named to the user."""
    spec = JOB_SPECS.get(kind)
    return kind if spec is not None and run == spec.shared_run else f"{kind} {run}"


def default_run_name(settings: dict[str, Any], *, default_routing: str = DEFAULT_ROUTING,
                     declared: type = IntegrationConfig) -> str:
    """The run name `kiwb train` picks for these integration settings (every one of
    INTEGRATION_CHOICES, as TrainSpec.resolved gives them): the method, then what differs from
    the defaults, each setting's part as `declared` says (Shown.name_part), in its order (the
    workbench and the CLI both name runs with this); the routing is named when it is not the
    teachers' kind's default."""
    return "".join(shown.name_part(settings[setting.name], settings, default_routing)
                   for setting, shown in shown_settings(declared) if shown.name_part is not None)


def _jsonable(value: Any) -> Any:
    return str(value) if isinstance(value, Path) else value
