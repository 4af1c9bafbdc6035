"""Each kind says which [integration] settings it never applies (its description's
unused_settings), and one set away from its default is refused in one line naming it, for
every kind alike: none is left to do nothing without a word."""

from __future__ import annotations

import dataclasses

import pytest

from kiwb.errors import ConfigError
from kiwb.kinds import KINDS, kind_named
from kiwb.project.config_schema import IntegrationConfig, ProjectConfig
from kiwb.project.teacher_kinds import check_method

DEFAULTS = dataclasses.asdict(IntegrationConfig())
# A value away from the default, per setting a kind may leave unused.
AWAY = {"transfer": True, "class_weighting": 0.5, "tau": 0.5, "reweight": False, "use_mc": False,
        "conflict_threshold": 0.3}
# ...and both as kiwb.toml writes them, which the refusal quotes.
TOML = {"transfer": "true", "class_weighting": "0.5", "tau": "0.5", "reweight": "false",
        "use_mc": "false", "conflict_threshold": "0.3"}
TOML_DEFAULTS = {"transfer": "false", "class_weighting": "0", "tau": "0.2", "reweight": "true",
                 "use_mc": "true", "conflict_threshold": "0.1"}


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_setting_a_kind_never_applies_is_refused_and_the_defaults_pass(kind):
    described = kind_named(kind)
    described.check_settings(DEFAULTS, DEFAULTS)
    described.check_settings({**DEFAULTS, "transfer": None}, DEFAULTS)  # None: off
    for name, why in described.jobs.unused_settings.items():
        with pytest.raises(ValueError) as refused:
            described.check_settings({**DEFAULTS, name: AWAY[name]}, DEFAULTS)
        message = str(refused.value)
        assert message == (f"[integration] {name} = {TOML[name]} does not apply to "
                           f"{described.title} teachers: {why}; leave it at its default "
                           f"({TOML_DEFAULTS[name]})")


def test_what_each_kind_takes():
    unused = {name: set(kind.jobs.unused_settings) for name, kind in KINDS.items()}
    assert unused["sequence"] == set()                             # all (transfer: below)
    assert unused["multi-label"] == {"class_weighting"}
    assert unused["token"] == unused["multi-task"] == {"class_weighting"}
    # sentence encoders' pairs are weighed by their method, never routed: the routing knobs
    assert unused["embedding"] == {"class_weighting", "tau", "reweight", "use_mc",
                                   "conflict_threshold"}


@pytest.mark.parametrize("kind", list(KINDS))
def test_ants_transfer_is_declared_for_multi_label_teachers_and_refused_by_the_others(kind, tmp_path):
    config = ProjectConfig(root=tmp_path, file=tmp_path / "kiwb.toml", name="p")
    method = kind_named(kind).jobs.methods[0]
    if kind == "multi-label":
        check_method(config, kind_named(kind), method, settings={**DEFAULTS, "transfer": True})
        return
    with pytest.raises(ConfigError) as refused:
        check_method(config, kind_named(kind), method, settings={**DEFAULTS, "transfer": True})
    assert str(refused.value) == (
        f"{config.file}: [integration] transfer = true does not apply to {kind_named(kind).title} "
        "teachers: it applies to multi-label text classification teachers only; leave it at its "
        "default (false)")
