"""Checking kiwb.toml against the schema: one TOML table against one settings dataclass, and
the checks across keys. Every refusal is one line naming the file, the key and the fix.
Nothing here looks at the disk (that is `kiwb.project.environment`)."""

from __future__ import annotations

import dataclasses
import math
import operator
import re
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kiwb.core.choices import FEW_LABEL_ROUTINGS, READS_REPRESENTATION, ROUTINGS
from kiwb.errors import ConfigError, spelt_near
from kiwb.kinds import declared_kind, kind_named
from kiwb.project.config_render import optional_inner, table_type, toml_fields, toml_value
from kiwb.project.config_schema import (
    DATASET_ROLES,
    REMOVED_KEYS,
    ProjectConfig,
    declared_setting,
    rules_of,
)
from kiwb.project.setting_knobs import shown_settings


@dataclass(frozen=True)
class _Loc:
    """Where a table sits in kiwb.toml, to name its keys in error messages."""

    file: Path | str  # or what else holds the keys: a form of the workbench
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
                f.name, f"is missing; add {f.name} = {toml_value(rules_of(f).example)}"
            )
    return cls(**values)


def _refuse_unknown_keys(table: dict[str, Any], known: list[str], loc: _Loc) -> None:
    for key in table:
        if key not in known and key in REMOVED_KEYS.get(loc.section, {}):
            if not table[key]:
                # off, as kiwb init wrote every key: it did nothing then and does nothing now
                continue
            raise loc.error(key, REMOVED_KEYS[loc.section][key])
        if key not in known:
            close = spelt_near(key, known, cutoff=0.6)
            fix = f'did you mean "{close}"?' if close else "remove it or correct its spelling"
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
    keywords = rules_of(f).keywords
    if keywords:  # a number, or a word that asks kiwb to choose it
        if value in keywords:
            return value
        hint = next(arg for arg in typing.get_args(hint) if arg is not str)
        if isinstance(value, str):
            suggestion = _coerce(value, hint)
            default = " (the default)" if f.default == keywords[0] else ""
            words = " or ".join(f'"{word}"' for word in keywords)
            fix = (f"; write {f.name} = {toml_value(suggestion)}" if suggestion is not None
                   else f'; for example {f.name} = "{keywords[0]}"{default}')
            raise loc.error(f.name, f"must be {_EXPECTED[hint]} or {words}, got {_describe(value)}{fix}")
    hint = optional_inner(hint)
    if typing.get_origin(hint) is tuple:
        items = _expect(value, list, "a list of strings", loc, f.name, _fix(f))
        if not all(isinstance(item, str) for item in items):
            raise loc.error(f.name, f"must be a list of strings, got {_describe(value)}{_fix(f)}")
        return _check_list(tuple(items), f, loc)
    return _check_rules(_check_type(value, hint, f, loc), f, loc)


def checked_setting(cls: type, name: str, value: Any, where: str) -> Any:
    """One key of the kiwb.toml table `cls` given elsewhere (`where`: a workbench form), as
    text or a flag: typed as the table would type it, against the same rules, and refused in
    the same words, naming `where` and the key."""
    setting = declared_setting(cls, name)
    hint = typing.get_type_hints(cls)[name]
    kind = optional_inner(hint)
    if isinstance(value, str) and kind is not str:  # a form's text: "0.2" for a number
        keywords = rules_of(setting).keywords
        if value.strip() in keywords:  # a number or a word: the word as written
            value = value.strip()
        else:
            number = next((arg for arg in typing.get_args(kind) if arg is not str), kind)
            typed = _coerce(value, number)
            value = value if typed is None else typed
    return _convert(value, hint, setting, _Loc(where))


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
    rules = rules_of(f)
    choices = rules.choices
    if choices and value in (rules.removed or {}):
        raise loc.error(f.name, f"= {toml_value(value)} was removed: {rules.removed[value]}")
    if choices and value not in choices:
        close = spelt_near(value, choices, cutoff=0.6)
        fix = f'; did you mean "{close}"?' if close else _fix(f)
        listed = ", ".join(toml_value(choice) for choice in choices)
        raise loc.error(f.name, f"must be one of {listed}, got {_describe(value)}{fix}")
    if rules.pattern is not None and not re.fullmatch(rules.pattern, value):
        raise loc.error(f.name, f"must be {rules.expected}, got {_describe(value)}{_fix(f)}")
    bounds = [(getattr(rules, bound), test, words) for bound, test, words in _BOUNDS
              if getattr(rules, bound) is not None]
    if any(not test(value, limit) for limit, test, _words in bounds):
        limits = " and ".join(f"{words} {limit}" for limit, _test, words in bounds)
        raise loc.error(f.name, f"must be {limits}, got {toml_value(value)}{_fix(f)}")
    return value


def _check_list(items: tuple[str, ...], f: dataclasses.Field, loc: _Loc) -> tuple[str, ...]:
    rules = rules_of(f)
    fix = f"; {rules.fix}" if rules.fix else _fix(f)
    if rules.unique:
        repeated = [item for number, item in enumerate(items) if item in items[:number]]
        if repeated:
            raise loc.error(f.name, f"lists {toml_value(repeated[0])} more than once{fix}")
    least = rules.min_items
    if len(items) < least:
        raise loc.error(
            f.name, f"must list at least {least} names, got {len(items)} ({toml_value(items)}){fix}"
        )
    if not all(item.strip() for item in items):
        raise loc.error(f.name, f"has an empty name{fix}")
    unknown = [item for item in items if rules.choices and item not in rules.choices]
    if unknown:
        raise loc.error(f.name, f"lists {toml_value(unknown[0])}, which is not one of "
                                f"{', '.join(rules.choices)}{fix}")
    return items


def _fix(f: dataclasses.Field) -> str:
    """'; for example key = value', from the field's default or example."""
    if f.default not in (dataclasses.MISSING, None, ()):  # an empty list shows nothing
        return f"; for example {f.name} = {toml_value(f.default)} (the default)"
    if rules_of(f).example is not None:
        return f"; for example {f.name} = {toml_value(rules_of(f).example)}"
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


def _check_seen_columns(config: ProjectConfig) -> None:
    """A seen file's column names apply only to a teacher that has a seen file."""
    for number, teacher in enumerate(config.teachers, start=1):
        for key in ("seen_text_column", "seen_label_column"):
            if teacher.seen is None and getattr(teacher, key) is not None:
                raise _Loc(config.file).item("teachers", number).error(
                    key, "names a column of the seen file, and this teacher has none: set seen "
                    f"= PATH to a file of its training texts, or remove {key}")


def _check_tasks(config: ProjectConfig) -> None:
    """A multi-task project's [[tasks]] and each teacher's tasks name one another: unique task
    names, every teacher mapped to known tasks, every task answered by some teacher."""
    loc = _Loc(config.file)
    names = [task.name for task in config.tasks]
    for number, name in enumerate(names, start=1):
        first = names.index(name) + 1
        if first != number:
            raise loc.item("tasks", number).error(
                "name", f"{toml_value(name)} is already used by tasks[{first}]; give each task "
                "its own name")
    if config.tasks and config.data.labeled is not None:
        raise _Loc(config.file, "data.labeled").error(
            "path", "is not read by multi-task projects: remove [data.labeled] (label conflicts "
            "in the workbench or with kiwb labels import, then --given-labels)")
    for number, teacher in enumerate(config.teachers, start=1):
        where = loc.item("teachers", number)
        if not config.tasks:
            for key in ("tasks", "heads"):
                if getattr(teacher, key) is not None:
                    raise where.error(key, "applies to multi-task projects, and kiwb.toml has no "
                                      "[[tasks]]: add the [[tasks]] entries, or remove it")
            continue
        if teacher.tasks is None:
            raise where.error("tasks", "is missing; this project has [[tasks]] "
                              f"({', '.join(names)}): name the ones this teacher answers, e.g. "
                              f"tasks = [{toml_value(names[0])}]")
        unknown = [name for name in teacher.tasks if name not in names]
        if unknown:
            raise where.error("tasks", f"names {toml_value(unknown[0])}, which no [[tasks]] entry "
                              f"defines (tasks: {', '.join(names)}); add that task or fix the name")
        if teacher.heads is not None and len(teacher.heads) != len(teacher.tasks):
            raise where.error("heads", f"lists {len(teacher.heads)} head(s) for "
                              f"{len(teacher.tasks)} task(s); list one head per task, in the "
                              "order of tasks")
    answered = {name for teacher in config.teachers for name in teacher.tasks or ()}
    for number, task in enumerate(config.tasks, start=1):
        if task.name not in answered:
            raise loc.item("tasks", number).error(
                "name", f"{toml_value(task.name)} is answered by no teacher; add it to a "
                "teacher's tasks, or remove the task")
    for role in DATASET_ROLES:
        spec = getattr(config.data, role)
        unknown = [name for name in (spec.tasks or ()) if name not in names] if spec else []
        if unknown:
            raise _Loc(config.file, f"data.{role}").error(
                "tasks", f"names {toml_value(unknown[0])}, which no [[tasks]] entry defines "
                f"(tasks: {', '.join(names) or 'none'}); fix the name")


def _check_declared_kind_settings(config: ProjectConfig) -> None:
    """A setting declared for kinds that kiwb.toml itself declares (Shown.kinds, each kind
    `declared_by` a table: [training] feature_weight, for [[tasks]]), set away from its default
    in a project that declares none of them: refused as kiwb.toml is read. A setting for kinds
    read from the teachers' heads is checked where a job knows the kind (teacher_kinds)."""
    declared = declared_kind(config)
    for table in ("integration", "training"):
        values = getattr(config, table)
        for setting, shown in shown_settings(type(values)):
            kinds = [kind_named(name) for name in shown.kinds or ()]
            if not kinds or not all(kind.checkpoints.declared_by for kind in kinds):
                continue
            if declared in kinds or getattr(values, setting.name) == setting.default:
                continue
            keys = " or ".join(_declaring_table(config, kind.checkpoints.declared_by)
                               for kind in kinds)
            projects = " or ".join(kind.words.short_title or kind.name for kind in kinds)
            raise _Loc(config.file, table).error(
                setting.name, f"applies to {projects} projects, and kiwb.toml has no {keys}: "
                "remove it")


def _declaring_table(config: ProjectConfig, key: str) -> str:
    """How kiwb.toml writes the table `key` that declares a kind: [[tasks]], [embedding]."""
    return f"[[{key}]]" if isinstance(getattr(config, key), list | tuple) else f"[{key}]"


def _check_eval_labels(config: ProjectConfig) -> None:
    if config.tasks and config.embedding is not None:
        raise ConfigError(f"{config.file}: declares both [[tasks]] (a multi-task project) and "
                          "[embedding] (sentence encoders); a project is of one kind: remove one")
    _check_declared_kind_settings(config)
    _check_tasks(config)
    for role, words in (("eval", "the eval set"), ("labeled", "the labeled set")):
        spec = getattr(config.data, role)
        if config.tasks:  # each task's gold labels are in a column of its own
            continue
        if config.embedding is not None:  # its probes read labels or partners (its load_table)
            continue
        if spec is not None and spec.label_column is None and spec.tags_column is None:
            raise _Loc(config.file, f"data.{role}").error(
                "label_column",
                f'is missing; {words} needs gold labels: add label_column = "label" '
                'naming its label column (NER teachers: tags_column = "tags", each word\'s tag)',
            )
    check_routing(config, config.integration.routing)


def check_routing(config: ProjectConfig, routing: str, *, labels: bool | None = None) -> None:
    """Refuse a few-label routing with no labeled texts: neither [data.labeled] nor the given
    labels (`labels`; None: as [integration] labels says)."""
    if routing in READS_REPRESENTATION and config.scoring.representation == "none":
        raise ConfigError(
            f'{config.file}: routing "{routing}" reads each teacher\'s representation, which '
            '[scoring] representation = "none" does not keep: set it to "head" (kiwb score then '
            "adds it in one dropout-off forward per text), or choose another routing")
    labels = config.integration.labels if labels is None else labels
    if routing in FEW_LABEL_ROUTINGS and config.data.labeled is None and not labels:
        label_free = ", ".join(name for name in ROUTINGS if name not in FEW_LABEL_ROUTINGS)
        raise ConfigError(
            f'{config.file}: routing "{routing}" needs a few labeled texts: use the labels given '
            'in the workbench or by kiwb labels import (--given-labels), add a [data.labeled] section '
            'with path = "..." and label_column = "label", or choose a label-free routing '
            f"({label_free})"
        )
