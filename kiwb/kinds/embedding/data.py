"""Reading an embedding project's data: the pool's texts, and an eval set that says how good an
embedding space is with labels the student never trains on: a label per text (the kNN probe),
a partner text per text (retrieval: find it among every partner), or both."""

from __future__ import annotations

from kiwb.errors import DataError
from kiwb.project.fingerprint import texts_fingerprint
from kiwb.workers.data import TextTable, _checked_labels, _checked_texts, open_text_columns


def load_role_table(path: str, spec, role: str, config=None) -> TextTable:
    """The embedding kind's load_table: a data set of the project, by its [data.ROLE] `spec`."""
    if role == "labeled":
        raise DataError(f"{path}: [data.labeled] routes classifiers with a few labels, and an "
                        "embedding project has no routing; remove [data.labeled] (label pairs "
                        "in the Conflicts pane instead)")
    if role == "eval" and spec.label_column is None and spec.pair_column is None:
        raise DataError(f"{path}: [data.eval] of an embedding project needs what its probes "
                        'read: label_column = "label" (kNN accuracy) or pair_column = '
                        '"partner" (retrieval of each text\'s partner), or both')
    wanted = ((spec.text_column, "text_column"), (spec.label_column, "label_column"),
              (spec.pair_column, "pair_column"))
    dataset = open_text_columns(path, wanted, spec.split, spec.limit, role, subset=spec.subset)
    texts = _checked_texts(dataset[spec.text_column], path, spec.text_column)
    labels = (_checked_labels(dataset[spec.label_column], dataset.features[spec.label_column], path)
              if spec.label_column is not None else None)
    partners = (_checked_texts(dataset[spec.pair_column], path, spec.pair_column)
                if spec.pair_column is not None else None)
    return TextTable(path, texts, labels, texts_fingerprint(texts), partners=partners)
