"""The [integration] settings as the workbench's forms show them: which ones, under what label,
and how a form's answers become a job's settings. A setting's value, choices and checks come
from kiwb.toml's declaration (IntegrationConfig), so a form cannot drift from the table or from
`kiwb train`'s flags. Pure Python: the workbench builds its fields from these."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kiwb.project.config_checks import checked_setting
from kiwb.project.config_schema import IntegrationConfig, declared_setting, rules_of


@dataclass(frozen=True)
class FormSetting:
    """One [integration] setting on a form: its key, the form's label and, for a yes/no, the
    line beside its box."""

    name: str
    label: str
    describe: str = ""

    @property
    def flag(self) -> bool:
        return _declared(self.name).type in (bool, "bool")

    def choices(self) -> tuple[str, ...]:
        """The declared choices (none for a number or a flag), "auto" among the routings (the
        teachers' kind's choice: per project for single-label teachers). A form narrows the
        methods to the teachers' kind's."""
        return tuple(rules_of(_declared(self.name)).choices or ())

    def shown(self, integration: IntegrationConfig) -> str | bool:
        """What the form starts with: the project's value (its "auto" settings resolved)."""
        value = getattr(integration, self.name)
        return value if isinstance(value, bool) else str(value)


METHOD = FormSetting("method", "method")
ROUTING = FormSetting("routing", "routing")
TAU = FormSetting("tau", "tau")
REWEIGHT = FormSetting("reweight", "re-weighting", "weight texts by margin")
USE_MC = FormSetting("use_mc", "MC dropout", "route by MC confidence")
GIVEN_LABELS = FormSetting("labels", "given labels", "use those given in Conflicts (6)")
TRAIN_FORM = (METHOD, ROUTING, TAU, REWEIGHT, USE_MC, GIVEN_LABELS)
INTEGRATE_FORM = (METHOD, ROUTING, GIVEN_LABELS)


def form_overrides(integration: IntegrationConfig, shown: tuple[FormSetting, ...],
                   answers: dict[str, Any], where: str) -> dict[str, Any]:
    """The settings a form's answers change, typed and checked as kiwb.toml's would be (a
    refusal names `where` and the key). An answer equal to the project's value is left out,
    as `kiwb train` without that flag leaves it: the job reads it from kiwb.toml.
    The method passes unchecked: the form offers only the teachers' kind's (an embedding
    project's pair weightings, supervised), and the job checks it against the kind."""
    found = {}
    for setting in shown:
        answer = answers[setting.name]
        if setting.name != "method":
            answer = checked_setting(IntegrationConfig, setting.name, answer, where)
        if answer != getattr(integration, setting.name):
            found[setting.name] = answer
    return found


def _declared(name: str):
    return declared_setting(IntegrationConfig, name)
