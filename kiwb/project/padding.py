"""Whether a checkpoint can batch texts of different lengths, read from its files without
loading it: config.json's pad_token_id, else its tokenizer's pad or end-of-sequence token.
kiwb.workers.runtime.ready_to_pad pads with them when the model is loaded; a teacher with none
of them is refused before any job, at `kiwb init` and in the Teachers pane."""

from __future__ import annotations

import json
from pathlib import Path

# The tokenizer files that name special tokens (a slow tokenizer's map, every tokenizer's config)
_TOKENIZER_FILES = ("special_tokens_map.json", "tokenizer_config.json")


def unpaddable(what: str) -> str:
    """Why a model whose tokenizer has neither a pad nor an EOS token is refused, and the fix."""
    return (f"{what}: its tokenizer has neither a pad token nor an end-of-sequence token, so "
            "texts of different lengths cannot share a batch; give it one (tokenizer.pad_token "
            "= ..., then save_pretrained into the checkpoint folder)")


def unpaddable_problem(name: str, folder: Path) -> str | None:
    """One line refusing teacher `name` in `folder` if nothing there says how to pad (no
    pad_token_id in config.json, and tokenizer files that name special tokens but neither a
    pad nor an EOS token); else None, also where the files cannot tell (none there, or none
    naming a special token: loading will)."""
    config = _read_json(Path(folder) / "config.json")
    if config is None or config.get("pad_token_id") is not None:
        return None
    files = [found for name_ in _TOKENIZER_FILES
             if (found := _read_json(Path(folder) / name_)) is not None]
    named = [key for data in files for key, value in data.items()
             if key.endswith("_token") and value]
    # no special token named at all: the tokenizer class's own defaults apply (GPT-2's EOS),
    # which only loading it tells
    if not named or any(key in ("pad_token", "eos_token") for key in named):
        return None
    return unpaddable(f"teacher {name!r} ({folder})")


def _read_json(path: Path) -> dict | None:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None
