"""The sequence kind's data sets: a text column and, where given, a label column."""

from __future__ import annotations

from kiwb.workers.data import TextTable, load_table


def load_role_table(path: str, spec, role: str, config=None) -> TextTable:
    """The sequence kind's load_table: a data set of the project, by its [data.ROLE] `spec`."""
    return load_table(path, text_column=spec.text_column, label_column=spec.label_column,
                      split=spec.split, limit=spec.limit, role=role, subset=spec.subset)
