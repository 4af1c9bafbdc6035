"""The configuration reference of the documentation, made from the settings dataclasses
themselves, so the documented keys, defaults and meanings cannot drift from the code
(`python -m kiwb.project.config_reference` prints it; the docs build puts it in its page)."""

from __future__ import annotations

import dataclasses

from kiwb.project.config_render import toml_fields, toml_value
from kiwb.project.config_schema import (
    DatasetConfig,
    EmbeddingConfig,
    IntegrationConfig,
    ScoringConfig,
    TaskConfig,
    TeacherConfig,
    TrainingConfig,
    rules_of,
)

SECTIONS = (
    ("[[teachers]]", TeacherConfig),
    ("[[tasks]] (multi-task projects)", TaskConfig),
    ("[data.unlabeled] / [data.eval] / [data.labeled]", DatasetConfig),
    ("[scoring]", ScoringConfig),
    ("[integration]", IntegrationConfig),
    ("[training]", TrainingConfig),
    ("[embedding] (embedding projects)", EmbeddingConfig),
)


def _default(field: dataclasses.Field) -> str:
    if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
        return "required"
    return "unset" if field.default is None else toml_value(field.default)


def _meaning(field: dataclasses.Field) -> str:
    choices = rules_of(field).choices
    return field.metadata["help"] + (f" One of: {', '.join(choices)}." if choices else "")


def reference_markdown() -> str:
    """One table of key, default and meaning per section of kiwb.toml."""
    blocks = []
    for title, cls in SECTIONS:
        rows = [f"| `{field.name}` | `{_default(field)}` | {_meaning(field)} |"
                for field, _ in toml_fields(cls)]
        blocks.append("\n".join([f"## {title}", "", "| key | default | meaning |", "|---|---|---|", *rows]))
    return "\n\n".join(blocks) + "\n"


if __name__ == "__main__":
    print(reference_markdown(), end="")
