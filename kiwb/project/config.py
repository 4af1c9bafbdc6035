"""The kiwb.toml schema: typed settings, loading with one-line errors, and new project files."""

from __future__ import annotations

import dataclasses
import difflib
import math
import operator
import os
import re
import shlex
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from kiwb.core.choices import DEFAULT_ROUTING, FEW_LABEL_ROUTINGS, ROUTINGS
from kiwb.errors import ConfigError
from kiwb.project.atomic import atomic_write_with
from kiwb.project.config_render import (
    optional_inner,
    render_toml,
    table_type,
    toml_fields,
    toml_value,
)
from kiwb.project.teach_report import refuse_untrained_teacher

CONFIG_NAME = "kiwb.toml"

_DEVICE = {"pattern": r"auto|cpu|cuda(:\d+)?|mps", "expected": "auto, cpu, cuda, cuda:N or mps"}
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+", re.ASCII)


def _setting(
    text: str,
    default: Any = dataclasses.MISSING,
    *,
    factory: Any = dataclasses.MISSING,
    **rules: Any,
) -> Any:
    """A field whose metadata holds its one-line help and its validation rules."""
    return field(default=default, default_factory=factory, metadata={"help": text, **rules})


@dataclass(frozen=True)
class TeacherConfig:
    """One fine-tuned teacher classifier."""

    name: str = _setting(
        "Short unique name of this teacher, shown in tables and plots.",
        pattern=r"[A-Za-z0-9_.-]+",
        expected='only letters, digits, "_", "." and "-"',
        example="teacher-a",
    )
    path: str = _setting(
        'Local Hugging Face checkpoint folder, or a hub id like "org/model".',
        path="model",
        example="models/teacher-a",
    )
    labels: tuple[str, ...] | None = _setting(
        "Label names in the checkpoint's label-id order; replaces its config.id2label.",
        None,
        min_items=2,
        unique=True,
        example=("World", "Sports"),
        fix="list every label of the checkpoint in label-id order, "
        "or remove labels to use its config.id2label",
    )
    trust_remote_code: bool = _setting(
        "Run modeling code shipped with the checkpoint (only for checkpoints you trust).", False
    )


@dataclass(frozen=True)
class DatasetConfig:
    """A table of texts read from one file or saved dataset."""

    path: str = _setting(
        "A csv, jsonl, json or parquet file, or a folder saved by datasets' save_to_disk.",
        path="data",
        example="data/texts.csv",
    )
    text_column: str = _setting("Column holding the text.", "text")
    label_column: str | None = _setting(
        "Column holding the gold label name.", None, example="label"
    )
    split: str | None = _setting(
        "Split to read when path is a saved DatasetDict.", None, example="train"
    )
    limit: int | None = _setting("Use only the first N rows.", None, min=1, example=1000)


@dataclass(frozen=True)
class DataConfig:
    """The texts a project works on."""

    unlabeled: DatasetConfig | None = _setting(
        "Unlabeled texts: the teachers score them and the student learns from them.",
        None,
        example={"path": "data/unlabeled.csv"},
    )
    eval: DatasetConfig | None = _setting(
        "Labeled texts, used only to evaluate the student and the teachers (needs label_column).",
        None,
        example={"path": "data/eval.csv", "label_column": "label"},
    )
    labeled: DatasetConfig | None = _setting(
        "A few labeled texts (not the eval set) for few-label routing (trust, temperature); "
        "they also train the student as one-hot targets (needs label_column).",
        None,
        example={"path": "data/labeled.csv", "label_column": "label"},
    )


@dataclass(frozen=True)
class ScoringConfig:
    """How the teachers score the unlabeled texts with Monte-Carlo dropout."""

    mc_passes: int = _setting("Dropout-on forward passes per text and teacher (K).", 16, min=1)
    batch_size: int = _setting("Texts per forward batch.", 32, min=1)
    max_length: int = _setting("Longest input in tokens; longer texts are truncated.", 128, min=8)
    device: str = _setting("Where to run: auto, cpu, cuda, cuda:N or mps.", "auto", **_DEVICE)
    dtype: str = _setting(
        "Numeric type; float16 and bfloat16 mean autocast on CUDA.",
        "float32",
        choices=("float32", "float16", "bfloat16"),
    )
    strategy: str = _setting(
        "How the K passes run: loop (one after another), replicate (as one batch) or auto.",
        "auto",
        choices=("auto", "loop", "replicate"),
    )
    shard_size: int = _setting("Texts per resumable shard of scores.", 2048, min=1)
    seed: int = _setting("Random seed of the dropout masks.", 0, min=0)


@dataclass(frozen=True)
class IntegrationConfig:
    """How the teachers' predictions merge into one target over the union of their labels."""

    method: str = _setting(
        "muki-hard (most confident teacher), muki-soft (confidence-weighted), vanilla-kd or uhc.",
        "muki-hard",
        choices=("muki-hard", "muki-soft", "vanilla-kd", "uhc"),
    )
    tau: float = _setting(
        "Temperature of the muki-soft weights softmax(c / tau) under confidence routing (other "
        "routings weigh by their estimates); lower is sharper.", 0.2, gt=0
    )
    reweight: bool = _setting(
        "Weight each text by the confidence margin of its two most confident teachers.", True
    )
    use_mc: bool = _setting(
        "Use Monte-Carlo dropout confidence; false uses one dropout-off pass.", True
    )
    routing: str = _setting(
        "How teachers are compared per text: "
        + ", ".join(ROUTINGS)
        + " (see the README); trust and temperature need [data.labeled].",
        DEFAULT_ROUTING,
        choices=tuple(ROUTINGS),
    )
    conflict_threshold: float = _setting(
        "Margin below which a text is listed as a conflict between teachers.", 0.1, min=0, max=1
    )


@dataclass(frozen=True)
class TrainingConfig:
    """How the student is trained on the integrated targets."""

    student: str | None = _setting(
        "Base checkpoint of the student: a local folder or a hub id.",
        None,
        path="model",
        example="google-bert/bert-base-uncased",
    )
    epochs: float = _setting("Passes over the unlabeled texts.", 3.0, gt=0)
    min_steps: int = _setting(
        "Train at least this many optimizer steps: a small pool gets more epochs.", 300, min=0
    )
    learning_rate: float | str = _setting(
        'Peak AdamW learning rate, or "auto": 2e-5 x (768 / the student\'s hidden size)^2, '
        "kept within 1e-5 and 3e-3 (BERT-base 2e-5, MiniLM-L6 8e-5).",
        "auto",
        gt=0,
        keyword="auto",
    )
    batch_size: int = _setting("Texts per training step.", 32, min=1)
    warmup_ratio: float = _setting(
        "Share of the steps spent warming up the learning rate.", 0.1, min=0, lt=1
    )
    weight_decay: float = _setting("AdamW weight decay.", 0.01, min=0)
    eval_every: int = _setting("Evaluate on the eval set every this many steps.", 100, min=1)
    max_length: int = _setting("Longest input in tokens; longer texts are truncated.", 128, min=8)
    seed: int = _setting("Random seed of initialisation and shuffling.", 0, min=0)
    device: str = _setting("Where to train: auto, cpu, cuda, cuda:N or mps.", "auto", **_DEVICE)
    mixed_precision: str = _setting(
        "Mixed precision on CUDA: auto (bf16 where the GPU supports it, else no), no, fp16 "
        "or bf16; elsewhere training is float32.",
        "auto",
        choices=("auto", "no", "fp16", "bf16"),
    )


@dataclass(frozen=True)
class ProjectConfig:
    """A loaded kiwb.toml together with where it lives."""

    root: Path = _setting("The project folder.", internal=True)
    file: Path = _setting("The kiwb.toml file.", internal=True)
    name: str = _setting("Name of the project.", example="my-project")
    teachers: tuple[TeacherConfig, ...] = _setting(
        "One [[teachers]] entry per teacher; kiwb integrates two or more.",
        (),
        example=(
            {"name": "world-sports", "path": "models/world-sports", "labels": ("World", "Sports")},
            {"name": "business-scitech", "path": "org/business-scitech-classifier"},
        ),
    )
    data: DataConfig = _setting(DataConfig.__doc__, factory=DataConfig)
    scoring: ScoringConfig = _setting(ScoringConfig.__doc__, factory=ScoringConfig)
    integration: IntegrationConfig = _setting(IntegrationConfig.__doc__, factory=IntegrationConfig)
    training: TrainingConfig = _setting(TrainingConfig.__doc__, factory=TrainingConfig)

    def teacher(self, name: str) -> TeacherConfig:
        """The teacher called `name`."""
        for teacher in self.teachers:
            if teacher.name == name:
                return teacher
        known = ", ".join(teacher.name for teacher in self.teachers) or "none yet"
        raise ConfigError(f'{self.file}: no teacher is named "{name}"; use one of: {known}')

    def resolve(self, path_str: str, *, allow_hub_id: bool = True) -> str:
        """The absolute local path `path_str` means (from root, "~" expanded), or a hub id as is."""
        if allow_hub_id and is_hub_id(path_str, self.root):
            return path_str
        return _local_path(path_str, self.root)

    def require_scoring_inputs(self) -> None:
        """Raise ConfigError unless there are two or more teachers and unlabeled texts."""
        count = len(self.teachers)
        if count < 2:
            has, fix = (
                ("no teachers", "add [[teachers]] entries")
                if count == 0
                else ("1 teacher", "add another [[teachers]] entry")
            )
            raise ConfigError(f"{self.file} has {has}; kiwb integrates two or more: {fix}")
        if self.data.unlabeled is None:
            raise ConfigError(
                f'{self.file} has no [data.unlabeled] section; add one with path = "..." '
                "naming the texts to score"
            )


def is_hub_id(path_str: str, root: Path) -> bool:
    """Whether a model path means a Hugging Face hub id rather than a local folder."""
    if not _HUB_ID.fullmatch(path_str) or ".." in path_str.split("/"):
        return False  # this also rules out "/", "./", "../", "~" and two or more "/"
    return not os.path.exists(_local_path(path_str, root))


def _local_path(path_str: str, root: Path) -> str:
    return os.path.normpath(os.path.join(root, os.path.expanduser(path_str)))


# ---- loading ------------------------------------------------------------------------------


def load_config(path: str | Path) -> ProjectConfig:
    """Load and validate a project's kiwb.toml, given the project folder or the file itself."""
    file = _config_file(Path(os.path.abspath(os.path.expanduser(path))))
    try:
        text = file.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{file}: is not UTF-8 text; save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(
            f"{file}: cannot be read ({exc.strerror}); check its permissions"
        ) from None
    return _parse(text, file)


def _config_file(path: Path) -> Path:
    if path.is_dir():
        if not (path / CONFIG_NAME).is_file():
            raise ConfigError(
                f"no {CONFIG_NAME} in {path}; create one with: kiwb init {shlex.quote(str(path))}"
            )
        return path / CONFIG_NAME
    if path.is_file():
        return path
    folder = path.parent if path.suffix == ".toml" else path
    raise ConfigError(
        f"{path} does not exist; create a project with: kiwb init {shlex.quote(str(folder))}"
    )


def _parse(text: str, file: Path) -> ProjectConfig:
    """Validate kiwb.toml text as if read from `file` (relative paths start at its folder)."""
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _syntax_error(exc, file) from None
    config = _build(ProjectConfig, table, _Loc(file), root=file.parent, file=file)
    _check_teacher_names(config)
    _check_eval_labels(config)
    _check_paths(config)
    return config


def _syntax_error(exc: tomllib.TOMLDecodeError, file: Path) -> ConfigError:
    message = str(exc)
    match = re.search(r"\s*\((at line (\d+), column (\d+)|at end of document)\)$", message)
    where = "at the end of the file"
    if match:
        message = message[: match.start()]
        if match.group(2):
            where = f"at line {match.group(2)}, column {match.group(3)}"
    return ConfigError(
        f"{file}: TOML syntax error {where}: {message[:1].lower()}{message[1:]}; fix the TOML "
        'there (text values need "double quotes"; true and false are lowercase)'
    )


@dataclass(frozen=True)
class _Loc:
    """Where a table sits in kiwb.toml, to name its keys in error messages."""

    file: Path
    section: str = ""
    entry: bool = False  # inside a [[teachers]] entry, whose keys read teachers[1].path

    def key(self, name: str) -> str:
        if self.entry:
            return f"{self.section}.{name}"
        return f"[{self.section}] {name}" if self.section else name

    def table(self, name: str) -> _Loc:
        return _Loc(self.file, f"{self.section}.{name}" if self.section else name, self.entry)

    def item(self, name: str, number: int) -> _Loc:
        return _Loc(
            self.file,
            f"{self.section}.{name}[{number}]" if self.section else f"{name}[{number}]",
            True,
        )

    def error(self, name: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.file}: {self.key(name)} {problem}")


# ---- one TOML table against one dataclass ------------------------------------------------

_EXPECTED = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}
_ACCEPTED = {str: str, int: int, float: (int, float), bool: bool}
_BOUNDS = (
    ("min", operator.ge, ">="),
    ("gt", operator.gt, ">"),
    ("max", operator.le, "<="),
    ("lt", operator.lt, "<"),
)


def _build(cls: type, table: dict[str, Any], loc: _Loc, **values: Any) -> Any:
    """Check a TOML table against a settings dataclass and build it (`values` add internal fields)."""
    fields = toml_fields(cls)
    _refuse_unknown_keys(table, [f.name for f, _hint in fields], loc)
    for f, hint in fields:
        if f.name in table:
            values[f.name] = _convert(table[f.name], hint, f, loc)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise loc.error(
                f.name, f"is missing; add {f.name} = {toml_value(f.metadata['example'])}"
            )
    return cls(**values)


def _refuse_unknown_keys(table: dict[str, Any], known: list[str], loc: _Loc) -> None:
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            fix = f'did you mean "{close[0]}"?' if close else "remove it or correct its spelling"
            raise loc.error(key, f"is not a known key; {fix} (known: {', '.join(known)})")


def _convert(value: Any, hint: Any, f: dataclasses.Field, loc: _Loc) -> Any:
    """The checked value of one key: a nested table, an array of tables, a list or a scalar."""
    cls, is_array = table_type(hint)
    if cls is not None and not is_array:
        section = loc.table(f.name).section
        table = _expect(value, dict, "a table", loc, f.name, f"; write it as a [{section}] section")
        return _build(cls, table, loc.table(f.name))
    if cls is not None:
        fix = f"; write each entry as a [[{f.name}]] section"
        entries = _expect(value, list, "an array of tables", loc, f.name, fix)
        built = []
        for number, entry in enumerate(entries, start=1):
            table = _expect(entry, dict, "a table", loc, f"{f.name}[{number}]", fix)
            built.append(_build(cls, table, loc.item(f.name, number)))
        return tuple(built)
    keyword = f.metadata.get("keyword")
    if keyword is not None:  # a number, or one word that asks kiwb to choose it
        if value == keyword:
            return value
        hint = next(arg for arg in typing.get_args(hint) if arg is not str)
        if isinstance(value, str):
            suggestion = _coerce(value, hint)
            fix = (f"; write {f.name} = {toml_value(suggestion)}" if suggestion is not None
                   else f'; for example {f.name} = "{keyword}" (the default)')
            raise loc.error(f.name, f'must be {_EXPECTED[hint]} or "{keyword}", got {_describe(value)}{fix}')
    hint = optional_inner(hint)
    if typing.get_origin(hint) is tuple:
        items = _expect(value, list, "a list of strings", loc, f.name, _fix(f))
        if not all(isinstance(item, str) for item in items):
            raise loc.error(f.name, f"must be a list of strings, got {_describe(value)}{_fix(f)}")
        return _check_list(tuple(items), f, loc)
    return _check_rules(_check_type(value, hint, f, loc), f, loc)


def _expect(value: Any, kind: type, words: str, loc: _Loc, name: str, fix: str) -> Any:
    if not isinstance(value, kind):
        raise loc.error(name, f"must be {words}, got {_describe(value)}{fix}")
    return value


def _check_type(value: Any, kind: type, f: dataclasses.Field, loc: _Loc) -> Any:
    if isinstance(value, bool) != (kind is bool) or not isinstance(value, _ACCEPTED[kind]):
        suggestion = _coerce(value, kind)
        fix = f"; write {f.name} = {toml_value(suggestion)}" if suggestion is not None else _fix(f)
        raise loc.error(f.name, f"must be {_EXPECTED[kind]}, got {_describe(value)}{fix}")
    if kind is float:
        value = float(value)
        if not math.isfinite(value):
            raise loc.error(f.name, f"must be a finite number, got {toml_value(value)}{_fix(f)}")
    if kind is str and not value.strip():
        raise loc.error(f.name, f"is empty{_fix(f)}")
    return value


def _coerce(value: Any, kind: type) -> Any:
    """The value the user probably meant, to suggest in a type error; None when unclear."""
    if isinstance(value, str):
        text = value.strip()
        if kind is bool:
            return {"true": True, "false": False}.get(text.lower())
        try:
            return kind(text) if kind in (int, float) else None
        except ValueError:
            return None
    if kind is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if kind is str and isinstance(value, int | float):
        return toml_value(value)
    return None


def _check_rules(value: Any, f: dataclasses.Field, loc: _Loc) -> Any:
    rules = f.metadata
    choices = rules.get("choices")
    if choices and value not in choices:
        close = difflib.get_close_matches(value, choices, n=1)
        fix = f'; did you mean "{close[0]}"?' if close else _fix(f)
        listed = ", ".join(toml_value(choice) for choice in choices)
        raise loc.error(f.name, f"must be one of {listed}, got {_describe(value)}{fix}")
    if "pattern" in rules and not re.fullmatch(rules["pattern"], value):
        raise loc.error(f.name, f"must be {rules['expected']}, got {_describe(value)}{_fix(f)}")
    bounds = [(bound, test, words) for bound, test, words in _BOUNDS if bound in rules]
    if any(not test(value, rules[bound]) for bound, test, _words in bounds):
        limits = " and ".join(f"{words} {rules[bound]}" for bound, _test, words in bounds)
        raise loc.error(f.name, f"must be {limits}, got {toml_value(value)}{_fix(f)}")
    return value


def _check_list(items: tuple[str, ...], f: dataclasses.Field, loc: _Loc) -> tuple[str, ...]:
    fix = f"; {f.metadata['fix']}" if "fix" in f.metadata else _fix(f)
    if f.metadata.get("unique"):
        repeated = [item for number, item in enumerate(items) if item in items[:number]]
        if repeated:
            raise loc.error(f.name, f"lists {toml_value(repeated[0])} more than once{fix}")
    least = f.metadata.get("min_items", 0)
    if len(items) < least:
        raise loc.error(
            f.name, f"must list at least {least} names, got {len(items)} ({toml_value(items)}){fix}"
        )
    if not all(item.strip() for item in items):
        raise loc.error(f.name, f"has an empty name{fix}")
    return items


def _fix(f: dataclasses.Field) -> str:
    """'; for example key = value', from the field's default or example."""
    if f.default not in (dataclasses.MISSING, None):
        return f"; for example {f.name} = {toml_value(f.default)} (the default)"
    if "example" in f.metadata:
        return f"; for example {f.name} = {toml_value(f.metadata['example'])}"
    return ""


def _describe(value: Any) -> str:
    kinds = (
        (bool, "a boolean"),
        (str, "a string"),
        (int, "an integer"),
        (float, "a float"),
        (list, "an array"),
        (dict, "a table"),
    )
    kind = next((words for cls, words in kinds if isinstance(value, cls)), "a date or time")
    text = toml_value(value)
    return f"{text if len(text) <= 60 else text[:57] + '...'} ({kind})"


# ---- checks across keys ------------------------------------------------------------------

_PATH_FIX = {
    "data": "point it at a csv, jsonl, json or parquet file, "
    "or a folder saved by datasets' save_to_disk",
    "model": 'point it at a Hugging Face checkpoint folder or a hub id like "org/model"',
}


def _walk(settings: Any, loc: _Loc) -> Iterator[tuple[dataclasses.Field, Any, _Loc]]:
    """Every (field, value, location) of the keys (not tables) of a settings tree."""
    for f, hint in toml_fields(type(settings)):
        value = getattr(settings, f.name)
        cls, is_array = table_type(hint)
        if cls is None:
            yield f, value, loc
        elif is_array:
            for number, entry in enumerate(value, start=1):
                yield from _walk(entry, loc.item(f.name, number))
        elif value is not None:
            yield from _walk(value, loc.table(f.name))


def _check_teacher_names(config: ProjectConfig) -> None:
    # Compared ignoring case: names become folder names, and some file systems ignore case.
    seen: dict[str, int] = {}
    for number, teacher in enumerate(config.teachers, start=1):
        first = seen.setdefault(teacher.name.casefold(), number)
        if first == number:
            continue
        other = config.teachers[first - 1].name
        spelled = f" ({toml_value(other)})" if other != teacher.name else ""
        problem = f"{toml_value(teacher.name)} is already used by teachers[{first}]{spelled}"
        raise (
            _Loc(config.file)
            .item("teachers", number)
            .error("name", f"{problem}; give each teacher its own name")
        )


def _check_eval_labels(config: ProjectConfig) -> None:
    for role, words in (("eval", "the eval set"), ("labeled", "the labeled set")):
        spec = getattr(config.data, role)
        if spec is not None and spec.label_column is None:
            raise _Loc(config.file, f"data.{role}").error(
                "label_column",
                f'is missing; {words} needs gold labels: add label_column = "label" '
                "naming its label column",
            )
    check_routing(config, config.integration.routing)


def check_routing(config: ProjectConfig, routing: str) -> None:
    """Refuse a few-label routing in a project that has no [data.labeled]."""
    if routing in FEW_LABEL_ROUTINGS and config.data.labeled is None:
        label_free = ", ".join(name for name in ROUTINGS if name not in FEW_LABEL_ROUTINGS)
        raise ConfigError(
            f'{config.file}: routing "{routing}" needs a few labeled texts: add a [data.labeled] '
            'section with path = "..." and label_column = "label", or choose a label-free '
            f"routing ({label_free})"
        )


def _check_paths(config: ProjectConfig) -> None:
    for f, value, loc in _walk(config, _Loc(config.file)):
        kind = f.metadata.get("path")
        if kind is None or value is None or (kind == "model" and is_hub_id(value, config.root)):
            continue
        resolved = config.resolve(value, allow_hub_id=False)
        if not os.path.exists(resolved):
            raise ConfigError(
                f"{config.file}: {loc.key(f.name)}: {resolved} does not exist; {_PATH_FIX[kind]}"
            )
        if kind == "model" and not os.path.isdir(resolved):
            raise ConfigError(
                f"{config.file}: {loc.key(f.name)}: {resolved} is a file; {_PATH_FIX[kind]}"
            )


# ---- writing -----------------------------------------------------------------------------

_HEADER = (
    "kiwb.toml: the settings of one kiwb project (Knowledge Integration WorkBench).",
    "kiwb merges two or more teacher classifiers, each an expert on its own labels, into one",
    "student over the union of their labels, learning from unlabeled texts.",
    "",
    'Relative paths are read from the folder holding this file; "~" is your home folder.',
    "Every key is written with its default; a commented-out key is an optional one left unset.",
)


def render_config(
    config: ProjectConfig | None = None,
    *,
    name: str = "kiwb-project",
    teachers: Sequence[TeacherConfig] = (),
    unlabeled: DatasetConfig | None = None,
    eval: DatasetConfig | None = None,
    student: str | None = None,
) -> str:
    """Commented kiwb.toml text for `config`, or for a new project built from the keywords."""
    if config is None:
        config = ProjectConfig(
            root=Path(),
            file=Path(CONFIG_NAME),
            name=name,
            teachers=tuple(teachers),
            data=DataConfig(unlabeled=unlabeled, eval=eval),
            training=TrainingConfig(student=student),
        )
    return render_toml(config, _HEADER)


def write_new_project(
    root: str | Path,
    *,
    name: str,
    teachers: Sequence[TeacherConfig] = (),
    unlabeled: DatasetConfig | None = None,
    eval: DatasetConfig | None = None,
    student: str | None = None,
    force: bool = False,
) -> Path:
    """Validate a new project's settings, then write its kiwb.toml atomically; return the file."""
    root = Path(os.path.abspath(os.path.expanduser(root)))
    file = root / CONFIG_NAME
    if root.exists() and not root.is_dir():
        raise ConfigError(f"{root} is a file, not a folder; choose a folder for the project")
    if file.exists() and not force:
        raise ConfigError(f"{file} already exists; use --force to overwrite it")
    text = render_config(name=name, teachers=teachers, unlabeled=unlabeled, eval=eval, student=student)
    config = _parse(text, file)  # the same checks as load_config, before anything touches the disk
    for teacher in config.teachers:
        refuse_untrained_teacher(config, teacher)
    atomic_write_with(file, lambda handle: handle.write(text.encode("utf-8")))
    return file
