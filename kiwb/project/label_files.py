"""Label files for `kiwb labels export|import`: CSV or JSON Lines with a text and a label.

A file is read and checked whole before anything is stored, so a bad line leaves the store
as it was; the error names the file, the line and the fix.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from pathlib import Path

from kiwb.errors import DataError
from kiwb.project.atomic import atomic_write_text
from kiwb.project.labels import NONE, Decision, GivenLabel

FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl"}
COLUMNS = ("text", "label", "given_at", "user", "host")


def file_format(path: Path) -> str:
    """csv or jsonl, from the file's suffix."""
    found = FORMATS.get(path.suffix.lower())
    if found is None:
        raise DataError(f"{path}: give a .csv or .jsonl file (text and label columns)")
    return found


def write_label_file(path: Path, labels: Iterable[GivenLabel]) -> int:
    """Write the labels (text, label, when, who); returns how many. `none` marks none of
    these labels."""
    rows = [{"text": item.text, "label": item.shown, "given_at": round(item.given_at, 3),
             "user": item.user, "host": item.host} for item in labels]
    if file_format(path) == "jsonl":
        body = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    else:
        buffer = io.StringIO()
        # CRLF (RFC 4180): a text holding a bare \r is then quoted too, and reads back whole.
        writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\r\n")
        writer.writeheader()
        writer.writerows(rows)
        body = buffer.getvalue()
    atomic_write_text(path, body)
    return len(rows)


def read_label_file(path: Path, known: list[str], *, text_column: str = "text",
                    label_column: str = "label") -> list[Decision]:
    """The decisions of a label file, label None for `none`, with when and by whom they were
    given where the file says (kiwb labels export writes it); refuses the whole file on the
    first bad line."""
    kind = file_format(path)
    try:
        content = path.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except UnicodeDecodeError as error:
        line = path.read_bytes()[:error.start].count(b"\n") + 1
        raise DataError(f"{path}, line {line}: not UTF-8 text; save the file as UTF-8") from None
    rows = _jsonl_rows(path, content) if kind == "jsonl" else _csv_rows(path, content)
    known_set = set(known)
    found = []
    for line, row in rows:
        for column in (text_column, label_column):
            if column not in row:
                raise DataError(f"{path}, line {line}: no {column!r} column (found "
                                f"{', '.join(map(repr, row)) or 'none'}); name the columns "
                                f"with --text-column and --label-column")
        text, label = row[text_column], row[label_column]
        if not isinstance(text, str) or not text.strip():
            raise DataError(f"{path}, line {line}: the {text_column!r} value is empty or not "
                            "text; give the text that was labeled")
        label = str(label).strip() if label is not None else ""
        if label != NONE and label not in known_set:
            raise DataError(f"{path}, line {line}: unknown label {label!r}; use one of "
                            f"{', '.join(known)}, or {NONE} for none of these labels")
        found.append(Decision(text, None if label == NONE else label,
                              _given_at(path, line, row.get("given_at")),
                              _name(row.get("user")), _name(row.get("host"))))
    return found


def _given_at(path: Path, line: int, value) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise DataError(f"{path}, line {line}: given_at {value!r} is not a time in seconds since "
                        "1970; fix it or leave it empty (then: now)") from None


def _name(value) -> str | None:
    return str(value) if value not in (None, "") else None


def _jsonl_rows(path: Path, content: str) -> list[tuple[int, dict]]:
    rows = []
    # "\n" only: str.splitlines() also splits at U+2028 and U+0085, which JSON leaves as they
    # are inside strings.
    for line, text in enumerate(content.split("\n"), start=1):
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except json.JSONDecodeError as error:
            raise DataError(f"{path}, line {line}: not JSON ({error.msg}); write one object "
                            "per line") from None
        if not isinstance(row, dict):
            raise DataError(f"{path}, line {line}: not a JSON object; write one object with "
                            "text and label per line")
        rows.append((line, row))
    return rows


def _csv_rows(path: Path, content: str) -> list[tuple[int, dict]]:
    reader = csv.DictReader(io.StringIO(content, newline=""))
    try:
        rows = [(reader.line_num, {key: value for key, value in row.items() if key is not None})
                for row in reader]
    except csv.Error as error:
        raise DataError(f"{path}, line {reader.line_num}: {error}; fix the CSV quoting") from None
    if reader.fieldnames is None:
        raise DataError(f"{path}: empty file; give a header line with text and label columns")
    return rows
