"""Write dataclass-based settings as commented TOML, each key under its one-line help."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any

from kiwb.project.config_schema import rules_of

# Characters a TOML basic string must escape; other control characters become \uXXXX.
_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def toml_value(value: Any) -> str:
    """Write one value as TOML (also used to quote values in error messages)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        pairs = ", ".join(f"{key} = {toml_value(item)}" for key, item in value.items())
        return "{ " + pairs + " }" if pairs else "{}"
    return str(value)


def _quote(text: str) -> str:
    def escape(char: str) -> str:
        if char in _ESCAPES:
            return _ESCAPES[char]
        if ord(char) < 0x20 or ord(char) == 0x7F:
            return f"\\u{ord(char):04X}"
        return char

    return '"' + "".join(escape(char) for char in text) + '"'


def optional_inner(hint: Any) -> Any:
    """`X` for a hint `X | None`; any other hint unchanged."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        inner = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(inner) == 1:
            return inner[0]
    return hint


def table_type(hint: Any) -> tuple[type | None, bool]:
    """(dataclass, is_array) when a hint is a TOML table or array of tables; else (None, False)."""
    hint = optional_inner(hint)
    if dataclasses.is_dataclass(hint):
        return hint, False
    if typing.get_origin(hint) is tuple and dataclasses.is_dataclass(typing.get_args(hint)[0]):
        return typing.get_args(hint)[0], True
    return None, False


def toml_fields(cls: type) -> list[tuple[dataclasses.Field, Any]]:
    """The fields of a settings dataclass that live in the TOML file, with their type hints."""
    hints = typing.get_type_hints(cls)
    return [
        (field, hints[field.name])
        for field in dataclasses.fields(cls)
        if not rules_of(field).internal
    ]


def render_toml(settings: Any, header: tuple[str, ...]) -> str:
    """The commented TOML text of a settings dataclass instance, under a header comment."""
    lines = [f"# {line}" if line else "#" for line in header] + [""]
    _render_table(settings, "", lines, commented=False, entry=False)
    return "\n".join(lines) + "\n"


def _render_table(
    settings: Any, section: str, lines: list[str], commented: bool, entry: bool
) -> None:
    fields = toml_fields(type(settings))
    keys = [(field, hint) for field, hint in fields if table_type(hint)[0] is None]
    tables = [(field, hint) for field, hint in fields if table_type(hint)[0] is not None]
    if section and keys:
        _add(lines, f"[[{section}]]" if entry else f"[{section}]", commented)
    for field, _hint in keys:
        value = getattr(settings, field.name)
        if value is None and commented:
            continue  # an example block shows only the keys it sets
        lines.append(f"# {field.metadata['help']}")
        if value is None:
            lines.append(f"# {field.name} = {toml_value(rules_of(field).example)}")
        else:
            _add(lines, f"{field.name} = {toml_value(value)}", commented)
    for field, hint in tables:
        _render_subtable(settings, field, hint, section, lines, commented)


def _render_subtable(
    settings: Any,
    field: dataclasses.Field,
    hint: Any,
    section: str,
    lines: list[str],
    commented: bool,
) -> None:
    cls, is_array = table_type(hint)
    name = f"{section}.{field.name}" if section else field.name
    value = getattr(settings, field.name)
    # An unset table is shown as a commented-out example so the template documents it.
    example = rules_of(field).example
    if is_array:
        items = value or tuple(cls(**item) for item in example or ())
    else:
        items = (value if value is not None else cls(**(example or {})),)
    lines.extend(["", f"# {field.metadata['help']}"])
    for index, item in enumerate(items):
        if index:
            lines.append("")
        _render_table(item, name, lines, commented or not value, entry=is_array)


def _add(lines: list[str], line: str, commented: bool) -> None:
    lines.append(f"# {line}" if commented else line)
