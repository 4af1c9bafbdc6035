"""Which outputs of a model answer which task: a teacher's heads, and the student's task map.

A multi-task model here is a plain *ForSequenceClassification whose outputs are laid end to end,
one slice per task, with `task_heads` in its config.json naming each slice: its task, kind
("single-label": a softmax over the slice; "multi-label": a sigmoid per output) and labels, in
output order. kiwb's multi-task students are saved so, and read back as teachers so; a one-head
classifier is one slice over all its outputs. Torch-free: the CLI and the workbench read it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

SINGLE_LABEL, MULTI_LABEL = "single-label", "multi-label"
CONFIG_KEY = "task_heads"  # where a multi-task model's config.json names its slices
# The kiwb.kinds kind whose integration a task of each kind uses.
KIND_OF_TASK = {SINGLE_LABEL: "sequence", MULTI_LABEL: "multi-label"}
TASK_OF_KIND = {kind: task for task, kind in KIND_OF_TASK.items()}


@dataclass(frozen=True)
class Head:
    """One slice of a model's outputs: the task it answers, its kind and its labels."""

    task: str
    kind: str                 # single-label or multi-label
    labels: tuple[str, ...]
    start: int                # its outputs are start..stop-1 of the model's
    stop: int

    def to_dict(self) -> dict:
        return {"name": self.task, "kind": self.kind, "labels": list(self.labels)}


def output_name(task: str, label: str) -> str:
    """A student output's name (its id2label): task names hold no "/", so it splits back."""
    return f"{task}/{label}"


def laid_out(heads: Sequence[tuple[str, str, Sequence[str]]]) -> tuple[Head, ...]:
    """(task, kind, labels) triples laid end to end as slices of one output layer."""
    found, start = [], 0
    for task, kind, labels in heads:
        found.append(Head(task, kind, tuple(labels), start, start + len(labels)))
        start += len(labels)
    return tuple(found)


def heads_of_config(model_config: Mapping, outputs: Sequence[str]) -> tuple[Head, ...]:
    """The slices a multi-task model's config names, checked against its outputs; ValueError in
    one line (after "<folder> ") when they do not add up."""
    entries = model_config.get(CONFIG_KEY) or []
    try:
        heads = laid_out([(str(entry["name"]), str(entry["kind"]), [str(x) for x in entry["labels"]])
                          for entry in entries])
    except (KeyError, TypeError):
        raise ValueError(f"has a {CONFIG_KEY} entry without name, kind and labels; each head needs "
                         "all three (kiwb export writes them)") from None
    total = heads[-1].stop if heads else 0
    if total != len(outputs):
        raise ValueError(f"names {total} outputs in its {CONFIG_KEY} but has {len(outputs)}; "
                         "its heads must cover every output once")
    bad = [head for head in heads if head.kind not in KIND_OF_TASK]
    if bad:
        raise ValueError(f"has head {bad[0].task!r} of kind {bad[0].kind!r}; kinds are "
                         f"{' or '.join(KIND_OF_TASK)}")
    return heads


# Every task's answers from an exported multi-task model with plain transformers: the snippet
# of the model card and of docs/kinds/multi-task.md (tests run it). `path` and `texts` are the
# reader's.
SNIPPET = '''\
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

model = AutoModelForSequenceClassification.from_pretrained(path).eval()
tokenizer = AutoTokenizer.from_pretrained(path)
thresholds = getattr(model.config, "label_thresholds", None) or {}
with torch.no_grad():
    logits = model(**tokenizer(texts, padding=True, truncation=True, return_tensors="pt")).logits
answers, start = {}, 0
for head in model.config.task_heads:  # one slice of the outputs per task, in order
    names, part = head["labels"], logits[:, start:start + len(head["labels"])]
    start += len(names)
    if head["kind"] == "single-label":  # softmax over the slice: one label per text
        answers[head["name"]] = [names[i] for i in part.argmax(-1).tolist()]
    else:  # a sigmoid per label, said over its tuned threshold (0.5 without one)
        cut = torch.tensor([thresholds.get(f'{head["name"]}/{n}', 0.5) for n in names])
        answers[head["name"]] = [[n for n, yes in zip(names, row) if yes]
                                 for row in (part.sigmoid() > cut).tolist()]
print(answers)  # {"task": [one answer per text], ...}
'''
