"""Reading a multi-label project's data: texts, and each text's gold labels where given.

A text's labels are a list in jsonl, json or parquet (["sports", "politics"], [] for none), or
one string split by the data set's label_separator in CSV ("sports;politics", "" for none).
"""

from __future__ import annotations

from kiwb.errors import DataError
from kiwb.project.fingerprint import texts_fingerprint
from kiwb.workers.data import (
    TextTable,
    _checked_texts,
    open_text_columns,
    row_name,
    with_item_names,
)


def load_label_set_table(path: str, *, text_column: str = "text", label_column: str | None = None,
                         label_separator: str | None = None, split: str | None = None,
                         limit: int | None = None, role: str = "data",
                         subset: str | None = None) -> TextTable:
    """The texts of a data set and, with `label_column`, each text's set of gold labels."""
    dataset = open_text_columns(path, ((text_column, "text_column"), (label_column, "label_column")),
                                split, limit, role, subset=subset)
    texts = _checked_texts(dataset[text_column], path, text_column)
    label_sets = None
    if label_column is not None:
        values = with_item_names(dataset[label_column], dataset.features[label_column])
        label_sets = [_label_set(value, path, row, label_column, label_separator, role)
                      for row, value in enumerate(values)]
    return TextTable(path, texts, None, texts_fingerprint(texts), label_sets=label_sets)


def _label_set(value, path: str, row: int, column: str, separator: str | None,
               role: str) -> tuple[str, ...]:
    """One row's labels, in their order, each once."""
    if value is None and separator is not None:
        return ()  # an empty CSV cell: a text with no labels
    if isinstance(value, str):
        if separator is None:
            raise DataError(f"{path}: {row_name(path, row)} of column {column!r} is {value!r}, a string, not a "
                            "list of labels: give each row a list, or set label_separator (e.g. "
                            f'";") in kiwb.toml [data.{role}]')
        labels = [label.strip() for label in value.split(separator)] if value.strip() else []
    elif isinstance(value, list | tuple) and all(isinstance(label, str) for label in value):
        labels = [label.strip() for label in value]
    else:
        raise DataError(f"{path}: {row_name(path, row)} of column {column!r} is {value!r}, not a list of "
                        "label names; give each row a list of strings ([] for none)")
    if any(not label for label in labels):
        raise DataError(f"{path}: {row_name(path, row)} of column {column!r} has an empty label name "
                        f"({value!r}); remove it")
    return tuple(dict.fromkeys(labels))


def load_role_table(path: str, spec, role: str, config=None) -> TextTable:
    """The multi-label kind's load_table: a data set of the project, by its [data.ROLE] `spec`."""
    if role in ("eval", "labeled") and spec.label_column is None:
        raise DataError(f"{path}: [data.{role}] of a project of multi-label teachers needs each "
                        'text\'s gold labels: set label_column = "labels" (a list per row, or '
                        "a string split by label_separator)")
    return load_label_set_table(path, text_column=spec.text_column, label_column=spec.label_column,
                                label_separator=spec.label_separator, split=spec.split,
                                limit=spec.limit, role=role, subset=spec.subset)


def check_known_labels(table: TextTable, union: list[str], column: str) -> None:
    """Every gold label is one some teacher knows; else one line naming it and the union."""
    known = set(union)
    for row, labels in enumerate(table.label_sets or []):
        unknown = [label for label in labels if label not in known]
        if unknown:
            raise DataError(f"{table.source}: {row_name(table.source, row)} of column {column!r} has label "
                            f"{unknown[0]!r}, which no teacher knows ({', '.join(union)}); fix "
                            "the label or add a teacher that knows it")


def check_tables(config, tables: dict[str, TextTable], teachers) -> None:
    """The multi-label kind's data check: every gold label of every data set is one some
    teacher knows (named in one line otherwise)."""
    union = list(dict.fromkeys(label for teacher in teachers for label in teacher.classes))
    for role, table in tables.items():
        check_known_labels(table, union, getattr(config.data, role).label_column)
