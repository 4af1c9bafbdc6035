"""Teachers without dropout (ModernBERT and Qwen2 classifiers as published: every rate in
config.json is 0). `[scoring] dropout = "auto"`, the default, sets kiwb's rate in them where
they have none, when the model is built, so their K MC passes differ; "model" keeps their own,
whose passes equal the plain one, and the log says so. The integration records, per teacher,
what its score sets said, and `kiwb integrate` shows it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_helpers import run_kiwb, write_project
from test_decoder_teachers import TEXTS, decoder_teacher
from tiny import TEACHER_A_LABELS, make_texts, wordpiece_tokenizer

from kiwb.project.dropout_rates import AUTO_RATE, dropout_line, scoring_dropout
from kiwb.project.paths import ProjectPaths
from kiwb.project.store import Store
from kiwb.workers.dropout_check import dropout_acts
from kiwb.workers.shard_scoring import ScoringSettings, score_texts
from kiwb.workers.teachers import inspect_teacher, load_teacher, teacher_dropout

CPU = torch.device("cpu")
SETTINGS = ScoringSettings(passes=4, batch_size=5, max_length=32, strategy="loop",
                           dtype="float32", seed=0)


def modernbert_teacher(folder: Path) -> Path:
    """A tiny ModernBERT classifier with its architecture's defaults: attention, MLP,
    embedding and classifier dropout all 0, so it builds nn.Identity where they would act."""
    from transformers import ModernBertConfig, ModernBertForSequenceClassification

    tokenizer = wordpiece_tokenizer(folder)
    labels = list(TEACHER_A_LABELS)
    torch.manual_seed(0)
    model = ModernBertForSequenceClassification(ModernBertConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, max_position_embeddings=64, pad_token_id=tokenizer.pad_token_id,
        cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id,
        bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
        id2label=dict(enumerate(labels)), label2id={label: i for i, label in enumerate(labels)}))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def dropout_free(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("dropout-free")
    return {"modern": modernbert_teacher(root / "modern"), "qwen": decoder_teacher(root / "qwen")}


def config_of(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text(encoding="utf-8"))


def test_auto_sets_its_rate_only_in_a_teacher_whose_rates_are_all_0(dropout_free, teachers_dir):
    bert = config_of(teachers_dir / "teacher_a")  # hidden and attention dropout 0.2
    for name, folder in dropout_free.items():
        model_config = config_of(folder)
        assert scoring_dropout("auto", model_config) == AUTO_RATE
        assert scoring_dropout("model", model_config) == "model"
        assert teacher_dropout(inspect_teacher(name, str(folder)), "auto") == AUTO_RATE
        assert dropout_line(model_config).startswith(f"MC dropout draws with {AUTO_RATE:g} set by kiwb")
        assert dropout_line(model_config, "model").startswith("no dropout (every rate")
    assert scoring_dropout("auto", bert) == "model"  # its own act: scored (and keyed) as before
    assert scoring_dropout(0.3, bert) == 0.3
    assert "hidden_dropout_prob 0.2" in dropout_line(bert)


@pytest.mark.parametrize("name", ["modern", "qwen"])
def test_auto_makes_the_passes_of_a_dropout_free_teacher_differ(dropout_free, name):
    info = inspect_teacher(name, str(dropout_free[name]))
    own, tokenizer = load_teacher(info, "cpu", "model")
    auto, _ = load_teacher(info, "cpu", "auto")
    assert not dropout_acts(own, tokenizer, CPU) and dropout_acts(auto, tokenizer, CPU)
    if name == "modern":  # built with Identity where the rate was 0: set at load, it is built
        assert not any(isinstance(m, torch.nn.Dropout) and m.p for m in own.modules())
        assert any(isinstance(m, torch.nn.Dropout) and m.p == AUTO_RATE for m in auto.modules())
    plain = score_texts(own, tokenizer, TEXTS, SETTINGS, CPU, shard_seed=0)
    drawn = score_texts(auto, tokenizer, TEXTS, SETTINGS, CPU, shard_seed=0)
    assert np.array_equal(plain["mc_probs"], plain["det_probs"])  # its own: MC is plain
    assert not np.allclose(drawn["mc_probs"], drawn["det_probs"], atol=1e-6)
    assert np.array_equal(drawn["det_logits"], plain["det_logits"])  # eval mode: no dropout


@pytest.mark.parametrize("name", ["modern", "qwen", "bert"])
def test_a_rate_of_0_gives_the_eval_mode_logits_bitwise(dropout_free, teachers_dir, name):
    folder = dropout_free.get(name, teachers_dir / "teacher_a")
    model, tokenizer = load_teacher(inspect_teacher(name, str(folder)), "cpu", 0.0)
    batch = tokenizer(TEXTS[:4], padding=True, return_tensors="pt")
    with torch.no_grad():
        model.train()
        dropping = model(**batch).logits
        model.eval()
        assert torch.equal(dropping, model(**batch).logits)


@pytest.mark.slow
@pytest.mark.parametrize("setting", ["auto", "model"])
def test_dropout_free_teachers_score_and_integrate(tmp_path, dropout_free, setting):
    unlabeled = tmp_path / "unlabeled.jsonl"
    unlabeled.write_text("".join(json.dumps({"text": row["text"]}) + "\n"
                                 for row in make_texts(24, seed=5)))
    project = write_project(tmp_path / "proj", dropout_free, unlabeled,
                            scoring=f'mc_passes = 4\nshard_size = 16\ndropout = "{setting}"\n')
    scored = run_kiwb("score", project, cwd=tmp_path)
    said = " ".join((scored.stdout + scored.stderr).split())
    integrated = run_kiwb("integrate", project, cwd=tmp_path)
    with Store(ProjectPaths(project).store) as store:
        rows = store.connection.execute(
            "SELECT key, teacher, meta_json FROM score_sets WHERE dataset = 'unlabeled'").fetchall()
        integration = json.loads(store.connection.execute(
            "SELECT summary_json FROM integrations").fetchone()[0])
    paths = ProjectPaths(project)
    for key, teacher, meta_json in rows:
        meta = json.loads(meta_json)
        arrays = [np.load(file) for file in sorted(paths.score_dir(key).glob("*.npz"))]
        mc = np.concatenate([a["mc_confidence"] for a in arrays])
        plain = np.concatenate([a["det_confidence"] for a in arrays])
        if setting == "auto":  # kiwb's rate: K passes that differ, said in the log
            assert meta["dropout"] == AUTO_RATE and meta["dropout_acts"] is True
            assert not np.allclose(mc, plain, atol=1e-6)
            assert (f"teacher {teacher!r}: its MC passes draw with dropout {AUTO_RATE:g} that "
                    "kiwb set in every dropout rate of its config (its own rates are all 0") in said
        else:  # its own: the passes are its plain one, and the log says so
            assert "dropout" not in meta and meta["dropout_acts"] is False
            assert np.array_equal(mc, plain)
            assert f"teacher {teacher!r}: no dropout acts in it" in said
    expected = ({"acts": True, "rate": AUTO_RATE} if setting == "auto" else {"acts": False})
    # each teacher's record keeps what its score set said
    assert {each["name"]: each["dropout"] for each in integration["per_teacher"]} == {
        "modern": expected, "qwen": expected}
    note = f"dropout {AUTO_RATE:g} set by kiwb" if setting == "auto" else "no dropout acts: MC = plain"
    for teacher in ("modern", "qwen"):  # a row of the integration's summary table
        assert any(f"teacher {teacher}'s MC passes" in line and note in line
                   for line in integrated.stdout.splitlines()), integrated.stdout


def test_a_note_says_when_passes_are_plain_even_with_a_rate_set():
    """A rate kiwb set that no module of the architecture reads: the passes are still plain."""
    from kiwb.project.dropout_rates import dropout_note, dropout_rows
    from kiwb.tui.panes.uncertainty import mc_heading

    assert dropout_note({"acts": True}) is None  # its own dropout: nothing to say
    assert dropout_note({"acts": True, "rate": 0.1}) == "dropout 0.1 set by kiwb"
    assert dropout_note({"acts": False, "rate": 0.1}) == ("dropout 0.1 set by kiwb, none acts: "
                                                          "MC = plain")
    assert dropout_note({"acts": False}) == "no dropout acts: MC = plain"
    assert str(mc_heading("MC dropout", {"acts": False, "rate": 0.1})) == "MC dropout none: = plain"
    assert str(mc_heading("MC dropout", {"acts": True, "rate": 0.1})) == "MC dropout 0.1 set by kiwb"
    assert dropout_rows({"a": {"acts": True}, "b": {"acts": False}}) == [
        ("teacher b's MC passes", "no dropout acts: MC = plain")]


def test_auto_keys_a_teacher_with_dropout_as_model_did(tmp_path, teachers_dir, dropout_free,
                                                        data_dir):
    """The new default must not orphan cached scores: a teacher whose own dropout acts gets
    the very score key "model" gave it; one without gets another (kiwb's rate rescores it)."""
    from kiwb.project.config import load_config
    from kiwb.workers.score import plan_scoring

    def keys(setting: str) -> dict[str, str]:
        project = write_project(tmp_path / setting, {"bert": teachers_dir / "teacher_a",
                                                     "qwen": dropout_free["qwen"]},
                                data_dir / "unlabeled.jsonl",
                                scoring=f'mc_passes = 4\nshard_size = 16\ndropout = "{setting}"\n')
        with Store(ProjectPaths(project).store) as store:
            return {task.teacher.name: task.key for task in plan_scoring(load_config(project), store)
                    if task.dataset == "unlabeled"}

    auto, model = keys("auto"), keys("model")
    assert auto["bert"] == model["bert"] and auto["qwen"] != model["qwen"]
