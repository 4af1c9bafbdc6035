"""Loading kiwb.toml into a `ProjectConfig` (one-line errors naming the file and key), and
writing new project files. The schema is `config_schema`, its checks `config_checks`, the
checks on disk `environment`."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from kiwb.errors import ConfigError
from kiwb.project.atomic import atomic_write_with
from kiwb.project.config_checks import (
    _build,
    _check_eval_labels,
    _check_seen_columns,
    _check_teacher_names,
    _Loc,
    check_routing,
)
from kiwb.project.config_render import render_toml
from kiwb.project.config_schema import (
    CONFIG_NAME,
    DataConfig,
    DatasetConfig,
    EmbeddingConfig,
    IntegrationConfig,
    ProjectConfig,
    ScoringConfig,
    TaskConfig,
    TeacherConfig,
    TrainingConfig,
    checkpoint_folder,
    is_hub_id,
    teacher_model_configs,
)
from kiwb.project.environment import require_environment
from kiwb.project.teach_report import refuse_untrained_teacher

# What importers of the loading module also use from the schema and its checks.
__all__ = ["CONFIG_NAME", "DataConfig", "DatasetConfig", "EmbeddingConfig", "IntegrationConfig", "ProjectConfig",
           "ScoringConfig", "TaskConfig", "TeacherConfig", "TrainingConfig", "check_routing", "checkpoint_folder", "is_hub_id", "teacher_model_configs",
           "load_config", "render_config", "write_new_project"]


# ---- loading ------------------------------------------------------------------------------


def load_config(path: str | Path, *, check_environment: bool = True) -> ProjectConfig:
    """Load and validate a project's kiwb.toml, given the project folder or the file itself.

    `check_environment=False` skips the checks on disk (the workbench shows those problems
    itself, so a vanished teacher folder can be removed there)."""
    file = _config_file(Path(os.path.abspath(os.path.expanduser(path))))
    try:
        text = file.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{file}: is not UTF-8 text; save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(
            f"{file}: cannot be read ({exc.strerror}); check its permissions"
        ) from None
    return _parse(text, file, check_environment=check_environment)


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


def _parse(text: str, file: Path, *, check_environment: bool = True) -> ProjectConfig:
    """Validate kiwb.toml text as if read from `file` (relative paths start at its folder)."""
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _syntax_error(exc, file) from None
    config = _build(ProjectConfig, table, _Loc(file), root=file.parent, file=file)
    _check_teacher_names(config)
    _check_seen_columns(config)
    _check_eval_labels(config)
    return require_environment(config) if check_environment else config


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
