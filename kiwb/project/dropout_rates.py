"""What dropout a checkpoint's config.json sets, read without loading it (the workbench and
`kiwb init` read it). MC-dropout scoring draws its K passes with these rates, so a teacher
whose rates are all 0 (ModernBERT, Qwen and Llama classifiers as published) answers the same
K times: its MC figures are its plain ones. Scoring confirms it on the loaded model
(kiwb.workers.dropout_check), since a head may drop by a rate the config does not name.
"""

from __future__ import annotations

from collections.abc import Mapping


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


def dropout_line(model_config: Mapping) -> str | None:
    """What a teacher's dropout means for its MC passes, in one line; None where its config
    names no rate."""
    rates = dropout_rates(model_config)
    if not rates:
        return None
    if not any(rates.values()):
        return (f"no dropout (every rate in its config.json is 0: {', '.join(rates)}): its K MC "
                "passes will equal its plain one, so its MC figures are its plain ones")
    acting = ", ".join(f"{key} {value:g}" for key, value in rates.items() if value)
    return f"MC dropout draws with {acting}"
