"""Content fingerprints: caches are keyed by what things contain, never by position alone."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kiwb.project.store import Store

# Files in a checkpoint folder that do not change what the model computes.
_IGNORED_CHECKPOINT_FILES = {"README.md", ".gitattributes", "kiwb-manifest.json"}
_CHUNK = 1 << 20


def sha256_file(path: Path, store: Store | None = None) -> str:
    """sha256 of a file, reusing the store's record while size and mtime are unchanged."""
    stat = path.stat()
    resolved = str(path.resolve())
    if store is not None:
        cached = store.cached_hash(resolved, stat.st_size, stat.st_mtime_ns)
        if cached:
            return cached
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    value = digest.hexdigest()
    if store is not None:
        store.remember_hash(resolved, stat.st_size, stat.st_mtime_ns, value)
    return value


def checkpoint_hash(folder: Path, store: Store | None = None) -> str:
    """Hash of a checkpoint folder's config, weights and tokenizer files (names included)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        relative = path.relative_to(folder).as_posix()
        if path.name in _IGNORED_CHECKPOINT_FILES or relative.startswith("."):
            continue
        digest.update(relative.encode() + b"\0" + sha256_file(path, store).encode() + b"\n")
    return digest.hexdigest()


def texts_fingerprint(texts: Iterable[str]) -> str:
    """Hash of a sequence of texts in order (row order matters: scores are stored by row)."""
    digest = hashlib.sha256()
    for text in texts:
        encoded = text.encode("utf-8")
        digest.update(len(encoded).to_bytes(8, "little"))
        digest.update(encoded)
    return digest.hexdigest()


def settings_key(settings: dict[str, Any], length: int = 20) -> str:
    """A short stable key for a dict of settings (JSON with sorted keys)."""
    blob = json.dumps(settings, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:length]


