"""Tiny real teachers and data for tests: real tokenizers and transformers models, built in seconds."""

from __future__ import annotations

import json
import random
from pathlib import Path

TOPICS = {
    "sports": "match goal team player coach league score stadium season referee",
    "politics": "election vote senate minister policy parliament campaign law debate party",
    "music": "guitar album concert song band melody drummer chorus lyrics tour",
    "cooking": "recipe oven flour bake garlic sauce kitchen chef spice dinner",
}
FILLER = "the a of and to in on with for is was today new".split()
TEACHER_A_LABELS = ("sports", "politics")
TEACHER_B_LABELS = ("music", "cooking")


def make_texts(count: int, seed: int, labels=tuple(TOPICS)) -> list[dict]:
    """Short synthetic texts, each mostly words of one topic."""
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        label = labels[i % len(labels)]
        words = rng.choices(TOPICS[label].split(), k=rng.randint(4, 9))
        words += rng.choices(FILLER, k=rng.randint(2, 6))
        rng.shuffle(words)
        rows.append({"text": " ".join(words), "label": label})
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _corpus() -> list[str]:
    return [row["text"] for row in make_texts(200, seed=99)] + [" ".join(FILLER)]


def wordpiece_tokenizer(folder: Path):
    """A BERT-style WordPiece tokenizer trained on the synthetic corpus."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer.train_from_iterator(_corpus(), trainers.WordPieceTrainer(vocab_size=200, special_tokens=specials))
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, model_max_length=64, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]",
    )


def bpe_tokenizer(folder: Path):
    """A RoBERTa-style byte-level BPE tokenizer (a different vocabulary and scheme)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tokenizer.decoder = decoders.ByteLevel()
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tokenizer.train_from_iterator(
        _corpus(), trainers.BpeTrainer(vocab_size=300, special_tokens=specials,
                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer.post_processor = processors.RobertaProcessing(
        ("</s>", tokenizer.token_to_id("</s>")), ("<s>", tokenizer.token_to_id("<s>"))
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, model_max_length=64, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
        pad_token="<pad>", mask_token="<mask>", cls_token="<s>", sep_token="</s>",
    )


def tiny_bert_config(labels, vocab_size: int, **extra):
    from transformers import BertConfig

    extra = {"hidden_dropout_prob": 0.2, "attention_probs_dropout_prob": 0.2} | extra
    return BertConfig(
        vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64,
        id2label=dict(enumerate(labels)), label2id={name: i for i, name in enumerate(labels)},
        **extra,
    )


def tiny_roberta_config(labels, tokenizer):
    from transformers import RobertaConfig

    return RobertaConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=72, hidden_dropout_prob=0.2,
        attention_probs_dropout_prob=0.2, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, type_vocab_size=1,
        id2label=dict(enumerate(labels)), label2id={name: i for i, name in enumerate(labels)},
    )


def train_classifier(model, tokenizer, rows: list[dict], labels, epochs: int = 6, seed: int = 0):
    """A few quick epochs so the tiny teacher knows its labels, and knows what it does not know.

    Texts of other topics are trained towards the uniform distribution (outlier exposure):
    a randomly initialised tiny model has no pre-trained sense of "foreign text", which real
    teachers get from pre-training, so without this its routing would be a coin toss.
    """
    import torch

    torch.manual_seed(seed)
    label_ids = {name: i for i, name in enumerate(labels)}
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(epochs):
        for start in range(0, len(rows), 16):
            chunk = rows[start:start + 16]
            batch = tokenizer([r["text"] for r in chunk], padding=True, return_tensors="pt")
            log_probs = model(**batch).logits.log_softmax(-1)
            known = torch.tensor([r["label"] in label_ids for r in chunk])
            target = torch.full_like(log_probs, 1.0 / len(labels))
            for row, r in enumerate(chunk):
                if r["label"] in label_ids:
                    target[row] = torch.nn.functional.one_hot(torch.tensor(label_ids[r["label"]]), len(labels))
            weight = torch.where(known, 1.0, 0.5)
            loss = (-(target * log_probs).sum(-1) * weight).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model.eval()


def build_teacher(folder: Path, kind: str, labels, *, trained: bool = True, seed: int = 0) -> Path:
    """Save a tiny teacher checkpoint (`bert` with WordPiece or `roberta` with BPE) to `folder`."""
    import torch
    from transformers import BertForSequenceClassification, RobertaForSequenceClassification

    torch.manual_seed(seed)
    if kind == "bert":
        tokenizer = wordpiece_tokenizer(folder)
        model = BertForSequenceClassification(tiny_bert_config(labels, len(tokenizer)))
    else:
        tokenizer = bpe_tokenizer(folder)
        model = RobertaForSequenceClassification(tiny_roberta_config(labels, tokenizer))
    if trained:
        train_classifier(model, tokenizer, make_texts(240, seed=seed + 1), labels)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
