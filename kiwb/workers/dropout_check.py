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


def check_teacher_dropout(model, tokenizer, device: torch.device, teacher, keys: list[str],
                          store, passes: int | str, setting: float | str = "auto") -> bool:
    """Check a loaded teacher (`teacher`: its TeacherInfo) once before it scores: record the
    answer (and a rate kiwb set in its dropout) in its score sets' meta and say in the score
    log where its MC passes are not its own dropout's."""
    from kiwb.console import console
    from kiwb.workers.teachers import teacher_dropout

    dropout = teacher_dropout(teacher, setting)
    acts = dropout_acts(model, tokenizer, device)
    for key in keys:
        store.add_score_meta(key, {"dropout_acts": acts,
                                   **({"dropout": dropout} if dropout != "model" else {})})
    if dropout != "model":  # MC figures from a rate kiwb set: said wherever it scores
        why = ('its own rates are all 0: [scoring] dropout = "auto"' if setting == "auto"
               else "[scoring] dropout")
        console.print(f"teacher {teacher.name!r}: its MC passes draw with dropout {dropout:g} "
                      f"that kiwb set in every dropout rate of its config ({why}), not its own",
                      highlight=False, markup=False, soft_wrap=True)
    if not acts:
        console.print(no_dropout_line(teacher.name, passes, dropout), style="yellow",
                      highlight=False, markup=False, soft_wrap=True)
    return acts


def recorded_dropout(store, manifest: dict) -> dict[str, dict]:
    """What the score sets of a run's teachers on its pool recorded of their MC dropout:
    teacher -> kiwb.project.dropout_rates.score_set_dropout's facts (teachers scored before
    kiwb checked are left out). A run that pins its score sets (manifest `scores`) reads those;
    an older one, the newest score set of each teacher on its pool."""
    from kiwb.project.dropout_rates import score_set_dropout

    if manifest.get("scores"):
        return store.score_dropout(manifest["scores"])
    found: dict[str, dict] = {}
    names = [teacher["name"] for teacher in manifest.get("teachers") or ()]
    rows = store.connection.execute(
        "SELECT teacher, meta_json FROM score_sets WHERE dataset = 'unlabeled' "
        "ORDER BY created_at DESC").fetchall()
    for teacher, meta_json in rows:
        meta = json.loads(meta_json)
        facts = score_set_dropout(meta)
        if (teacher in names and teacher not in found and facts is not None
                and meta.get("data") == manifest.get("data")):
            found[teacher] = facts
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


def no_dropout_line(teacher: str, passes: int | str, dropout: float | str = "model") -> str:
    """The score log's line for a teacher whose passes cannot differ."""
    if dropout != "model":  # kiwb set a rate, yet nothing drops: no module reads the keys
        return (f"teacher {teacher!r}: no dropout acts in it even with {dropout:g} set in its "
                f"config's dropout rates (its architecture builds no dropout from them), so its "
                f"{passes} MC passes equal its plain one: its MC figures are its plain ones")
    return (f"teacher {teacher!r}: no dropout acts in it (its config.json sets every rate to "
            f"0, or names none), so its {passes} MC passes equal its plain one: its MC figures "
            "are its plain ones, and MUKI's uncertainty for it is plain confidence; [scoring] "
            "dropout = RATE sets one where its config names a rate")
