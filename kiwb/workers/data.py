"""Reading text data sets (csv, jsonl, parquet or a saved `datasets` folder) into memory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kiwb.errors import DataError
from kiwb.project.fingerprint import texts_fingerprint

_BUILDERS = {".csv": "csv", ".tsv": "csv", ".json": "json", ".jsonl": "json", ".parquet": "parquet"}
_TEXT_FORMATS = {".csv", ".tsv", ".json", ".jsonl"}


@dataclass(frozen=True)
class TextTable:
    """The texts (and labels, when the data set has them) of one data set, in row order."""

    source: str
    texts: list[str]
    labels: list[str] | None
    fingerprint: str
    words: list[list[str]] | None = None  # token kind: each text's words
    tags: list[list[str]] | None = None   # token kind: each word's gold tag (BIO2)
    label_sets: list[tuple[str, ...]] | None = None  # multi-label kind: each text's gold labels
    # multi-task kind: per task it holds gold for, each text's label (or labels)
    task_gold: dict[str, list] | None = None
    partners: list[str] | None = None  # embedding kind's eval set: each text's partner text

    def __len__(self) -> int:
        return len(self.texts)


def load_role_table(path: str, spec, role: str, config=None) -> TextTable:
    """The sequence kind's data seam: a data set of the project, by its [data.ROLE] `spec`."""
    return load_table(path, text_column=spec.text_column, label_column=spec.label_column,
                      split=spec.split, limit=spec.limit, role=role)


def load_table(
    path: str, *, text_column: str = "text", label_column: str | None = None,
    split: str | None = None, limit: int | None = None, role: str = "data",
) -> TextTable:
    """Load texts (and labels) from a data file or a saved `datasets` folder."""
    dataset = open_text_columns(path, ((text_column, "text_column"), (label_column, "label_column")),
                                split, limit, role)
    texts = _checked_texts(dataset[text_column], path, text_column)
    labels = None
    if label_column is not None:
        labels = _checked_labels(dataset[label_column], dataset.features[label_column], path)
    return TextTable(path, texts, labels, texts_fingerprint(texts))


def open_text_columns(path: str, wanted, split: str | None, limit: int | None, role: str):
    """The data set at `path`, checked to exist, to hold the `wanted` (column, kiwb.toml key)
    pairs (None: not asked for) and at least one row, cut to `limit` rows."""
    location = Path(path)
    if not location.exists():
        raise DataError(f"{path}: no such file or folder; fix the path in kiwb.toml [data.{role}]")
    dataset = open_dataset(location, split, role)
    columns = list(dataset.column_names)
    for column, key in wanted:
        if column is not None and column not in columns:
            raise DataError(
                f"{path}: no column {column!r} (columns: {', '.join(columns)}); "
                f"set {key} in kiwb.toml [data.{role}]"
            )
    if len(dataset) == 0:
        raise DataError(f"{path}: the data set has no rows; give it at least one text")
    if limit is not None:
        dataset = dataset.select(range(min(limit, len(dataset))))
    return dataset


def open_dataset(location: Path, split: str | None, role: str):
    import datasets

    datasets.disable_progress_bars()
    if location.is_dir():
        return _load_saved(location, split, role)
    builder = _BUILDERS.get(location.suffix.lower())
    if builder is None:
        raise DataError(
            f"{location}: unknown data format {location.suffix!r}; use .csv, .tsv, .jsonl, "
            ".json, .parquet or a folder saved with datasets' save_to_disk"
        )
    if location.suffix.lower() in _TEXT_FORMATS:
        _require_utf8(location)
    if location.stat().st_size == 0:
        raise DataError(f"{location}: the file is empty; give it at least one text")
    options = {"delimiter": "\t"} if location.suffix.lower() == ".tsv" else {}
    try:
        return datasets.load_dataset(
            builder, data_files=str(location), split="train", **options
        )
    except Exception as error:  # datasets wraps parser errors in several exception types
        if "corresponds to no data" in str(error):  # datasets' words for a file of zero rows
            raise DataError(f"{location}: the file has no rows; give it at least one text") from None
        raise DataError(f"{location}: could not parse it as {builder}: {_first_line(error)}") from error


def _load_saved(location: Path, split: str | None, role: str):
    import datasets

    try:
        loaded = datasets.load_from_disk(str(location))
    except Exception as error:
        raise DataError(
            f"{location}: not a data set folder saved with save_to_disk ({_first_line(error)})"
        ) from error
    if isinstance(loaded, datasets.DatasetDict):
        if split is None:
            if len(loaded) != 1:
                raise DataError(
                    f"{location}: holds splits {', '.join(loaded)}; "
                    f"set split in kiwb.toml [data.{role}]"
                )
            split = next(iter(loaded))
        if split not in loaded:
            raise DataError(f"{location}: no split {split!r} (splits: {', '.join(loaded)})")
        return loaded[split]
    return loaded


def _require_utf8(location: Path) -> None:
    """Refuse a file that is not UTF-8 before a parser turns it into an obscure error."""
    offset = 0
    with open(location, "rb") as handle:
        tail = b""
        while chunk := handle.read(1 << 20):
            data = tail + chunk
            try:
                data.decode("utf-8")
                tail = b""
            except UnicodeDecodeError as error:
                # A multi-byte character may be cut at the chunk edge: carry its start over.
                if error.start >= len(data) - 3 and error.reason == "unexpected end of data":
                    tail = data[error.start:]
                else:
                    position = offset - len(tail) + error.start
                    raise DataError(
                        f"{location}: not valid UTF-8 (byte 0x{data[error.start]:02x} at offset "
                        f"{position}); re-save the file as UTF-8"
                    ) from None
            offset += len(chunk)
        if tail:
            raise DataError(f"{location}: not valid UTF-8 (truncated character at the end)")


def _checked_texts(values: list, path: str, column: str) -> list[str]:
    for row, value in enumerate(values):
        if not isinstance(value, str):
            raise DataError(
                f"{path}: row {row} of column {column!r} is {value!r}, not a text; "
                "remove or fill that row"
            )
    return list(values)


def _checked_labels(values: list, feature, path: str) -> list[str]:
    names = getattr(feature, "names", None)  # a ClassLabel column stores ints
    labels = []
    for row, value in enumerate(values):
        if value is None:
            raise DataError(f"{path}: row {row} has no label; remove it or give it one")
        labels.append(names[value] if names is not None else str(value))
    return labels


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0][:300]
