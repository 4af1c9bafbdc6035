"""The multi-task kind's math: VENUS' mean-of-logits consensus and each task's targets worked
out by hand, the student's training outputs (tasks, then one adapter per teacher of any
width), and a training step on a tiny real model that lowers both the task and the feature
losses."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from kiwb.kinds.multitask.consensus import mean_logit_targets
from kiwb.kinds.multitask.data import laid_out_gold
from kiwb.kinds.multitask.heads import heads_of_config, laid_out, output_name
from kiwb.kinds.multitask.losses import feature_loss, task_losses
from kiwb.kinds.multitask.stored_pool import TaskPart, _integrate_labels, _integrate_single
from kiwb.kinds.multitask.student import ADAPTERS, MultiTaskStudent, attach_adapters, task_report
from kiwb.kinds.multitask.training import standardised
from kiwb.project.config_schema import TaskConfig
from kiwb.project.records import IntegrationSettings

HEADS = laid_out([("topic", "single-label", ["a", "b", "c"]),
                  ("tags", "multi-label", ["x", "y"])])


def test_the_consensus_is_the_plain_mean_of_the_logits_of_the_teachers_that_have_a_label():
    # teacher 1 knows a, b: logits 2, 0; teacher 2 knows b, c: logits 1, 1.
    # a: 2 (one teacher); b: (0 + 1) / 2 = 0.5; c: 1 (one teacher)
    targets = mean_logit_targets([torch.tensor([[2.0, 0.0]]), torch.tensor([[1.0, 1.0]])],
                                 [torch.tensor([0, 1]), torch.tensor([1, 2])], 3)
    denominator = math.exp(2) + math.exp(0.5) + math.exp(1)
    assert targets[0].tolist() == pytest.approx(
        [math.exp(2) / denominator, math.exp(0.5) / denominator, math.exp(1) / denominator])


def test_three_teachers_weigh_alike_not_as_venus_running_half_and_half():
    # VENUS' 0.5 * (old + new) would give (0.5 * (0.5 * (3 + 0) + 0)) = 0.75 to the first
    # label; the plain mean gives (3 + 0 + 0) / 3 = 1 (the second label's logits are all 0).
    logits = [torch.tensor([[3.0, 0.0]]), torch.tensor([[0.0, 0.0]]), torch.tensor([[0.0, 0.0]])]
    slots = [torch.tensor([0, 1])] * 3
    targets = mean_logit_targets(logits, slots, 2)
    assert targets[0, 0].item() == pytest.approx(math.exp(1) / (math.exp(1) + 1))


def _single_part(det_probs: list[np.ndarray], labels_per_teacher, task_labels, confidences):
    arrays = []
    for probs, confidence in zip(det_probs, confidences, strict=True):
        probs = np.asarray(probs, dtype=np.float32)
        arrays.append({"det_probs": probs, "det_logits": np.log(probs), "mc_probs": probs,
                       "mc_confidence": np.asarray(confidence, dtype=np.float32),
                       "det_confidence": np.asarray(confidence, dtype=np.float32),
                       "mutual_information": np.zeros(len(probs), dtype=np.float32)})
    heads = [laid_out([("topic", "single-label", labels)])[0] for labels in labels_per_teacher]
    names = [f"t{i}" for i in range(len(arrays))]
    return TaskPart(TaskConfig(name="topic"), list(task_labels), names, heads, arrays,
                    [f"k{i}" for i in range(len(arrays))],
                    [f"[topic] text {i}" for i in range(len(det_probs[0]))], None)


def test_a_task_one_teacher_answers_takes_its_answers_on_the_task_s_labels_at_weight_1():
    part = _single_part([[[0.8, 0.2], [0.3, 0.7]]], [["b", "a"]], ["a", "b", "c"], [[0.9, 0.4]])
    found = _integrate_single(part, IntegrationSettings(), None, None)
    # the teacher's order is (b, a); the task's (a, b, c): c, which it lacks, gets 0
    assert torch.allclose(found.targets, torch.tensor([[0.2, 0.8, 0.0], [0.7, 0.3, 0.0]]))
    assert found.weights.tolist() == [1.0, 1.0] and found.conflicts == []


def test_a_shared_single_label_task_is_routed_by_confidence_and_weighted_by_its_margin(tmp_path):
    from kiwb.project.store import Store

    # two teachers, one label set each; text 0: t0 more confident (0.9 vs 0.2), text 1: t1
    part = _single_part([[[0.9, 0.1], [0.6, 0.4]], [[0.5, 0.5], [0.05, 0.95]]],
                        [["a", "b"], ["c", "d"]], ["a", "b", "c", "d"], [[0.9, 0.3], [0.2, 0.8]])
    with Store(tmp_path / "store.sqlite") as store:
        found = _integrate_single(part, IntegrationSettings(routing="confidence"), store, None)
    assert torch.allclose(found.targets, torch.tensor([[0.9, 0.1, 0, 0], [0, 0, 0.05, 0.95]]))
    assert found.weights.tolist() == pytest.approx([0.7, 0.5])  # 0.9 - 0.2, 0.8 - 0.3
    assert [row[1] for row in found.conflicts] == [0, 1]  # routed: t0, then t1
    assert found.conflicts[1][4]["answers"] == ["a", "d"]


def test_the_mean_consensus_of_a_shared_task_averages_logits_at_weight_1(tmp_path):
    from kiwb.project.store import Store

    part = _single_part([[[0.5, 0.5]], [[0.8, 0.2]]], [["a", "b"], ["a", "b"]], ["a", "b"],
                        [[0.1], [0.6]])
    with Store(tmp_path / "store.sqlite") as store:
        found = _integrate_single(part, IntegrationSettings(method="mean", routing="confidence"),
                                  store, None)
    # mean log-probabilities: a (log .5 + log .8) / 2, b (log .5 + log .2) / 2; softmax
    a, b = math.sqrt(0.5 * 0.8), math.sqrt(0.5 * 0.2)
    assert found.targets[0].tolist() == pytest.approx([a / (a + b), b / (a + b)])
    assert found.weights.tolist() == [1.0]


def test_a_multi_label_task_is_integrated_per_label_by_its_most_confident_owner(tmp_path):
    from kiwb.project.store import Store

    arrays = []
    for probs, confidence in (([[0.9, 0.2]], [[0.8, 0.6]]), ([[0.1]], [[0.3]])):
        probs = np.asarray(probs, dtype=np.float32)
        confidence = np.asarray(confidence, dtype=np.float32)
        arrays.append({"det_probs": probs, "mc_probs": probs, "mc_confidence": confidence,
                       "det_confidence": confidence})
    heads = [laid_out([("tags", "multi-label", ["x", "y"])])[0],
             laid_out([("tags", "multi-label", ["x"])])[0]]
    part = TaskPart(TaskConfig(name="tags", kind="multi-label"), ["y", "x"], ["t0", "t1"], heads,
                    arrays, ["k0", "k1"], ["[tags] text"], None)
    with Store(tmp_path / "store.sqlite") as store:
        found = _integrate_labels(part, IntegrationSettings(routing="confidence"), store, None)
    # x: owners t0 (0.9, confidence 0.8) and t1 (0.1, 0.3): t0's 0.9, margin 0.5; y: t0 alone
    assert torch.allclose(found.targets, torch.tensor([[0.2, 0.9]]))  # the task's order: y, x
    # the raw margins (a multi-task project keeps them): a lone owner's is its confidence
    assert torch.allclose(found.weights, torch.tensor([[0.6, 0.5]]))
    assert len(found.conflicts) == 1 and found.conflicts[0][5] == "[x] [tags] text"


def test_the_layout_of_the_heads_and_its_config_read_back():
    assert [(h.task, h.start, h.stop) for h in HEADS] == [("topic", 0, 3), ("tags", 3, 5)]
    outputs = [output_name(h.task, label) for h in HEADS for label in h.labels]
    assert outputs[3] == "tags/x"
    assert heads_of_config({"task_heads": [h.to_dict() for h in HEADS]}, outputs) == HEADS
    with pytest.raises(ValueError, match="names 5 outputs in its task_heads but has 4"):
        heads_of_config({"task_heads": [h.to_dict() for h in HEADS]}, outputs[:4])


def test_gold_is_laid_out_per_task_with_missing_slices_marked():
    gold = laid_out_gold(HEADS, {"topic": ["c", "a"]}, 2)
    assert gold.tolist() == [[0, 0, 1, -1, -1], [1, 0, 0, -1, -1]]
    report = task_report(HEADS, torch.tensor([[0.0, 0.0, 5.0, 9.0, 9.0], [0.0, 5.0, 0.0, 9.0, 9.0]]),
                         gold)
    assert list(report) == ["topic"] and report["topic"]["headline"] == 0.5


def test_features_are_standardised_per_dimension():
    values = standardised(torch.tensor([[1.0, 5.0], [3.0, 5.0]]))
    assert values.tolist() == [[-1.0, 0.0], [1.0, 0.0]]  # a constant dimension stays at 0


def test_each_task_s_loss_reads_its_own_slice():
    logits = torch.tensor([[2.0, 0.0, 0.0, 0.0, 0.0]])
    targets = torch.tensor([[1.0, 0.0, 0.0, 1.0, 0.0]])
    weights = torch.ones(1, 5)
    found = task_losses(HEADS, logits, targets, weights)
    # topic: KL(one-hot a || softmax(2, 0, 0)) = -log(e^2 / (e^2 + 2)); tags: BCE at logit 0
    assert found["topic"].item() == pytest.approx(-math.log(math.exp(2) / (math.exp(2) + 2)), abs=1e-5)
    assert found["tags"].item() == pytest.approx(math.log(2), abs=1e-5)
    assert feature_loss([torch.ones(1, 2)], [torch.zeros(1, 2)]).item() == 1.0


def _tiny_student_model(hidden: int = 16):
    torch.manual_seed(0)
    labels = [output_name(h.task, label) for h in HEADS for label in h.labels]
    config = BertConfig(vocab_size=40, hidden_size=hidden, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32, num_labels=len(labels),
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return BertForSequenceClassification(config)


def test_the_adapters_map_the_student_s_feature_to_each_teacher_s_width():
    model = _tiny_student_model(hidden=16)
    attach_adapters(model, [32, 48])
    adapters = getattr(model, ADAPTERS)
    assert [(a.in_features, a.out_features) for a in adapters] == [(16, 32), (16, 48)]
    student = MultiTaskStudent(HEADS, (32, 48), feature_weight=0.5)
    features = [{"input_ids": [1, 5, 7, 2], "attention_mask": [1, 1, 1, 1]},
                {"input_ids": [1, 9, 2], "attention_mask": [1, 1, 1]}]

    class Pad:  # what collate asks of a tokenizer
        def pad(self, rows, return_tensors):
            width = max(len(r["input_ids"]) for r in rows)
            return {name: torch.tensor([r[name] + [0] * (width - len(r[name])) for r in rows])
                    for name in ("input_ids", "attention_mask")}

    out = student.logits(model, Pad(), features, [0, 1], torch.device("cpu"))
    assert out.shape == (2, 5 + 32 + 48)


def test_a_training_step_lowers_the_task_and_the_feature_losses_on_a_tiny_real_model():
    model = _tiny_student_model()
    attach_adapters(model, [24, 8])
    student = MultiTaskStudent(HEADS, (24, 8), feature_weight=1.0)
    generator = torch.Generator().manual_seed(1)
    inputs = {"input_ids": torch.randint(3, 40, (8, 6), generator=generator),
              "attention_mask": torch.ones(8, 6, dtype=torch.long)}
    topic = torch.nn.functional.one_hot(torch.arange(8) % 3, 3).float()
    tags = (torch.rand(8, 2, generator=generator) > 0.5).float()
    features = torch.randn(8, 32, generator=generator)
    targets = torch.cat([topic, tags, features], dim=1)
    weights = torch.ones_like(targets)

    def parts():
        found = model(**inputs, output_hidden_states=True)
        pooled = found.hidden_states[-1].mean(1)
        out = torch.cat([found.logits, *(a(pooled) for a in getattr(model, ADAPTERS))], dim=1)
        return student.loss_parts(out, targets, weights)

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    before = {name: value.item() for name, value in parts().items()}
    for _ in range(10):
        optimizer.zero_grad()
        parts()["total"].backward()
        optimizer.step()
    after = {name: value.item() for name, value in parts().items()}
    for name in ("topic", "tags", "features"):
        assert after[name] < before[name], (name, before, after)


def test_a_multi_task_student_takes_min_steps_for_each_task():
    """Its heads learn from the same steps, each from its own slice of the loss: [training]
    min_steps for each task; one task is a plain student's minimum, and 0 still means exactly
    the epochs."""
    from kiwb.kinds.multitask.student import MultiTaskStudent

    two = MultiTaskStudent(laid_out([("topic", "single-label", ["a", "b"]),
                                     ("tags", "multi-label", ["x", "y", "z"])]))
    steps, why = two.min_steps(None, 32, 300)
    assert steps == 600 and why == "2 task heads learn from the same steps: min_steps for each"
    assert two.min_steps(None, 32, 0) == (0, "")
    one = MultiTaskStudent(laid_out([("topic", "single-label", ["a", "b"])]))
    assert one.min_steps(None, 32, 300) == (300, "")
