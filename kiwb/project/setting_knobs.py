"""How a kiwb.toml setting shows outside kiwb.toml, declared beside its key (`Shown`): its
command-line flag, its part of a run's default name, the value at which it is off, the kinds
that apply it, and its label on the workbench's forms.

kiwb.toml's declaration (kiwb.project.config_schema: IntegrationConfig's [integration] keys and
the [training] keys `kiwb train` overrides) is the one place a setting is written: `kiwb
integrate` and `kiwb train` take their flags and checks from it (kiwb.project.job_specs), runs
are named from it (`default_run_name`), the stored record is [integration] resolved
(kiwb.project.records.IntegrationSettings), integration keys leave out what is off, a kind
refuses what is declared for others, and the workbench's forms list what it labels
(kiwb.project.setting_form). Pure Python.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kiwb.core.choices import (
    MULTILABEL_METHODS,
    MULTITASK_METHODS,
    PAIR_WEIGHTINGS,
    ROUTINGS,
    SUPERVISED,
)

SHOWN = "shown"  # a settings field's metadata key holding its Shown


@dataclass(frozen=True)
class Flag:
    """How a spec field is written on the command line."""

    name: str  # "--device"
    help: str
    type: Any = str  # argparse's converter; bool fields are switches
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    negative: bool = False  # a switch that sets the field to False (--no-reweight)
    required: bool = False
    default: Any = None  # the CLI's default when the flag is not given
    # Former spellings, still read but not shown in --help (kept for one release)
    aliases: tuple[str, ...] = ()


# (the setting's value, every resolved setting, the teachers' kind's default routing) -> the
# part it adds to a run's default name ("" for none)
NamePart = Callable[[Any, Mapping[str, Any], str], str]


class _AlwaysOn:
    def __repr__(self) -> str:
        return "always on"


ALWAYS_ON = _AlwaysOn()  # a setting with no off value: always in keys and records


@dataclass(frozen=True)
class Shown:
    """Where a kiwb.toml setting shows beside kiwb.toml (name_part, off and stored_when_off
    are [integration]'s: a run's name and an integration's key)."""

    flag: Flag
    jobs: tuple[str, ...] = ("integrate", "train")  # the commands that take the flag
    # The teacher kinds that apply it (kiwb/kinds: "sequence", "multi-label", ...); None: every
    # kind. Set away from its default for another kind's project, it is refused in one line.
    kinds: tuple[str, ...] | None = None
    name_part: NamePart | None = None  # its part of a run's default name; None: never named
    # The value at which the setting is off: left out of integration keys (a key is a hash no
    # migration can make again, so the keys made before the setting existed keep matching).
    off: Any = ALWAYS_ON
    # At `off`, also left out of records and run manifests, which then read it back as off:
    # a new setting declared so needs no store migration. (Older settings are always stored.)
    stored_when_off: bool = True
    form: str | None = None  # its label on the workbench's forms; None: not on a form
    form_line: str = ""  # a yes/no's line beside its box; a text field's words while empty
    forms: tuple[str, ...] = ("train",)  # the forms that show it: "train", "integrate"


def shown_of(setting: dataclasses.Field) -> Shown | None:
    """The Shown of a settings field, if it has one."""
    return setting.metadata.get(SHOWN)


def shown_settings(declared: type) -> list[tuple[dataclasses.Field, Shown]]:
    """The fields of the settings class `declared` that have a Shown, in declaration order."""
    found = []
    for setting in dataclasses.fields(declared):
        shown = shown_of(setting)
        if shown is not None:
            found.append((setting, shown))
    return found


def stored_only_when_on(setting: dataclasses.Field) -> bool:
    """Whether records leave the setting out at its off value (and read it back as off when
    missing): Shown.stored_when_off False."""
    shown = shown_of(setting)
    return shown is not None and not shown.stored_when_off


def left_out_when_off(setting: dataclasses.Field, value: Any) -> bool:
    """Whether a record leaves out this value of the setting (it reads back as off)."""
    return stored_only_when_on(setting) and value == shown_of(setting).off


# -- flag help texts ------------------------------------------------------------------------

def either(names: tuple[str, ...]) -> str:
    """`a, b or c`."""
    return ", ".join(names[:-1]) + " or " + names[-1]


def other_kinds_methods(also: str = "") -> str:
    """The methods of the kinds whose methods are not single-label teachers', for a --method
    help: each kind checks its own (kiwb/kinds), so the parser cannot list them as choices."""
    return (f" (multi-label teachers: {either(MULTILABEL_METHODS)}{also}; multi-task projects: "
            f"{either(MULTITASK_METHODS)} (VENUS' consensus){also}; embedding projects: the pair "
            f"weighting, {either(PAIR_WEIGHTINGS)})")


def routing_help() -> str:
    return ("how teachers are compared per text: auto: single-label teachers: the routing that "
            "routes best on the labeled texts (eval), or without labels the label-free choice; "
            "other kinds: their own; "
            + "; ".join(f"{name}: {text}" for name, text in ROUTINGS.items())
            + " (default: [integration] routing)")


# -- run-name parts ----------------------------------------------------------------------------

def unless_supervised(part: Callable[[Any], str]) -> NamePart:
    """A part named for distilled runs only: a supervised run integrates nothing."""
    return lambda value, settings, _routing: "" if settings["method"] == SUPERVISED else part(value)


def for_muki(part: Callable[[Any], str]) -> NamePart:
    """A part named for the MUKI methods only, the ones that route and weigh by margin."""
    return lambda value, settings, _routing: part(value) if settings["method"].startswith("muki") else ""
