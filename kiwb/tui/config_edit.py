"""Changing kiwb.toml from the workbench: validate the changed config, then write only what
changed into the file in place, atomically.

The file is edited with tomlkit, so the user's own comments, key order and layout survive;
the new text is checked with the loader's own checks before anything touches the disk, so a
bad value is refused with the loader's message. A path that is missing on disk is refused
only when the change brought it in: a teacher whose folder vanished can still be removed.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import tomlkit

from kiwb.errors import ConfigError
from kiwb.project import config as project_config
from kiwb.project.atomic import atomic_write_text
from kiwb.project.config import DatasetConfig, ProjectConfig, TeacherConfig
from kiwb.project.config_schema import HUB_DATA, hub_dataset
from kiwb.project.environment import environment_problems
from kiwb.project.teach_report import refuse_untrained_teacher

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


def write_config(config: ProjectConfig) -> ProjectConfig:
    """Write `config` into its kiwb.toml in place, keeping the file's comments; return it as
    loaded."""
    original = config.file.read_text(encoding="utf-8")
    current = project_config._parse(original, config.file, check_environment=False)
    document = tomlkit.parse(original)
    _apply(document, _as_table(current), _as_table(config))
    text = tomlkit.dumps(document)
    checked = project_config._parse(text, config.file, check_environment=False)
    before = environment_problems(current)
    added = [problem for problem in environment_problems(checked) if problem not in before]
    if added:
        raise ConfigError(added[0].message)
    atomic_write_text(config.file, text)
    return checked


def _as_table(config: ProjectConfig) -> dict[str, Any]:
    """Every key of `config` as kiwb.toml holds it (defaults written out)."""
    return tomllib.loads(project_config.render_config(config))


def _apply(document, old: dict[str, Any], new: dict[str, Any]) -> None:
    """Make `document` (a tomlkit table) say `new` where `new` differs from `old`."""
    for key in [key for key in old if key not in new]:
        if key in document:
            del document[key]
    for key, value in new.items():
        before = old.get(key)
        if value == before:
            continue  # unchanged: as the user wrote it, or left out for its default
        if isinstance(value, dict) and isinstance(before, dict) and key in document:
            _apply(document[key], before, value)
        elif _is_named_entries(value) and _is_named_entries(before) and key in document:
            _apply_entries(document[key], before, value)
        else:
            document[key] = value


def _is_named_entries(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, dict) and "name" in v for v in value)


def _apply_entries(entries, old: list[dict], new: list[dict]) -> None:
    """[[teachers]]-like entries matched by name: changed ones edited in place, removed ones
    dropped, new ones appended."""
    old_by_name = {entry["name"]: entry for entry in old}
    new_names = {entry["name"] for entry in new}
    for index in reversed(range(len(entries))):
        if entries[index].get("name") not in new_names:
            del entries[index]
    for entry in new:
        at = next((i for i, e in enumerate(entries) if e.get("name") == entry["name"]), None)
        if at is None:
            entries.append(entry)
        else:
            _apply(entries[at], old_by_name.get(entry["name"], {}), entry)


def typed_path(config: ProjectConfig, typed: str) -> str:
    """A path typed in the workbench: relative to the project if it exists there, else to
    the folder the workbench was started from (made absolute), else as typed (a hub id)."""
    typed = typed.strip()
    if not typed or os.path.isabs(os.path.expanduser(typed)):
        return typed
    if os.path.exists(config.resolve(typed, allow_hub_id=False)):
        return typed
    if os.path.exists(typed):
        return str(Path(typed).resolve())
    return typed


def parse_labels(typed: str) -> tuple[str, ...] | None:
    """Comma-separated label names; an empty text means "use the checkpoint's"."""
    labels = tuple(label.strip() for label in typed.split(",") if label.strip())
    return labels or None


def add_teacher(config: ProjectConfig, name: str, path: str, labels: str = "") -> ProjectConfig:
    name = name.strip()
    if not name:
        raise ConfigError("give the teacher a short name (letters, digits, _ . -)")
    if not path.strip():
        raise ConfigError("give the teacher's checkpoint folder or hub id")
    teacher = TeacherConfig(name=name, path=typed_path(config, path), labels=parse_labels(labels))
    refuse_untrained_teacher(config, teacher)
    return write_config(replace(config, teachers=(*config.teachers, teacher)))


def remove_teacher(config: ProjectConfig, name: str) -> ProjectConfig:
    config.teacher(name)  # names the known teachers when `name` is not one of them
    return write_config(replace(config, teachers=tuple(t for t in config.teachers if t.name != name)))


def set_teacher_labels(config: ProjectConfig, name: str, labels: str) -> ProjectConfig:
    config.teacher(name)
    teachers = tuple(replace(t, labels=parse_labels(labels)) if t.name == name else t
                     for t in config.teachers)
    return write_config(replace(config, teachers=teachers))


def set_dataset(config: ProjectConfig, role: str, path: str, text_column: str = "text",
                label_column: str = "", limit: str = "", split: str = "",
                subset: str = "") -> ProjectConfig:
    """Point the `unlabeled` or `eval` data set at a file, a saved folder or a Hub data set
    (with its split and subset; a subset only there); an empty path removes it."""
    if role not in ("unlabeled", "eval"):
        raise ConfigError(f"unknown data set {role!r}; use unlabeled or eval")
    spec = None
    if path.strip():
        limit = limit.strip()
        if limit and not limit.isdigit():
            raise ConfigError(f"limit must be a whole number of rows, got {limit!r}")
        # the keys the form does not show (an NER set's columns, a retrieval probe's partner
        # column, a multi-label separator) are kept as kiwb.toml has them
        previous = getattr(config.data, role) or DatasetConfig(path="")
        located = typed_path(config, path)
        if subset.strip() and hub_dataset(located) is None:
            raise ConfigError(f"a subset is a Hub data set's (path \"{HUB_DATA}ORG/NAME\"); "
                              "leave subset empty for a file or a saved folder")
        spec = replace(previous, path=located,
                       text_column=text_column.strip() or "text",
                       label_column=label_column.strip() or None,
                       limit=int(limit) if limit else None,
                       split=split.strip() or None, subset=subset.strip() or None)
    return write_config(replace(config, data=replace(config.data, **{role: spec})))


def set_scoring(config: ProjectConfig, **values) -> ProjectConfig:
    """Change [scoring] keys (only those given and different from the current ones)."""
    changed = {key: value for key, value in values.items()
               if value is not None and getattr(config.scoring, key) != value}
    if not changed:
        return config
    return write_config(replace(config, scoring=replace(config.scoring, **changed)))


def new_project(root: Path) -> Path:
    """Write a kiwb.toml with every default into `root` (named after the folder)."""
    from kiwb.project.config import write_new_project
    from kiwb.project.paths import ProjectPaths

    written = write_new_project(root, name=_project_name(root))
    ProjectPaths(Path(root)).make_layout()
    return written


def _project_name(root: Path) -> str:
    cleaned = "".join(c if c.isalnum() or c in "-_." else "-" for c in Path(root).resolve().name)
    return cleaned.strip("-") or "kiwb-project"
