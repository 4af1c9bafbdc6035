"""The kiwb.toml settings as the workbench's forms show them ([integration]'s, and the [training]
ones the train form overrides): which ones, under what label, and how a form's answers become a
job's settings. A setting's value, choices and checks come from kiwb.toml's declaration
(IntegrationConfig, TrainingConfig), so a form cannot drift from the table or from `kiwb
train`'s flags. Pure Python: the workbench builds its fields from these."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kiwb.project.config_checks import checked_setting
from kiwb.project.config_schema import IntegrationConfig, TrainingConfig, declared_setting, rules_of
from kiwb.project.setting_knobs import shown_settings


@dataclass(frozen=True)
class FormSetting:
    """One setting on a form: its key, the form's label and the line beside its box (a yes/no)
    or in its empty field (text)."""

    name: str
    label: str
    describe: str = ""
    declared: type = IntegrationConfig  # the kiwb.toml table's declaration it comes from

    @property
    def flag(self) -> bool:
        return declared_setting(self.declared, self.name).type in (bool, "bool")

    def choices(self) -> tuple[str, ...]:
        """The declared choices (none for a number or a flag), "auto" among the routings (the
        teachers' kind's choice: per project for single-label teachers). A form narrows the
        methods to the teachers' kind's."""
        return tuple(rules_of(declared_setting(self.declared, self.name)).choices or ())

    def shown(self, section: Any) -> str | bool:
        """What the form starts with: the project's value in `section` (its table, its "auto"
        settings resolved); an unset one, empty."""
        value = getattr(section, self.name)
        return value if isinstance(value, bool) else "" if value is None else str(value)


def form_settings(form: str, declared: type = IntegrationConfig) -> tuple[FormSetting, ...]:
    """The settings a form shows ("train" or "integrate"), as `declared` labels them
    (Shown.form, Shown.forms), in its order."""
    return tuple(FormSetting(setting.name, shown.form, shown.form_line, declared)
                 for setting, shown in shown_settings(declared)
                 if shown.form is not None and form in shown.forms)


TRAIN_FORM = form_settings("train")
INTEGRATE_FORM = form_settings("integrate")
TRAINING_FORM = form_settings("train", TrainingConfig)  # the train form's [training] fields


def form_overrides(section: Any, shown: tuple[FormSetting, ...], answers: dict[str, Any],
                   where: str) -> dict[str, Any]:
    """The settings a form's answers change, typed and checked as kiwb.toml's would be (a
    refusal names `where` and the key). An answer equal to the project's value in `section`
    (its table) is left out, as `kiwb train` without that flag leaves it: the job reads it from
    kiwb.toml. The method passes unchecked: the form offers only the teachers' kind's (an
    embedding project's pair weightings, supervised), and the job checks it against the kind."""
    found = {}
    for setting in shown:
        answer = answers[setting.name]
        if setting.name != "method":
            answer = checked_setting(setting.declared, setting.name, answer, where)
        if answer != getattr(section, setting.name):
            found[setting.name] = answer
    return found
