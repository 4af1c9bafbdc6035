"""Labeling conflicts: the keys' meaning, the legend that shows them and the header line that
says what the labels are doing. Pure functions over plain values, shared by the Conflicts pane
and the detail view."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from rich.text import Text

from kiwb.core.choices import FEW_LABEL_ROUTINGS
from kiwb.project.instances import ORDERS, Instance
from kiwb.project.job_specs import IntegrateSpec, TrainSpec
from kiwb.project.labels import NONE
from kiwb.project.queries import LabelProgress
from kiwb.project.teacher_kinds import LoadedProject

NUMBERED = 9  # labels on the number keys; the picker (p) has every label
ORDER_NAMES = {"margin": "lowest margin first", "useful": "most useful next",
               "sample": "random sample"}
NEXT_ORDER = dict(zip(ORDERS, ORDERS[1:] + ORDERS[:1], strict=True))  # what `o` goes on to
SCOPE_NAMES = {"all": "all", "unlabeled": "unlabeled", "labeled": "labeled"}
NEXT_SCOPE = {"all": "unlabeled", "unlabeled": "labeled", "labeled": "all"}


@dataclass(frozen=True)
class Decision:
    """What the user decided on one text: a label, none of these labels, or to skip it."""

    kind: str  # "label", "none", "skip" or "undo" (the last decision taken back)
    label: str | None = None


LABEL_KEYS = "123456789"  # ASCII only: str.isdigit() also takes "²", which int() refuses


def decision_for_key(key: str, labels: list[str]) -> Decision | None:
    """The decision a key stands for while labeling, or None (1-9: a label, 0 or n: none,
    s: skip, u: undo)."""
    if len(key) == 1 and key in LABEL_KEYS:
        number = int(key)
        return Decision("label", labels[number - 1]) if number <= min(len(labels), NUMBERED) else None
    return {"0": Decision("none"), "n": Decision("none"), "s": Decision("skip"),
            "u": Decision("undo")}.get(key)


def is_label_key(key: str) -> bool:
    """A digit, which labeling takes for itself even when no label is on it (so a 6 with four
    labels does not switch the workbench to pane 6 halfway through a labeling session)."""
    return len(key) == 1 and key in "0" + LABEL_KEYS


def no_label_on(key: str, labels: list[str]) -> str:
    return (f"no label on {key}: the number keys give labels 1-{min(len(labels), NUMBERED)}; "
            "p lists every label")


def legend(labels: list[str], escape: str = "leave") -> Text:
    """`1 sports 2 politics … · 0 none · s skip · u undo · p list · Esc leave` (`escape`:
    what Esc does there)."""
    text = Text()
    for number, label in enumerate(labels[:NUMBERED], start=1):
        text.append(str(number), "bold").append(f" {label} ")
    keys = [("0", NONE), ("s", "skip"), ("u", "undo"),
            ("p", "all labels" if len(labels) > NUMBERED else "list"), ("Esc", escape)]
    for key, meaning in keys:
        text.append("· ").append(key, "bold").append(f" {meaning} ")
    return text


def label_cell(item: Instance) -> str:
    if not item.labeled:
        return ""
    return NONE if item.given is None else item.given


def header(progress: LabelProgress | None) -> Text:
    """What the labels are doing: how many, how often the routing agrees with them (a
    routing fitted on them is not measured by them: the label-free routing's agreement before
    is shown instead), and whether the integration shown read them as they are now; then the
    keys that feed them back."""
    if progress is None or not progress.in_store:
        return Text.assemble(("Labels: ", "bold"), "none yet · ", ("l", "bold"),
                             " labels texts with the number keys · ", ("o", "bold"),
                             " most useful next")
    parts = [f"{progress.labeled:,} here"
             + (f" ({progress.none:,} none)" if progress.none else "")
             + (f" of {progress.in_store:,}" if progress.in_store != progress.labeled else "")]
    if progress.agreement is not None and progress.fitted_on:
        parts.append("the routing was fitted on them")
        if progress.before is not None:
            parts.append(f"the routing without them agreed {100 * progress.before:.0f}%")
    elif progress.agreement is not None:
        parts.append(f"routing agrees {progress.agree:,}/{progress.judged:,} "
                     f"({100 * progress.agreement:.0f}%)")
    keys = "in use · t train" if progress.read_current else "r re-integrate · t train"
    return Text.assemble(("Labels: ", "bold"), " · ".join(parts), (f" · {keys}", "dim"))


def _labels_routing(project: LoadedProject) -> str | None:
    """The routing to fit on the labels: the project's own if it reads labels, else the one
    the teachers' kind fits on labels (None: the project's)."""
    if project.config.integration.routing in FEW_LABEL_ROUTINGS:
        return None
    return project.kind.jobs.labels_routing


def integrate_with_labels(project: LoadedProject) -> IntegrateSpec:
    """The integration the Conflicts pane's r starts."""
    return IntegrateSpec(labels=True, routing=_labels_routing(project))


def train_with_labels(project: LoadedProject, taken: Callable[[str], bool]) -> TrainSpec:
    """The student run the Conflicts pane's t starts: the settings of r, named by them; a
    name `taken` by an earlier run gets -2, -3, ... so label, train, label more, train again
    keeps every run beside the others."""
    spec = TrainSpec(labels=True, routing=_labels_routing(project)).named(
        project.config.integration, project.kind.jobs.default_routing)
    return replace(spec, run=free_run_name(spec.run, taken))


def free_run_name(name: str, taken: Callable[[str], bool]) -> str:
    number = 1
    while taken(candidate := name if number == 1 else f"{name}-{number}"):
        number += 1
    return candidate
