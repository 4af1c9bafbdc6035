"""Weight merging (kiwb.core.merging) on tiny state dicts against values worked out by hand,
and the id2label warning (kiwb.project.head_clash)."""

from __future__ import annotations

import math

import pytest
import torch

from kiwb.core import merging
from kiwb.project.head_clash import head_clashes, head_shape

# Two tensors, so that TIES's trimming over the whole task vector differs from trimming each
# tensor alone. The base is ones (w) and zeros (b); the teachers' changes from it, τ_i:
TAU_1 = {"w": [1.0, -2.0, 0.5, 3.0], "b": [0.1, -4.0]}
TAU_2 = {"w": [-1.5, 1.0, 0.2, 2.0], "b": [0.3, 0.05]}
BASE = {"w": torch.ones(4), "b": torch.zeros(2)}
NAMES = ["w", "b"]


def _teacher(tau: dict) -> dict:
    return {name: BASE[name] + torch.tensor(values) for name, values in tau.items()}


def _close(found: dict, expected: dict) -> None:
    for name, values in expected.items():
        torch.testing.assert_close(found[name], torch.tensor(values), atol=1e-6, rtol=0)


def test_average_and_task_arithmetic_by_hand():
    teachers = [_teacher(TAU_1), _teacher(TAU_2)]
    # τ1 + τ2 = w [-0.5, -1, 0.7, 5], b [0.4, -3.95]
    _close(merging.task_arithmetic(BASE, teachers, NAMES, 0.5),
           {"w": [0.75, 0.5, 1.35, 3.5], "b": [0.2, -1.975]})
    _close(merging.task_arithmetic(BASE, teachers, NAMES, 1.0),
           {"w": [0.5, 0.0, 1.7, 6.0], "b": [0.4, -3.95]})
    # the mean of two teachers is task arithmetic at lambda 1/2, whatever the base
    _close(merging.average(teachers, NAMES), {"w": [0.75, 0.5, 1.35, 3.5], "b": [0.2, -1.975]})


def test_trim_keeps_the_top_k_percent_over_the_whole_task_vector():
    # six entries, k = 50%: three kept per teacher, across both tensors together
    # |τ1| = 1, 2, 0.5, 3 | 0.1, 4  -> keeps 4, 3, 2
    _close(merging.trim({k: torch.tensor(v) for k, v in TAU_1.items()}, 50),
           {"w": [0.0, -2.0, 0.0, 3.0], "b": [0.0, -4.0]})
    # |τ2| = 1.5, 1, 0.2, 2 | 0.3, 0.05 -> keeps 2, 1.5, 1 (trimming b alone would keep 0.3)
    _close(merging.trim({k: torch.tensor(v) for k, v in TAU_2.items()}, 50),
           {"w": [-1.5, 1.0, 0.0, 2.0], "b": [0.0, 0.0]})
    whole = {k: torch.tensor(v) for k, v in TAU_2.items()}
    _close(merging.trim(whole, 100), TAU_2)


def test_elect_and_disjoint_mean_by_hand():
    trimmed = [{"w": torch.tensor([0.0, -2.0, 0.0, 3.0]), "b": torch.tensor([0.0, -4.0])},
               {"w": torch.tensor([-1.5, 1.0, 0.0, 2.0]), "b": torch.tensor([0.0, 0.0])}]
    signs = merging.elect_signs(trimmed)
    # summed: w [-1.5, -1, 0, 5], b [0, -4]
    _close(signs, {"w": [-1.0, -1.0, 0.0, 1.0], "b": [0.0, -1.0]})
    # w0: only -1.5 (the other is trimmed away); w1: -2 agrees, +1 does not; w2: none;
    # w3: (3 + 2) / 2; b0: no sign; b1: -4 (the zero does not count)
    _close(merging.disjoint_mean(trimmed, signs),
           {"w": [-1.5, -2.0, 0.0, 2.5], "b": [0.0, -4.0]})


def test_ties_by_hand():
    teachers = [_teacher(TAU_1), _teacher(TAU_2)]
    _close(merging.ties(BASE, teachers, NAMES, 1.0, 50),
           {"w": [-0.5, -1.0, 1.0, 3.5], "b": [0.0, -4.0]})
    _close(merging.ties(BASE, teachers, NAMES, 0.5, 50),
           {"w": [0.25, 0.0, 1.0, 2.25], "b": [0.0, -2.0]})


def test_head_rows_go_to_their_union_slots_and_a_shared_label_is_averaged():
    weight_a, bias_a = torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([0.1, 0.2])
    weight_b, bias_b = torch.tensor([[5.0, 6.0], [7.0, 8.0]]), torch.tensor([0.3, 0.4])
    outputs = [("sports", "politics"), ("politics", "music")]
    union = ["sports", "politics", "music"]
    _close({"w": merging.place_rows([weight_a, weight_b], outputs, union)},
           {"w": [[1.0, 2.0], [4.0, 5.0], [7.0, 8.0]]})
    _close({"b": merging.place_rows([bias_a, bias_b], outputs, union)},
           {"b": [0.1, 0.25, 0.4]})
    with pytest.raises(ValueError, match="cooking"):  # a slot no teacher fills
        merging.place_rows([bias_a], [("sports", "politics")], ["sports", "politics", "cooking"])
    with pytest.raises(ValueError, match="politics"):  # an output with no slot
        merging.place_rows([bias_a], [("sports", "politics")], ["sports"])


def test_cosine_similarity_by_hand():
    # one vector over both tensors: (3, 4 | 1) against (3, 0 | 2): 11 / (sqrt 26 x sqrt 13)
    first = {"x": torch.tensor([3.0, 4.0]), "y": torch.tensor([1.0])}
    second = {"x": torch.tensor([3.0, 0.0]), "y": torch.tensor([2.0])}
    assert merging.cosine_similarity(first, second, ["x", "y"]) == pytest.approx(
        11 / math.sqrt(26 * 13))
    assert merging.cosine_similarity(first, second, ["x"]) == pytest.approx(9 / 15)
    assert merging.cosine_similarity({"x": torch.ones(2)}, {"x": torch.zeros(2)}, ["x"]) == 0.0


def test_heads_of_one_shape_with_other_labels_are_named():
    config = {"architectures": ["BertForSequenceClassification"], "hidden_size": 384}
    first = head_shape("A", {**config, "id2label": {"0": "admin", "1": "games"}})
    second = head_shape("B", {**config, "id2label": {"0": "math", "1": "net"}})
    same = head_shape("C", {**config, "id2label": {"0": "admin", "1": "games"}})
    wider = head_shape("D", {**config, "id2label": {"0": "x", "1": "y", "2": "z"}})
    lines = head_clashes([first, second, same, wider])
    assert len(lines) == 2  # A-B and B-C; C has A's labels, D has three
    assert lines[0].startswith("teachers A and B have classifier heads of the same shape (2 "
                               "labels x 384) but different labels (admin, games / math, net)")
    assert "mix unrelated labels" in lines[0]
    # kiwb.toml's names for the outputs are what the rows mean
    renamed = head_shape("B", {**config, "id2label": {"0": "LABEL_0", "1": "LABEL_1"}},
                         ["admin", "games"])
    assert head_clashes([first, renamed]) == []
