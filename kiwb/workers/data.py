"""Reading text data sets (csv, jsonl, parquet, a saved `datasets` folder or a Hugging Face Hub
data set) into memory."""

from __future__ import annotations

import contextlib
import itertools
import socket
from dataclasses import dataclass
from pathlib import Path

from kiwb.errors import DataError
from kiwb.project.config_schema import HUB_DATA, hub_dataset
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


def load_table(
    path: str, *, text_column: str = "text", label_column: str | None = None,
    split: str | None = None, limit: int | None = None, role: str = "data",
    subset: str | None = None,
) -> TextTable:
    """Load texts (and labels) from a data file, a saved `datasets` folder or the Hub."""
    dataset = open_text_columns(path, ((text_column, "text_column"), (label_column, "label_column")),
                                split, limit, role, subset=subset)
    texts = _checked_texts(dataset[text_column], path, text_column)
    labels = None
    if label_column is not None:
        labels = _checked_labels(dataset[label_column], dataset.features[label_column], path)
    return TextTable(path, texts, labels, texts_fingerprint(texts))


def open_text_columns(path: str, wanted, split: str | None, limit: int | None, role: str, *,
                      subset: str | None = None):
    """The data set at `path`, checked to exist, to hold the `wanted` (column, kiwb.toml key)
    pairs (None: not asked for) and at least one row, cut to `limit` rows."""
    dataset = open_source(path, split, role, subset)
    columns = list(dataset.column_names)
    for column, key in wanted:
        if column is not None and column not in columns:
            raise DataError(
                f"{path}: no column {column!r} (columns: {', '.join(columns)}); "
                f"set {setting_place(key, role)}"
            )
    if len(dataset) == 0:
        raise DataError(f"{path}: the data set has no rows; give it at least one text")
    if limit is not None:
        dataset = dataset.select(range(min(limit, len(dataset))))
    return dataset


def open_source(path: str, split: str | None, role: str, subset: str | None = None):
    """The data set `path` names: a Hub data set ("hf://datasets/ORG/NAME"), else a local file
    or folder, which must exist."""
    repo = hub_dataset(path)
    if repo is not None:
        return open_hub_dataset(repo, subset, split, role)
    if subset is not None:
        raise DataError(f"{path}: a subset is a Hub data set's (\"{HUB_DATA}ORG/NAME\"); take "
                        f"{setting_place('subset', role)} out, or point the path at the Hub")
    location = Path(path)
    if not location.exists():
        raise DataError(f"{path}: no such file or folder; fix {setting_place('path', role)}")
    return open_dataset(location, split, role)


# data sets named on a command line, not in kiwb.toml: role -> the option naming the data set
# and the prefix of its own options (kiwb teach's --dev has --dev-split and --dev-subset)
COMMAND_LINE_ROLES = {"teach": ("--data", "--"), "teach-dev": ("--dev", "--dev-"),
                      "evaluate": ("--data", "--")}


def setting_place(key: str, role: str) -> str:
    """Where the user sets a data set's `key`: its kiwb.toml [data.ROLE] key, or the option of
    the command that named it."""
    if role == "evaluate" and key == "pair_column":  # kiwb evaluate reads [data.eval]'s
        return "pair_column in kiwb.toml [data.eval]"
    if role in COMMAND_LINE_ROLES:
        option, prefix = COMMAND_LINE_ROLES[role]
        if key == "path":
            return option
        if key in ("split", "subset"):
            return f"{prefix}{key}"
        return f"--{key.replace('_', '-')}"
    return f"{key} in kiwb.toml [data.{role}]"


PROBE_TIMEOUT_S = 3.0  # how long the Hub's host is given to answer before kiwb reads offline


@contextlib.contextmanager
def offline_unless_reachable():
    """Offline mode for what runs inside, where the Hub's host cannot be reached: a cached data
    set then loads, and one that is not is refused at once, where the Hub libraries would retry
    for half a minute, a warning line each time, before saying the same."""
    import datasets
    from huggingface_hub import constants

    if constants.is_offline_mode() or _reachable(constants.ENDPOINT):
        yield
        return
    before = (constants.HF_HUB_OFFLINE, datasets.config.HF_HUB_OFFLINE)
    constants.HF_HUB_OFFLINE = datasets.config.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE, datasets.config.HF_HUB_OFFLINE = before


def _reachable(endpoint: str) -> bool:
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=PROBE_TIMEOUT_S).close()
    except OSError:
        return False
    return True


def open_hub_dataset(repo: str, subset: str | None, split: str | None, role: str):
    """A Hub data set through datasets.load_dataset: cached as datasets caches, offline under
    HF_HUB_OFFLINE once cached. `repo` may also be a local folder laid out as a Hub data set
    repository (what the tests read offline). Refusals name the data set and the key to set."""
    import datasets

    datasets.disable_progress_bars()
    named = f"{HUB_DATA}{repo}" + (f" (subset {subset!r})" if subset else "")
    if not repo.strip("/"):
        raise DataError(f"{named}: no data set id; give {setting_place('path', role)} as "
                        f"\"{HUB_DATA}ORG/NAME\"")
    try:
        with offline_unless_reachable():
            loaded = datasets.load_dataset(repo, name=subset, split=split)
    except ValueError as error:  # an unknown split or subset: datasets lists the known ones
        lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
        first = lines[0] if lines else type(error).__name__
        key = ("split" if "split" in first.lower() and "config" not in first.lower()
               else "subset")
        text = " ".join(lines)  # the known names may come on a line of their own
        text = text if len(text) <= 400 else text[:397] + "..."
        raise DataError(f"{named}: {text}; set {setting_place(key, role)}") from None
    except ConnectionError as error:  # not cached here, and the Hub cannot be reached
        raise DataError(
            f"{named}: not in this machine's datasets cache and the Hub cannot be reached "
            f"({_first_line(error)}); load it once where there is internet, or point path at "
            "a local copy") from None
    except Exception as error:  # an id the Hub does not have, a repository it cannot read
        raise DataError(f"{named}: cannot load it: {_first_line(error)}; check the id at "
                        f"https://huggingface.co/datasets/{repo}") from None
    return _one_split(loaded, named, split, role)


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
    return _one_split(loaded, location, split, role)


def _one_split(loaded, location, split: str | None, role: str):
    """The split `split` of a DatasetDict (its only one when unset), or the Dataset itself."""
    import datasets

    if isinstance(loaded, datasets.DatasetDict):
        if split is None:
            if len(loaded) != 1:
                raise DataError(f"{location}: holds splits {', '.join(loaded)}; "
                                f"set {setting_place('split', role)}")
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


def row_name(path: str, row: int) -> str:
    """Row `row` (from 0) of a data set as an editor shows it: the line of a jsonl or csv
    file where it starts (blank lines, which the readers skip, and a csv header and quoted
    line breaks counted), else the row counted from 1. Read only when naming a fault."""
    location = Path(str(path))
    suffix = location.suffix.lower()
    try:
        if suffix == ".jsonl":
            with open(location, encoding="utf-8") as handle:
                rows = (number for number, line in enumerate(handle, 1) if line.strip())
                return f"line {next(itertools.islice(rows, row, None))}"
        if suffix in (".csv", ".tsv"):
            import csv

            with open(location, encoding="utf-8", newline="") as handle:
                reader = csv.reader(handle, delimiter="\t" if suffix == ".tsv" else ",")
                next(reader)  # the header
                start, found = reader.line_num + 1, -1
                for record in reader:
                    if record:  # a blank line is no row
                        found += 1
                        if found == row:
                            return f"line {start}"
                    start = reader.line_num + 1
    except (OSError, StopIteration, UnicodeDecodeError, ValueError):
        pass  # not a file here (the Hub's), or not one row more: count rows instead
    return f"row {row + 1}"


def _checked_texts(values: list, path: str, column: str) -> list[str]:
    for row, value in enumerate(values):
        if not isinstance(value, str):
            raise DataError(
                f"{path}: {row_name(path, row)} of column {column!r} is {value!r}, not a text; "
                "remove or fill that row"
            )
    return list(values)


def with_item_names(values: list, feature) -> list:
    """A column of lists of ClassLabel ids (conll2003's ner_tags, go_emotions' labels) as
    lists of the names they stand for; any other column as it is."""
    names = getattr(getattr(feature, "feature", None), "names", None)
    if names is None:
        return values
    return [[names[item] if isinstance(item, int) and 0 <= item < len(names) else item
             for item in value] if isinstance(value, list) else value for value in values]


def _checked_labels(values: list, feature, path: str) -> list[str]:
    names = getattr(feature, "names", None)  # a ClassLabel column stores ints
    labels = []
    for row, value in enumerate(values):
        if value is None:
            raise DataError(f"{path}: {row_name(path, row)} has no label; remove it or give it one")
        if names is not None and value < 0:  # -1: ClassLabel's "no label"
            raise DataError(f"{path}: {row_name(path, row)} has no label (ClassLabel -1); a split "
                            "without labels, as many Hub test splits are, is no labeled set: "
                            "choose a labeled split")
        labels.append(names[value] if names is not None else str(value))
    return labels


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0][:300]
