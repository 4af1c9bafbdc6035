"""`kiwb predict` for a multi-task model: every task's answer per text, from one forward pass."""

from __future__ import annotations

import torch
from rich.markup import escape

from kiwb.console import one_line
from kiwb.kinds.multitask.student import load_multitask, task_answers
from kiwb.workers.runtime import FittedBatch
from kiwb.workers.student import predict_logits, tokenize


def predicted_answers(folder, texts: list[str], top: int = 3) -> list[str]:
    """The multi-task kind's predict: per text, each task's answer (a single-label
    task's label and probability; a multi-label task's labels over their thresholds, or none),
    then the text's start."""
    model, tokenizer, heads = load_multitask(folder)
    logits = predict_logits(model, tokenizer, tokenize(tokenizer, texts, 512), FittedBatch(32),
                            torch.device("cpu"))
    answers = task_answers(heads, logits, getattr(model.config, "label_thresholds", None))
    lines = []
    for row, text in enumerate(texts):
        said = []
        for head in heads:
            decided, probs = answers[head.task]
            if head.kind == "single-label":
                label = int(decided[row])
                said.append(f"{head.task}: [bold]{escape(head.labels[label])}[/bold] "
                            f"{100 * float(probs[row, label]):.1f}%")
            else:
                chosen = [head.labels[i] for i in decided[row].nonzero().flatten().tolist()]
                said.append(f"{head.task}: [bold]{escape(', '.join(chosen) or '(none)')}[/bold]")
        lines.append(f"{'  '.join(said)}\t{escape(one_line(text)[:60])}")
    return lines


