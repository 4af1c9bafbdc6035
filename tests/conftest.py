"""Shared fixtures: tiny real teacher checkpoints, built once per test session."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("OMP_NUM_THREADS", "1")  # see cli_helpers.kiwb_env
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tiny import TEACHER_A_LABELS, TEACHER_B_LABELS, build_teacher, make_texts, write_jsonl  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    import torch

    torch.set_num_threads(1)


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


@pytest.fixture(scope="session")
def student_base(tmp_path_factory) -> Path:
    """An untrained tiny BERT classifier folder to start students from."""
    import torch
    from tiny import tiny_bert_config, wordpiece_tokenizer
    from transformers import BertForSequenceClassification

    folder = tmp_path_factory.mktemp("student_base")
    torch.manual_seed(0)  # a fixed initialisation: accuracy thresholds must not ride on luck
    tokenizer = wordpiece_tokenizer(folder)
    BertForSequenceClassification(tiny_bert_config(("x", "y"), len(tokenizer))).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


TRAINING_SETTINGS = """
[training]
epochs = 8.0
min_steps = 0
learning_rate = 0.006
batch_size = 16
eval_every = 20
warmup_ratio = 0.1
"""


@pytest.fixture(scope="session")
def scored_project(tmp_path_factory, teachers_dir, student_base) -> Path:
    """A project whose teachers already scored 160 unlabeled (gold labels kept) and 40 eval texts."""
    from cli_helpers import run_kiwb, write_project

    root = tmp_path_factory.mktemp("scored")
    write_jsonl(root / "pool.jsonl", make_texts(160, seed=21))
    write_jsonl(root / "eval.jsonl", make_texts(40, seed=22))
    project = write_project(
        root / "proj", {"a": teachers_dir / "teacher_a", "b": teachers_dir / "teacher_b"},
        root / "pool.jsonl", root / "eval.jsonl",
        extra=f'{TRAINING_SETTINGS}student = "{student_base}"\n',
    )
    config = project / "kiwb.toml"
    config.write_text(config.read_text().replace(
        f'path = "{root / "pool.jsonl"}"', f'path = "{root / "pool.jsonl"}"\nlabel_column = "label"'))
    run_kiwb("score", project, cwd=root)
    return project
