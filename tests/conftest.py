"""Shared fixtures: tiny real teacher checkpoints, built once per test session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from tiny import TEACHER_A_LABELS, TEACHER_B_LABELS, build_teacher, make_texts, write_jsonl  # noqa: E402


@pytest.fixture(scope="session")
def teachers_dir(tmp_path_factory) -> Path:
    """Two trained tiny teachers with different architectures and tokenizers."""
    root = tmp_path_factory.mktemp("teachers")
    build_teacher(root / "teacher_a", "bert", TEACHER_A_LABELS, seed=1)
    build_teacher(root / "teacher_b", "roberta", TEACHER_B_LABELS, seed=2)
    return root


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("data")
    write_jsonl(root / "unlabeled.jsonl", [{"text": r["text"]} for r in make_texts(48, seed=7)])
    write_jsonl(root / "eval.jsonl", make_texts(32, seed=8))
    return root
