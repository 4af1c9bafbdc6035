"""Decoder classifiers (Qwen2) as teachers: a config.json without pad_token_id (common for Qwen
and Llama classifiers) takes the tokenizer's pad token, else its EOS; left and right padding
both give a text's unpadded logits; a tokenizer with neither is refused in one line at
`kiwb init` and by `kiwb score`, before anything is written or any job recorded."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_helpers import run_kiwb, write_project
from test_bad_input import assert_refused
from tiny import TEACHER_B_LABELS, bpe_tokenizer, make_texts

from kiwb.errors import KiwbError
from kiwb.project.paths import ProjectPaths
from kiwb.project.store import Store
from kiwb.workers.runtime import ready_to_pad
from kiwb.workers.shard_scoring import ScoringSettings, score_texts

TEXTS = [row["text"] for row in make_texts(10, seed=3)]


def decoder_teacher(folder: Path, *, pad: bool = True, eos: bool = True) -> Path:
    """A tiny Qwen2 classifier saved as published ones are: no pad_token_id in config.json;
    its byte-level BPE tokenizer with or without a pad and an EOS token."""
    from transformers import Qwen2Config, Qwen2ForSequenceClassification

    tokenizer = bpe_tokenizer(folder)
    if not pad:
        tokenizer.pad_token = None
    if not eos:
        tokenizer.eos_token = None
    torch.manual_seed(0)
    labels = list(TEACHER_B_LABELS)
    model = Qwen2ForSequenceClassification(Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
        id2label=dict(enumerate(labels)), label2id={label: i for i, label in enumerate(labels)},
        pad_token_id=None))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    saved = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    assert saved.get("pad_token_id") is None  # as published: the case this file is about
    return folder


def loaded(folder: Path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    return (AutoModelForSequenceClassification.from_pretrained(folder).eval(),
            AutoTokenizer.from_pretrained(folder))


@pytest.mark.parametrize("side", ["right", "left"])
def test_either_padding_gives_each_texts_unpadded_logits(tmp_path, side):
    model, tokenizer = loaded(decoder_teacher(tmp_path / "qwen"))
    assert model.config.pad_token_id is None
    ready_to_pad(tokenizer, model, "teacher 'qwen'")
    assert model.config.pad_token_id == tokenizer.pad_token_id == tokenizer.convert_tokens_to_ids("<pad>")
    tokenizer.padding_side = side
    settings = ScoringSettings(passes=2, batch_size=5, max_length=32, strategy="loop",
                               dtype="float32", seed=0)
    scored = score_texts(model, tokenizer, TEXTS, settings, torch.device("cpu"), shard_seed=0)
    for row, text in enumerate(TEXTS):
        with torch.no_grad():
            alone = model(**tokenizer([text], truncation=True, max_length=32,
                                      return_tensors="pt")).logits[0]
        assert np.allclose(scored["det_logits"][row], alone.numpy(), atol=1e-5)


def test_the_model_pads_as_its_tokenizer_does(tmp_path):
    """A config naming a pad id the tokenizer does not pad with (some Llama conversions: -1)
    takes the tokenizer's; a tokenizer with neither pad nor EOS pads with the config's id."""
    model, tokenizer = loaded(decoder_teacher(tmp_path / "qwen"))
    model.config.pad_token_id = -1
    ready_to_pad(tokenizer, model, "teacher 'qwen'")
    assert model.config.pad_token_id == tokenizer.convert_tokens_to_ids("<pad>")
    model, tokenizer = loaded(decoder_teacher(tmp_path / "bare", pad=False, eos=False))
    model.config.pad_token_id = tokenizer.convert_tokens_to_ids("<unk>")
    ready_to_pad(tokenizer, model, "teacher 'bare'")
    assert tokenizer.pad_token == "<unk>"
    model.config.pad_token_id = None
    tokenizer.pad_token = None
    with pytest.raises(KiwbError, match="teacher 'bare': its tokenizer has neither a pad token"):
        ready_to_pad(tokenizer, model, "teacher 'bare'")


def test_tokenizer_files_that_name_no_special_token_leave_it_to_loading(tmp_path):
    """GPT-2's folder names none: its class's default EOS pads, which only loading tells."""
    from kiwb.project.padding import unpaddable_problem

    folder = tmp_path / "gpt2"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (folder / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 1024}))
    assert unpaddable_problem("gpt2", folder) is None
    (folder / "tokenizer_config.json").write_text(json.dumps({"unk_token": "<unk>"}))
    assert "neither a pad token nor an end-of-sequence token" in unpaddable_problem("gpt2", folder)


def test_a_tokenizer_without_a_pad_token_pads_with_its_eos(tmp_path):
    model, tokenizer = loaded(decoder_teacher(tmp_path / "qwen", pad=False))
    assert tokenizer.pad_token is None
    ready_to_pad(tokenizer, model, "teacher 'qwen'")
    assert tokenizer.pad_token == tokenizer.eos_token == "</s>"
    assert model.config.pad_token_id == tokenizer.convert_tokens_to_ids("</s>")


@pytest.mark.slow
def test_a_decoder_teacher_without_pad_token_id_scores_and_integrates(tmp_path, teachers_dir):
    qwen = decoder_teacher(tmp_path / "qwen")
    unlabeled = tmp_path / "unlabeled.jsonl"
    unlabeled.write_text("".join(json.dumps({"text": text}) + "\n" for text in TEXTS * 2))
    project = write_project(tmp_path / "proj", {"a": teachers_dir / "teacher_a", "qwen": qwen},
                            unlabeled)
    scored = run_kiwb("score", project, cwd=tmp_path, check=False)
    assert scored.returncode == 0 and "Traceback" not in scored.stderr, scored.stderr
    integrated = run_kiwb("integrate", project, "--json", cwd=tmp_path)
    assert json.loads(integrated.stdout)["teachers"] == ["a", "qwen"]
    # Qwen2's config sets attention_dropout 0 and its head has none: `auto` sets kiwb's rate
    # in it (tests/test_dropout_free_teachers.py), and says so where it scores
    said = " ".join((scored.stdout + scored.stderr).split())
    assert "teacher 'qwen': its MC passes draw with dropout 0.1 that kiwb set" in said
    assert "teacher 'a': its MC passes" not in said and "no dropout acts" not in said
    with Store(ProjectPaths(project).store) as store:
        acts = {row["teacher"]: json.loads(row["meta_json"])["dropout_acts"]
                for row in store.connection.execute(  # not the representation sets
                    "SELECT teacher, meta_json FROM score_sets WHERE dataset = 'unlabeled'")}
    assert acts == {"a": True, "qwen": True}


def test_init_refuses_a_teacher_whose_tokenizer_has_neither_pad_nor_eos(tmp_path, teachers_dir,
                                                                         data_dir):
    bare = decoder_teacher(tmp_path / "bare", pad=False, eos=False)
    result = run_kiwb("init", "proj", "--teacher", f"a={teachers_dir / 'teacher_a'}",
                      "--teacher", f"bare={bare}", "--unlabeled", data_dir / "unlabeled.jsonl",
                      cwd=tmp_path, check=False)
    assert_refused(result, "teacher 'bare'", "neither a pad token nor an end-of-sequence token",
                   "tokenizer.pad_token")
    assert not (tmp_path / "proj" / "kiwb.toml").exists()


def test_score_refuses_it_before_any_job_is_recorded(tmp_path, teachers_dir, data_dir):
    """Not a failed job whose resume hint fails the same way: kiwb.toml's check refuses it."""
    bare = decoder_teacher(tmp_path / "bare", pad=False, eos=False)
    project = write_project(tmp_path / "proj", {"a": teachers_dir / "teacher_a", "bare": bare},
                            data_dir / "unlabeled.jsonl")
    refused = run_kiwb("score", project, cwd=tmp_path, check=False)
    assert_refused(refused, "kiwb.toml", "teacher 'bare'", "neither a pad token")
    assert "resume" not in refused.stderr
    store = ProjectPaths(project).store
    if store.exists():  # no job recorded: nothing to resume, no failure to list
        with Store(store) as opened:
            assert opened.jobs.all() == []


def test_dropout_is_read_from_the_config_and_checked_on_the_model(tmp_path, teachers_dir):
    """Qwen2 (attention_dropout 0, no dropout in its head) against a BERT teacher (0.2)."""
    from kiwb.project.dropout_rates import dropout_line, dropout_rates, no_dropout
    from kiwb.workers.dropout_check import dropout_acts

    qwen_config = json.loads((decoder_teacher(tmp_path / "qwen") / "config.json").read_text())
    bert_config = json.loads((teachers_dir / "teacher_a" / "config.json").read_text())
    assert dropout_rates(qwen_config) == {"attention_dropout": 0.0} and no_dropout(qwen_config)
    assert dropout_line(qwen_config, "model").startswith("no dropout (every rate in its config.json is 0")
    assert dropout_rates(bert_config)["hidden_dropout_prob"] == 0.2 and not no_dropout(bert_config)
    assert "hidden_dropout_prob 0.2" in dropout_line(bert_config)
    assert not no_dropout({"architectures": ["BertForSequenceClassification"]})  # says nothing
    cpu = torch.device("cpu")
    for folder, acts in ((tmp_path / "qwen", False), (teachers_dir / "teacher_a", True)):
        model, tokenizer = loaded(folder)
        state = torch.get_rng_state()
        assert dropout_acts(model, tokenizer, cpu) is acts
        assert not model.training and torch.equal(torch.get_rng_state(), state)  # as it was


def test_init_notes_a_teacher_without_dropout(tmp_path, teachers_dir, data_dir):
    qwen = decoder_teacher(tmp_path / "qwen")
    done = run_kiwb("init", "proj", "--teacher", f"a={teachers_dir / 'teacher_a'}", "--teacher",
                    f"qwen={qwen}", "--unlabeled", data_dir / "unlabeled.jsonl", cwd=tmp_path)
    notes = [line for line in done.stdout.splitlines() if line.startswith("Note: teacher")]
    assert notes == ["Note: teacher qwen has no dropout (every rate in its config.json is 0): "
                     'kiwb sets 0.1 in each for its MC passes ([scoring] dropout = "auto"; '
                     '"model" keeps none)']


# -- [scoring] dropout: a rate set where a teacher has none -------------------------------

def teacher_info(name: str, folder: Path):
    from kiwb.workers.teachers import inspect_teacher

    return inspect_teacher(name, str(folder))


def test_a_rate_set_in_a_dropout_free_teacher_makes_its_passes_differ(tmp_path):
    from kiwb.workers.dropout_check import dropout_acts
    from kiwb.workers.teachers import load_teacher

    info = teacher_info("qwen", decoder_teacher(tmp_path / "qwen"))
    cpu = torch.device("cpu")
    own, tokenizer = load_teacher(info, "cpu")
    set_, _ = load_teacher(info, "cpu", 0.1)
    assert not dropout_acts(own, tokenizer, cpu) and dropout_acts(set_, tokenizer, cpu)
    assert set_.config.attention_dropout == 0.1 and own.config.attention_dropout == 0.0
    settings = ScoringSettings(passes=4, batch_size=5, max_length=32, strategy="loop",
                               dtype="float32", seed=0)
    plain = score_texts(own, tokenizer, TEXTS, settings, cpu, shard_seed=0)
    drawn = score_texts(set_, tokenizer, TEXTS, settings, cpu, shard_seed=0)
    assert np.array_equal(plain["mc_probs"], plain["det_probs"])  # its own: MC is plain
    assert not np.allclose(drawn["mc_probs"], drawn["det_probs"], atol=1e-6)
    assert np.array_equal(drawn["det_logits"], plain["det_logits"])  # eval mode: no dropout


@pytest.mark.slow
def test_scoring_with_a_rate_says_so_and_keys_the_scores_apart(tmp_path, teachers_dir):
    qwen = decoder_teacher(tmp_path / "qwen")
    unlabeled = tmp_path / "unlabeled.jsonl"
    unlabeled.write_text("".join(json.dumps({"text": text}) + "\n" for text in TEXTS))
    project = write_project(tmp_path / "proj", {"a": teachers_dir / "teacher_a", "qwen": qwen},
                            unlabeled, scoring="mc_passes = 4\nshard_size = 16\ndropout = 0.1\n")
    scored = run_kiwb("score", project, cwd=tmp_path)
    said = " ".join((scored.stdout + scored.stderr).split())
    assert "teacher 'qwen': its MC passes draw with dropout 0.1" in said
    assert "no dropout acts" not in said
    with Store(ProjectPaths(project).store) as store:
        metas = [json.loads(row[0]) for row in store.connection.execute(
            "SELECT meta_json FROM score_sets WHERE dataset = 'unlabeled'")]
    assert [(meta["dropout"], meta["dropout_acts"]) for meta in metas] == [(0.1, True)] * 2
    (tmp_path / "proj" / "kiwb.toml").write_text(
        (tmp_path / "proj" / "kiwb.toml").read_text().replace("dropout = 0.1", "dropout = 0.2"))
    again = run_kiwb("score", project, cwd=tmp_path)  # another rate: other score sets
    assert "its MC passes draw with dropout 0.2" in " ".join((again.stdout + again.stderr).split())


@pytest.mark.parametrize(("value", "fragment"), [
    ('"none"', '[scoring] dropout must be a number or "auto" or "model"'), ("1.0", "dropout"), ("-0.1", "dropout")])
def test_a_bad_dropout_setting_is_refused_in_one_line(tmp_path, teachers_dir, data_dir, value,
                                                      fragment):
    project = write_project(tmp_path / "proj", {"a": teachers_dir / "teacher_a"},
                            data_dir / "unlabeled.jsonl", scoring=f"dropout = {value}\n")
    assert_refused(run_kiwb("score", project, cwd=tmp_path, check=False), "kiwb.toml", fragment)


def test_the_model_card_names_teachers_whose_mc_passes_were_not_their_own(tmp_path):
    """The run records what its teachers' pool score sets said (kiwb.workers.dropout_check),
    and the card says it for a teacher without dropout and one given a rate."""
    from kiwb.workers.dropout_check import recorded_dropout
    from kiwb.workers.export import model_card

    with Store(tmp_path / "store.sqlite") as store:
        for key, teacher, data, meta in (
                ("old", "qwen", "pool", {}),  # scored before kiwb checked: left out
                ("q", "qwen", "pool", {"dropout_acts": False}),
                ("m", "modern", "pool", {"dropout_acts": True, "dropout": 0.1}),
                ("a", "a", "pool", {"dropout_acts": True}),
                ("elsewhere", "a", "other texts", {"dropout_acts": False})):
            store.register_score_set(key, teacher=teacher, dataset="unlabeled", num_texts=4,
                                     num_shards=1, meta={"labels": ["x"], "data": data, **meta})
        recorded = recorded_dropout(store, {"data": "pool", "teachers": [
            {"name": "qwen"}, {"name": "modern"}, {"name": "a"}]})
        assert recorded == {"qwen": {"acts": False}, "modern": {"acts": True, "rate": 0.1},
                            "a": {"acts": True}}
        # a run that pins its score sets reads exactly those (this one on other texts), not the
        # newest on its pool
        pinned = recorded_dropout(store, {"data": "pool", "teachers": [{"name": "a"}],
                                          "scores": {"a": "elsewhere"}})
        assert pinned == {"a": {"acts": False}}
    card = model_card({"run": "r", "checkpoint": "step-0000010", "step": 10, "labels": ["x"],
                       "teachers": [], "method": {"method": "muki-hard"}, "teacher_dropout": recorded})
    assert "- teacher qwen: no dropout acts in it, so its MC figures were its plain ones" in card
    assert "- teacher modern: MC passes drawn with dropout 0.1 set by kiwb" in card
    assert "teacher a:" not in card
