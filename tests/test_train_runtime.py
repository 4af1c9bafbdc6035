"""Device limits on tiny real models: out-of-memory retries and mixed precision.

There is no GPU here, so a model is made to fail the way a full one does: its forward
raises CUDA's own out-of-memory error for batches over a size. Everything else is real.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from tiny import make_texts

from kiwb.project.paths import ProjectPaths
from kiwb.project.store import Store
from kiwb.workers import checkpoints as ckpt

CPU = torch.device("cpu")


def fail_above(model, largest: int, after_calls: int = 0) -> None:
    """Make `model` raise CUDA's out-of-memory error on batches over `largest` texts, from
    its `after_calls`-th forward on (memory can run out part-way, as fragmentation grows)."""
    forward, calls = model.forward, itertools.count()

    def limited(*args, **kwargs):
        if next(calls) >= after_calls and kwargs["input_ids"].shape[0] > largest:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return forward(*args, **kwargs)

    model.forward = limited


def test_scoring_retries_at_half_the_batch_and_counts_each_text_once(teachers_dir, capsys):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from kiwb.workers.shard_scoring import SCORE_FIELDS, ScoringSettings, score_texts

    model = AutoModelForSequenceClassification.from_pretrained(teachers_dir / "teacher_a")
    tokenizer = AutoTokenizer.from_pretrained(teachers_dir / "teacher_a")
    texts = [row["text"] for row in make_texts(40, seed=5)]
    settings = ScoringSettings(passes=4, batch_size=8, max_length=64, strategy="loop",
                               dtype="float32", seed=0)

    def score(batch_size: int, on_batch=None) -> dict[str, np.ndarray]:
        return score_texts(model, tokenizer, texts, dataclasses.replace(settings, batch_size=batch_size),
                           CPU, shard_seed=3, on_batch=on_batch)

    at_8, at_4 = score(8), score(4)
    fail_above(model, 4, after_calls=10)  # two batches of 8 (five forwards each) get through
    reported: list[int] = []
    squeezed = score(8, on_batch=reported.append)

    assert sum(reported) == len(texts) and min(reported) > 0  # 16 were reported before the retry
    assert "scoring 8 texts at a time; going on with 4" in capsys.readouterr().err
    for name in SCORE_FIELDS:  # the retry draws its dropout as a run started at batch 4 would
        np.testing.assert_array_equal(squeezed[name], at_4[name], err_msg=name)
    for name in ("det_logits", "det_probs", "det_confidence"):
        np.testing.assert_allclose(squeezed[name], at_8[name], rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.fixture(scope="module")
def still_student(tmp_path_factory, student_base) -> Path:
    """The tiny student base with dropout off, so runs that batch differently can agree."""
    folder = tmp_path_factory.mktemp("still_student")
    shutil.copytree(student_base, folder, dirs_exist_ok=True)
    config = json.loads((folder / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.fixture(scope="module")
def project(tmp_path_factory, scored_project, still_student) -> Path:
    """A private copy of the scored project where run "plain" trained without any limit."""
    root = tmp_path_factory.mktemp("limits") / "proj"
    shutil.copytree(scored_project, root, ignore=shutil.ignore_patterns("runs", "exports"))
    train(root, "plain", still_student)
    return root


def train(project: Path, run: str, student: Path, fail_over: int | None = None, **overrides):
    """Train `run` in this process for one epoch (10 steps of 16); returns the trainer and
    the progress it reported."""
    from kiwb.project.records import IntegrationSettings
    from kiwb.project.teacher_kinds import load_project
    from kiwb.workers.train import Trainer, prepare, with_training_overrides
    from kiwb.workers.training_data import TrainRequest

    loaded = load_project(project)
    config = with_training_overrides(loaded.config, student=str(student), epochs=1.0,
                                     **overrides)
    request = TrainRequest(run=run, settings=IntegrationSettings.from_project(loaded, method="muki-hard"))
    reported: list[int] = []
    with Store(ProjectPaths(project).store) as store:
        trainer = Trainer(config, store, request, prepare(config, store, request, loaded.kind), CPU)
        trainer.setup()
        if fail_over is not None:
            fail_above(trainer.model, fail_over)
        trainer.run(progress=lambda steps, loss: reported.append(steps))
    return trainer, reported


def _final(project: Path, run: str) -> tuple[dict[str, torch.Tensor], dict]:
    """Weights of a run's last checkpoint and its evaluation event."""
    checkpoint = ckpt.list_checkpoints(ProjectPaths(project).run_dir(run))[-1]
    with Store(ProjectPaths(project).store) as store:
        evaluation = store.events_after(run=run, kind="train.eval")[-1]["data"]
    return load_file(checkpoint / "model.safetensors"), evaluation


def test_training_after_out_of_memory_makes_the_same_updates_in_smaller_pieces(project, still_student, capsys):
    trainer, reported = train(project, "squeezed", still_student, fail_over=4)

    assert trainer.steps.micro_batch == 4 and sum(reported) == trainer.total_steps == 10
    log = capsys.readouterr().err
    assert "training on 16 texts at a time; going on with 8" in log
    assert "training on 8 texts at a time; going on with 4" in log
    assert "evaluating 16 texts at a time; going on with 8" in log
    expected, expected_eval = _final(project, "plain")
    weights, evaluation = _final(project, "squeezed")
    for name, tensor in expected.items():
        torch.testing.assert_close(weights[name], tensor, rtol=1e-4, atol=1e-5, msg=name)
    assert evaluation["step"] == expected_eval["step"] == 10
    assert evaluation["confusion"] == expected_eval["confusion"]


def test_mixed_precision_is_read_and_noted_but_changes_nothing_on_the_cpu(project, still_student, capsys):
    trainer, _ = train(project, "fp16", still_student, mixed_precision="fp16")

    assert "mixed_precision = 'fp16' applies on CUDA only; training in float32 on cpu" in capsys.readouterr().err
    assert trainer.autocast_dtype == "float32" and not trainer.steps.scaler.is_enabled()
    assert ckpt.read_manifest(trainer.run_dir)["training"]["mixed_precision"] == "fp16"
    expected, _ = _final(project, "plain")
    weights, _ = _final(project, "fp16")
    for name, tensor in expected.items():
        torch.testing.assert_close(weights[name], tensor, rtol=0, atol=0, msg=name)


def test_the_fitted_batch_size_is_carried_to_the_next_shard_and_evaluation(teachers_dir, capsys):
    """After an out-of-memory halving, later shards (and evaluations) start at the size that
    fitted; a first try is never larger than the texts there are."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from kiwb.workers.runtime import FittedBatch
    from kiwb.workers.shard_scoring import ScoringSettings, score_texts
    from kiwb.workers.student import predict_ids, tokenize

    model = AutoModelForSequenceClassification.from_pretrained(teachers_dir / "teacher_a")
    tokenizer = AutoTokenizer.from_pretrained(teachers_dir / "teacher_a")
    texts = [row["text"] for row in make_texts(48, seed=5)]
    settings = ScoringSettings(passes=2, batch_size=32, max_length=64, strategy="loop",
                               dtype="float32", seed=0)
    fail_above(model, 4)
    batch = FittedBatch(settings.batch_size)
    for shard in range(3):  # three shards of 16 texts, as a teacher's shards share one batch
        score_texts(model, tokenizer, texts[16 * shard:16 * (shard + 1)], settings, CPU,
                    shard_seed=shard, batch=batch)
    retries = capsys.readouterr().err.count("Out of memory")
    # 16 texts, not 32, are tried first (no useless halving above them); 16 -> 8 -> 4 once.
    assert (retries, batch.halvings, batch.size) == (2, 2, 4)

    evaluation = FittedBatch(32)
    features = tokenize(tokenizer, texts, 64)
    first, second = (predict_ids(model, tokenizer, features, evaluation, CPU) for _ in range(2))
    assert torch.equal(first, second)
    # 32 -> 16 -> 8 -> 4 in the first evaluation; the second starts at 4.
    assert (capsys.readouterr().err.count("Out of memory"), evaluation.size) == (3, 4)


@pytest.mark.parametrize(("message", "memory"), [
    ("CUDA out of memory. Tried to allocate 2.00 GiB", True),
    ("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", True),
    ("cuDNN error: CUDNN_STATUS_ALLOC_FAILED", True),
    # seen on an H200: 1,024 texts x 64 replicated MC passes in one memory-efficient attention
    ("Efficient attention cannot produce valid seed and offset outputs when the batch size "
     "exceeds (65535).", True),
    ("CUDA error: device-side assert triggered", False),
])
def test_out_of_memory_is_recognised_in_each_library_s_words(message, memory):
    from kiwb.workers.runtime import is_out_of_memory

    assert is_out_of_memory(RuntimeError(message)) is memory


def test_the_schedule_does_not_advance_over_a_step_the_scaler_skipped(project, still_student):
    """fp16 loss scaling skips the optimizer step when gradients overflow; the learning-rate
    schedule must skip with it. A CPU GradScaler behaves as CUDA's does."""
    trainer, _ = train(project, "scaled", still_student)
    steps = trainer.steps
    steps.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16, enabled=True)
    for group in steps.optimizer.param_groups:  # the finished run's schedule is at 0
        group["lr"] = 1e-3
    weights = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    taken = steps.scheduler.last_epoch
    steps.accumulate(trainer.batch_rows(0), 16, trainer._loss)
    next(trainer.model.parameters()).grad.view(-1)[0] = float("inf")  # an overflowed gradient
    steps.update()
    assert steps.scheduler.last_epoch == taken and steps.scaler.get_scale() == 2.0**15
    assert all(torch.equal(p, weights[name]) for name, p in trainer.model.named_parameters())
    steps.accumulate(trainer.batch_rows(1), 16, trainer._loss)
    steps.update()
    assert steps.scheduler.last_epoch == taken + 1  # a step taken advances it
    assert not all(torch.equal(p, weights[name]) for name, p in trainer.model.named_parameters())


@pytest.mark.parametrize(("setting", "device", "bf16", "used"), [
    ("auto", "cuda", True, "bf16"),    # the GPU default: no loss scaling needed
    ("auto", "cuda", False, "no"),     # a GPU without bfloat16 trains in float32
    ("fp16", "cuda:1", True, "fp16"),  # what was asked, on CUDA
    ("auto", "cpu", True, "no"),       # autocast applies on CUDA only
    ("bf16", "mps", True, "no"),
])
def test_the_training_precision_follows_the_device(monkeypatch, setting, device, bf16, used):
    from kiwb.workers.runtime import scoring_precision, training_precision

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *args: (8, 0) if bf16 else (7, 5))
    assert training_precision(setting, torch.device(device)) == used
    assert scoring_precision("float16", torch.device(device)) == (
        "float16" if device.startswith("cuda") else "float32")


def test_losses_are_read_back_once_per_log_line_not_once_per_step(project, still_student, monkeypatch):
    from kiwb.workers import train as train_module
    from kiwb.workers.train import LOG_EVERY

    reads: list[int] = []
    original = train_module.read_losses

    def counted(pending, autocast_dtype):
        reads.append(len(pending))
        return original(pending, autocast_dtype)

    monkeypatch.setattr(train_module, "read_losses", counted)
    trainer, reported = train(project, "synced", still_student, eval_every=1000)
    assert trainer.total_steps == 10 == LOG_EVERY
    assert [n for n in reads if n] == [1, 9]  # the first step (for the progress bar), then step 10


def test_micro_batches_weigh_each_piece_by_its_loss_terms():
    """A tagger's loss is a mean over words, and texts hold different numbers of words: the
    pieces of a batch that ran out of memory must count by their words, not their texts, for
    their gradients to add up to the whole batch's (here 1, 3 and 5 terms per row)."""
    from kiwb.workers.training_loop import OptimizerSteps

    torch.manual_seed(0)
    inputs = [torch.randn(count, 4) for count in (1, 3, 5)]
    goals = [torch.randn(count) for count in (1, 3, 5)]

    def gradients(micro_batch: int) -> torch.Tensor:
        torch.manual_seed(1)
        model = torch.nn.Linear(4, 1)
        steps = OptimizerSteps(model, CPU, learning_rate=0.1, weight_decay=0.0, total_steps=1,
                               warmup_ratio=0.0, batch_size=3)

        def loss_of(rows):  # the mean over the rows' terms
            x = torch.cat([inputs[int(row)] for row in rows])
            y = torch.cat([goals[int(row)] for row in rows])
            return ((model(x).squeeze(-1) - y) ** 2).mean()

        steps.accumulate(torch.arange(3), micro_batch, loss_of,
                         units=lambda rows: sum(len(goals[int(row)]) for row in rows))
        return torch.cat([p.grad.flatten() for p in model.parameters()])

    whole, pieces = gradients(3), gradients(1)
    assert torch.allclose(pieces, whole, atol=1e-6)
    assert whole.abs().max() > 0.1  # a real gradient, not two zeros
