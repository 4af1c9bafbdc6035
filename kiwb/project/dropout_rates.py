"""What dropout a checkpoint's config.json sets, read without loading it (the workbench and
`kiwb init` read it). MC-dropout scoring draws its K passes with these rates, so a teacher
whose rates are all 0 (ModernBERT, Qwen and Llama classifiers as published) answers the same
K times: its MC figures are its plain ones. Scoring confirms it on the loaded model
(kiwb.workers.dropout_check), since a head may drop by a rate the config does not name.
"""

from __future__ import annotations

from collections.abc import Mapping

# The rate `[scoring] dropout = "auto"` sets in a teacher whose config.json sets every rate to
# 0. Chosen on debian-8's dev set with its MiniLM teachers' dropout switched off
# (benchmarks/dropout_injection.py, BENCHMARKS.md "Dropout for teachers without it"): of 0.05,
# 0.1, 0.2 and 0.3, 0.1 routed best under rank (78.3% against 76.7-77.7%, all within one
# standard error), and it is the rate BERT-family encoders are fine-tuned with. Rank routing
# reads each teacher's quantiles, so a teacher given this rate beside one with another native
# rate still gets its share of texts; confidence routing does not (the same file).
AUTO_RATE = 0.1


def _rate_keys(model_config: Mapping) -> dict[str, float | None]:
    """The config.json keys that name a dropout rate ("hidden_dropout_prob",
    "attention_dropout", GPT-2's "attn_pdrop"), with their values: a number, or None for an
    unset classifier rate (the hidden rate applies)."""
    return {key: value for key, value in model_config.items()
            if ("dropout" in key or key.endswith("pdrop")) and not isinstance(value, bool)
            and (value is None or isinstance(value, int | float))}


def dropout_rates(model_config: Mapping) -> dict[str, float]:
    """Every dropout rate a config.json sets, as a number."""
    return {key: float(value) for key, value in _rate_keys(model_config).items()
            if value is not None}


def injected_dropout(model_config: Mapping, rate: float) -> dict[str, float]:
    """The config values that make a teacher drop with `rate` wherever its architecture can:
    every key its config.json has that names a dropout rate, unset ones (None: "use the hidden
    rate") included. Set when the model is built, since some (ModernBERT) build no dropout
    module at all where a rate is 0."""
    return dict.fromkeys(_rate_keys(model_config), float(rate))


def no_dropout(model_config: Mapping) -> bool:
    """Whether the config sets dropout rates and every one is 0 (a config naming none says
    nothing: the model may still drop by its own defaults)."""
    rates = dropout_rates(model_config)
    return bool(rates) and not any(rates.values())


def scoring_dropout(setting: float | str, model_config: Mapping) -> float | str:
    """The dropout a teacher's MC passes draw with under `[scoring] dropout = setting`: "model"
    (its own rates) or a rate kiwb sets in every rate its config names. "auto" keeps a
    teacher's own rates whenever one acts, so a teacher with dropout scores (and is keyed)
    exactly as under "model", its cached scores kept; only a teacher whose rates are all 0 gets
    AUTO_RATE. Per teacher, not per key: a checkpoint that drops somewhere (DeBERTa's
    pooler_dropout 0 beside hidden 0.1, ALBERT's classifier alone) keeps what it was trained
    with."""
    if setting != "auto":
        return setting
    return AUTO_RATE if no_dropout(model_config) else "model"


def dropout_line(model_config: Mapping, setting: float | str = "auto") -> str | None:
    """What a teacher's dropout means for its MC passes under `[scoring] dropout = setting`,
    in one line; None where its config names no rate."""
    rates = dropout_rates(model_config)
    if not rates:
        return None
    used = scoring_dropout(setting, model_config)
    if used != "model":
        why = ("its own rates are all 0; [scoring] dropout = \"auto\"" if setting == "auto"
               else "[scoring] dropout")
        return f"MC dropout draws with {used:g} set by kiwb in {', '.join(rates)} ({why})"
    if not any(rates.values()):
        return (f"no dropout (every rate in its config.json is 0: {', '.join(rates)}): its K MC "
                "passes will equal its plain one, so its MC figures are its plain ones")
    acting = ", ".join(f"{key} {value:g}" for key, value in rates.items() if value)
    return f"MC dropout draws with {acting}"


def score_set_dropout(meta: Mapping) -> dict | None:
    """What a score set's meta recorded of its teacher's MC dropout when it was scored:
    {"acts": whether two passes differed, "rate": a rate kiwb set, where it set one}; None for
    sets scored before kiwb checked."""
    if "dropout_acts" not in meta:
        return None
    return {"acts": bool(meta["dropout_acts"]),
            **({"rate": meta["dropout"]} if "dropout" in meta else {})}


def dropout_note(facts: Mapping | None) -> str | None:
    """A short note on MC figures that are not a teacher's own dropout's (`score_set_dropout`'s
    facts), for plots and tables; None where they are."""
    if not facts:
        return None
    if "rate" in facts:  # set by kiwb, yet an architecture may build no dropout from it
        return (f"dropout {facts['rate']:g} set by kiwb"
                + ("" if facts["acts"] else ", none acts: MC = plain"))
    return None if facts["acts"] else "no dropout acts: MC = plain"


def dropout_rows(teacher_dropout: Mapping | None) -> list[tuple[str, str]]:
    """An integration report's rows for the teachers whose MC passes were not their own
    dropout's: ("teacher X's MC passes", its note)."""
    return [(f"teacher {teacher}'s MC passes", note) for teacher, facts
            in (teacher_dropout or {}).items() if (note := dropout_note(facts))]
