"""Writing the conflicts list (as filtered in the workbench) to a CSV file, page by page."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path

from kiwb.project.atomic import atomic_open
from kiwb.project.instances import InstanceFilter, key_of
from kiwb.project.queries import conflict_page, open_store
from kiwb.project.records import IntegrationRecord
from kiwb.tui.labeling import label_cell

PAGE = 5000


def export_conflicts(root: Path, integration: IntegrationRecord, filters: InstanceFilter, path: Path,
                     should_stop: Callable[[], bool] = lambda: False) -> int:
    """Write every text matching `filters` in their order; returns the rows written.

    The file appears whole or not at all; rows are read a page at a time, so a million
    texts never sit in memory together.
    """
    teachers, labels = integration.summary.teachers, list(integration.summary.labels)
    written = 0
    with open_store(root) as store, atomic_open(path, "wb") as handle:
        text = io.TextIOWrapper(handle, encoding="utf-8", newline="", write_through=True)
        writer = csv.writer(text)
        writer.writerow(["row", "margin", "routed_teacher", "target_class", "gold_label",
                         "given_label", *(f"confidence_{teacher}" for teacher in teachers), "text"])
        after = None
        while store is not None:
            if should_stop():
                raise InterruptedError("the export was stopped")  # leaves no partial file
            page = conflict_page(store, integration.key, filters, after, PAGE)
            for item in page:
                writer.writerow([item.row, f"{item.margin:.6f}", _name(teachers, item.routed),
                                 _name(labels, item.target), _name(labels, item.gold),
                                 label_cell(item), *(f"{c:.6f}" for c in item.confidences),
                                 item.text])
            written += len(page)
            if len(page) < PAGE:
                break
            after = key_of(page[-1], filters)
        text.flush()
        text.detach()  # the atomic writer closes the file itself
    return written


def _name(names: list[str], index: int | None) -> str:
    if index is None:
        return ""
    return names[index] if 0 <= index < len(names) else str(index)
