"""Whether a loaded teacher's MC-dropout passes can differ: two passes in training mode on a
probe text. A teacher with no dropout acting (every rate 0 in its config.json: ModernBERT, Qwen
and Llama classifiers as published) gives K equal passes, and kiwb says so where it scores.
"""

from __future__ import annotations

import json

import torch

PROBE = "kiwb checks whether dropout acts in this model, once, before scoring"
PROBE_TOKENS = 12


def dropout_acts(model, tokenizer, device: torch.device) -> bool:
    """Whether two training-mode forwards of a probe text differ. The draws come from a fork
    of torch's generators, so the scores that follow are drawn as without the check."""
    # a few tokens: a model may read fewer positions than a sentence takes (the NER demo's 48)
    encoded = tokenizer([PROBE], truncation=True, max_length=PROBE_TOKENS, return_tensors="pt")
    batch = {name: value.to(device) for name, value in encoded.items()}
    was_training = model.training
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices), torch.no_grad():
        model.train()
        try:
            first, second = (model(**batch)[0] for _ in range(2))
        finally:
            model.train(was_training)
    return not torch.equal(first, second)


def check_teacher_dropout(model, tokenizer, device: torch.device, teacher: str,
                          keys: list[str], store, passes: int | str,
                          dropout: float | str = "model") -> bool:
    """Check a loaded teacher once before it scores: record the answer (and a rate set in its
    dropout) in its score sets' meta and, where no dropout acts, say so in the score log."""
    from kiwb.console import console

    acts = dropout_acts(model, tokenizer, device)
    for key in keys:
        store.add_score_meta(key, {"dropout_acts": acts,
                                   **({"dropout": dropout} if dropout != "model" else {})})
    if dropout != "model":  # MC figures from a rate kiwb set: said wherever it scores
        console.print(f"teacher {teacher!r}: its MC passes draw with dropout {dropout:g} set in "
                      "every dropout rate of its config ([scoring] dropout), not its own",
                      highlight=False, markup=False, soft_wrap=True)
    if not acts:
        console.print(no_dropout_line(teacher, passes), style="yellow", highlight=False,
                      markup=False, soft_wrap=True)
    return acts


def recorded_dropout(store, manifest: dict) -> dict[str, dict]:
    """What the score sets of a run's teachers on its pool recorded of their MC dropout:
    teacher -> {"acts": bool, "rate": a rate [scoring] dropout set}, the newest score set's
    (teachers scored before kiwb checked are left out)."""
    found: dict[str, dict] = {}
    names = [teacher["name"] for teacher in manifest.get("teachers") or ()]
    rows = store.connection.execute(
        "SELECT teacher, meta_json FROM score_sets WHERE dataset = 'unlabeled' "
        "ORDER BY created_at DESC").fetchall()
    for teacher, meta_json in rows:
        meta = json.loads(meta_json)
        if (teacher in names and teacher not in found and "dropout_acts" in meta
                and meta.get("data") == manifest.get("data")):
            found[teacher] = {"acts": meta["dropout_acts"],
                              **({"rate": meta["dropout"]} if "dropout" in meta else {})}
    return found


def dropout_card_lines(recorded: dict[str, dict]) -> list[str]:
    """The model card's lines on teachers whose MC passes were not their own dropout's."""
    lines = []
    for teacher, facts in recorded.items():
        if "rate" in facts:
            lines.append(f"- teacher {teacher}: MC passes drawn with dropout {facts['rate']:g} "
                         "set by kiwb ([scoring] dropout), not its own")
        elif not facts["acts"]:
            lines.append(f"- teacher {teacher}: no dropout acts in it, so its MC figures were "
                         "its plain ones")
    return lines


def no_dropout_line(teacher: str, passes: int | str) -> str:
    """The score log's line for a teacher whose passes cannot differ."""
    return (f"teacher {teacher!r}: no dropout acts in it (its config.json sets every rate to "
            f"0, or names none), so its {passes} MC passes equal its plain one: its MC figures "
            "are its plain ones, and MUKI's uncertainty for it is plain confidence; [scoring] "
            "dropout = RATE sets one")
