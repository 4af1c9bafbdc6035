"""Each demo student marked against its kind's untrained reference, in its results table: the
learning check of the checkpoint it kept (kiwb.core.learning_check), in the words every kind
shares."""

from __future__ import annotations

from kiwb.core.learning_check import BELOW_REFERENCE, FAR_FROM_TARGETS, LearningCheck

CHECK_CAPTION = ("check: kiwb's learning check of the kept checkpoint against the untrained "
                 "reference above (⚠ below: more than a point under it; ⚠ collapsed: a class "
                 "never predicted), its words in the log and demo-results.json.")
# short, so that the methods' names keep their line at 80 columns
SHORT = {BELOW_REFERENCE: "below", FAR_FROM_TARGETS: "far"}


def check_cell(report: dict) -> str:
    """'ok', '⚠ below', '⚠ collapsed' …; '–' where the run kept no check."""
    check = LearningCheck.from_dict(report.get("check"))
    if check is None:
        return "–"
    return f"⚠ {SHORT.get(check.status, check.status)}" if check.flagged else "ok"
