"""How a sentence encoder turns token states into one embedding, read without torch: from a
sentence-transformers folder (modules.json, its Pooling module's config.json,
sentence_bert_config.json), or from the pooling set in the teacher's [[teachers]] entry.

kiwb applies mean or CLS pooling and an optional Normalize; a folder whose modules do more
(a Dense projection, max or weighted pooling) is refused in one line rather than scored as
another model than its author's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from kiwb.core.choices import POOLINGS

MODULES_FILE = "modules.json"
# [[teachers]] keys that name what a classifier or tagger knows: an encoder has none.
CLASSIFIER_KEYS = ("labels", "types", "tag_scheme", "problem_type", "tasks", "heads")
_TRANSFORMER = "sentence_transformers.models.Transformer"
_POOLING = "sentence_transformers.models.Pooling"
_NORMALIZE = "sentence_transformers.models.Normalize"
# A Pooling config's mode keys, as sentence-transformers names them.
_MODES = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls",
          "pooling_mode_max_tokens": "max", "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len",
          "pooling_mode_weightedmean_tokens": "weightedmean",
          "pooling_mode_lasttoken": "lasttoken"}


@dataclass(frozen=True)
class PoolingRule:
    """How an encoder's token states become its sentence embedding."""

    pooling: str                     # "mean" or "cls"
    max_length: int | None = None    # sentence-transformers' max_seq_length, where given
    source: str = "kiwb.toml"        # where the rule was read: "kiwb.toml" or "modules.json"


def read_pooling_rule(folder: Path, configured: str | None = None) -> PoolingRule:
    """The encoder's pooling rule: kiwb.toml's `pooling` where set, else its modules.json's;
    ValueError with one line (after "<folder> ") when neither gives one kiwb applies."""
    folder = Path(folder)
    if configured is not None:
        if configured not in POOLINGS:
            raise ValueError(f"has pooling = {configured!r}; choose one of {', '.join(POOLINGS)}")
        return PoolingRule(configured, _max_seq_length(folder))
    modules_file = folder / MODULES_FILE
    if not modules_file.exists():
        raise ValueError("is an encoder without a pooling rule (no modules.json); set pooling "
                         '= "mean" or "cls" in its [[teachers]] entry')
    try:
        modules = json.loads(modules_file.read_text(encoding="utf-8"))
        kinds = [str(module["type"]) for module in modules]
    except (OSError, ValueError, TypeError, KeyError) as error:
        raise ValueError(f"has a modules.json kiwb cannot read ({error}); fix it, or remove "
                         'it and set pooling = "mean" or "cls" in its [[teachers]] entry') from None
    extra = [kind for kind in kinds if kind not in (_TRANSFORMER, _POOLING, _NORMALIZE)]
    if extra or _POOLING not in kinds:
        what = (f"a {extra[0].rsplit('.', 1)[-1]} module" if extra else "no Pooling module")
        raise ValueError(f"has {what} in its modules.json; kiwb reads encoders whose embedding is "
                         "mean or CLS pooling (optionally normalised): use such an encoder, or "
                         'its bare transformer with pooling = "mean" or "cls"')
    pooling_path = modules[kinds.index(_POOLING)].get("path") or "1_Pooling"
    return PoolingRule(_pooling_mode(folder / pooling_path / "config.json"),
                       _max_seq_length(folder), source=MODULES_FILE)


def _pooling_mode(config_file: Path) -> str:
    try:
        settings = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"has a Pooling module without a readable {config_file.parent.name}/"
                         f"config.json ({error})") from None
    modes = [name for key, name in _MODES.items() if settings.get(key)]
    if len(modes) != 1 or modes[0] not in POOLINGS:
        raise ValueError(f"pools by {' + '.join(modes) or 'nothing'} ({config_file.parent.name}/"
                         "config.json); kiwb applies mean or CLS pooling: set pooling = "
                         '"mean" or "cls" in its [[teachers]] entry to read it that way')
    return modes[0]


def _max_seq_length(folder: Path) -> int | None:
    """sentence_bert_config.json's max_seq_length: the length the encoder was trained to read."""
    try:
        value = json.loads((folder / "sentence_bert_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    found = value.get("max_seq_length") if isinstance(value, dict) else None
    return found if isinstance(found, int) and found > 0 else None


def classifier_keys(teacher) -> list[str]:
    """The keys of a [[teachers]] entry that only a classifier or tagger takes, where set."""
    return [key for key in CLASSIFIER_KEYS if getattr(teacher, key) is not None]


def encoder_refusal(architectures: list[str], set_keys: list[str], head_kind) -> str | None:
    """Why a checkpoint is no teacher of an embedding project, after "<folder> " (one line with
    the fix), or None: a bare encoder with no classifier's keys in its [[teachers]] entry.
    `set_keys`: the classifier keys (labels, types, ...) its entry sets; `head_kind`: the kind
    its head names (kiwb.kinds.kind_of_checkpoint), or None."""
    if set_keys:
        return (f"has {set_keys[0]} set in its [[teachers]] entry, which names what a classifier "
                "knows and does not apply to a sentence encoder; remove it")
    heads = [name for name in architectures if not name.endswith("Model")]
    if not heads:
        return None
    what = f"a {head_kind.title} model" if head_kind is not None else "a model with a head"
    return (f"is {what} ({heads[0]}); an embedding project ([embedding] in kiwb.toml) merges "
            "sentence encoders: point path at one (a sentence-transformers folder, or a bare "
            "encoder with pooling set), or remove [embedding] to integrate classifiers")


def checkpoint_facts(model_config: dict, folder: Path, teacher,
                     head_kind) -> tuple[tuple[str, ...], str | None]:
    """A sentence encoder's width and pooling, which the Teachers pane shows in place of labels,
    and what stops it (a classifier's head or keys, no pooling rule; None: nothing), as kiwb
    score would say it."""
    problem = encoder_refusal(list(model_config.get("architectures") or []),
                              classifier_keys(teacher), head_kind)
    pooling = None
    if problem is None:
        try:
            pooling = read_pooling_rule(folder, teacher.pooling).pooling
        except ValueError as error:
            problem = str(error)
    width = model_config.get("hidden_size")
    facts = tuple(fact for fact in (f"{width} wide" if width else None,
                                    f"{pooling} pooling" if pooling else None) if fact)
    return facts, problem
