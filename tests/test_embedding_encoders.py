"""Reading a sentence encoder's pooling rule: sentence-transformers folders as
sentence-transformers writes them, kiwb.toml's pooling, and the folders kiwb refuses."""

from __future__ import annotations

import json

import pytest

from kiwb.kinds.embedding.encoders import PoolingRule, read_pooling_rule

TRANSFORMER = {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}
POOLING = {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}
NORMALIZE = {"idx": 2, "name": "2", "path": "2_Normalize",
             "type": "sentence_transformers.models.Normalize"}


def sentence_transformers_folder(folder, modules, *, mean=True, cls=False, max_tokens=False,
                                 max_seq_length=256):
    """The files sentence-transformers writes beside an encoder (all-MiniLM-L6-v2's layout)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": 384, "pooling_mode_cls_token": cls,
        "pooling_mode_mean_tokens": mean, "pooling_mode_max_tokens": max_tokens,
        "pooling_mode_mean_sqrt_len_tokens": False}))
    (folder / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": max_seq_length, "do_lower_case": False}))
    return folder


def test_a_sentence_transformers_folder(tmp_path):
    folder = sentence_transformers_folder(tmp_path / "minilm", [TRANSFORMER, POOLING, NORMALIZE])
    rule = read_pooling_rule(folder)
    assert (rule.pooling, rule.max_length, rule.source) == ("mean", 256, "modules.json")
    cls = sentence_transformers_folder(tmp_path / "cls", [TRANSFORMER, POOLING], mean=False, cls=True)
    assert read_pooling_rule(cls).pooling == "cls"


def test_kiwb_toml_pooling_wins_and_needs_no_modules(tmp_path):
    folder = sentence_transformers_folder(tmp_path / "minilm", [TRANSFORMER, POOLING])
    assert read_pooling_rule(folder, "cls").pooling == "cls"
    bare = tmp_path / "bare"
    bare.mkdir()
    assert read_pooling_rule(bare, "mean") == PoolingRule("mean", None, source="kiwb.toml")


@pytest.mark.parametrize("make, message", [
    (lambda folder: folder.mkdir(), "is an encoder without a pooling rule (no modules.json); "
                                    'set pooling = "mean" or "cls" in its [[teachers]] entry'),
    (lambda folder: sentence_transformers_folder(
        folder, [TRANSFORMER, POOLING, {"idx": 2, "path": "2_Dense",
                                        "type": "sentence_transformers.models.Dense"}]),
     "has a Dense module in its modules.json"),
    (lambda folder: sentence_transformers_folder(folder, [TRANSFORMER]),
     "has no Pooling module in its modules.json"),
    (lambda folder: sentence_transformers_folder(folder, [TRANSFORMER, POOLING], mean=False,
                                                 max_tokens=True),
     "pools by max (1_Pooling/config.json); kiwb applies mean or CLS pooling"),
    (lambda folder: (folder.mkdir(), (folder / "modules.json").write_text("[{]")),
     "has a modules.json kiwb cannot read"),
])
def test_what_is_refused_in_one_line(tmp_path, make, message):
    folder = tmp_path / "encoder"
    make(folder)
    with pytest.raises(ValueError) as refused:
        read_pooling_rule(folder)
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_a_pooling_kiwb_does_not_apply(tmp_path):
    with pytest.raises(ValueError, match="has pooling = 'max'; choose one of mean, cls"):
        read_pooling_rule(tmp_path, "max")


def test_a_project_of_tasks_and_encoders_is_refused_in_one_line(tmp_path):
    from kiwb.errors import ConfigError
    from kiwb.project.config import load_config

    (tmp_path / "kiwb.toml").write_text('name = "both"\n[[tasks]]\nname = "topic"\n[embedding]\n')
    with pytest.raises(ConfigError, match=r"declares both \[\[tasks\]\] .* and \[embedding\] "
                                          r".*: remove one"):
        load_config(tmp_path, check_environment=False)
