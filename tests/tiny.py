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
# Six more topics, for projects of three to five teachers (ten labels); texts and tokenizers
# of the four above stay as they were (they are what the other tests' models learned).
MORE_TOPICS = {
    "science": "atom cell physics experiment laboratory theory molecule scientist research data",
    "travel": "flight hotel beach passport island tourist journey luggage airport cruise",
    "weather": "rain storm forecast cloud wind snow thunder sunny humidity temperature",
    "health": "doctor patient hospital vaccine clinic nurse medicine fever therapy diet",
    "film": "movie actor director cinema scene screenplay premiere studio camera sequel",
    "finance": "bank stock market investor loan interest budget profit shares economy",
}
ALL_TOPICS = {**TOPICS, **MORE_TOPICS}
FILLER = "the a of and to in on with for is was today new".split()
TEACHER_A_LABELS = ("sports", "politics")
TEACHER_B_LABELS = ("music", "cooking")


def make_texts(count: int, seed: int, labels=tuple(TOPICS)) -> list[dict]:
    """Short synthetic texts, each mostly words of one topic."""
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        label = labels[i % len(labels)]
        words = rng.choices(ALL_TOPICS[label].split(), k=rng.randint(4, 9))
        words += rng.choices(FILLER, k=rng.randint(2, 6))
        rng.shuffle(words)
        rows.append({"text": " ".join(words), "label": label})
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _corpus(topics: tuple[str, ...] = tuple(TOPICS)) -> list[str]:
    return [row["text"] for row in make_texts(200, seed=99, labels=topics)] + [" ".join(FILLER)]


def wordpiece_vocab(corpus: list[str], *, lowercase: bool, split_every: int = 0) -> dict[str, int]:
    """A WordPiece vocabulary built the same in every process: specials, each character alone
    and as a continuation, then the corpus's words by frequency (ties by spelling).

    tokenizers' WordPieceTrainer draws its ties from Rust's randomly seeded hash maps, so each
    process got another vocabulary and every tiny model another initialisation: a test that
    passed alone failed in a full run. With split_every = n, every n-th word is kept only as
    3-character pieces (\"Wash\", \"##ing\", \"##ton\"), as a real vocabulary splits rare words."""
    from tokenizers import normalizers, pre_tokenizers

    normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    splitter = pre_tokenizers.BertPreTokenizer()
    counts: dict[str, int] = {}
    for text in corpus:
        for word, _ in splitter.pre_tokenize_str(normalizer.normalize_str(text)):
            counts[word] = counts.get(word, 0) + 1
    characters = sorted({character for word in counts for character in word})
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *characters,
              *(f"##{character}" for character in characters)]
    for rank, word in enumerate(sorted(counts, key=lambda word: (-counts[word], word))):
        if split_every and rank % split_every == split_every - 1 and len(word) > 3:
            tokens += [word[:4]] + [f"##{word[i:i + 3]}" for i in range(4, len(word), 3)]
        else:
            tokens.append(word)
    return {token: i for i, token in enumerate(dict.fromkeys(tokens))}


def bert_wordpiece_tokenizer(vocab: dict[str, int], *, lowercase: bool):
    """A BERT-style fast tokenizer ([CLS] ... [SEP], 64 tokens at most) over `vocab`."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, model_max_length=64, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]",
    )


def wordpiece_tokenizer(folder: Path, topics: tuple[str, ...] = tuple(TOPICS)):
    """A BERT-style WordPiece tokenizer over the synthetic corpus's words (of `topics`)."""
    return bert_wordpiece_tokenizer(wordpiece_vocab(_corpus(topics), lowercase=True), lowercase=True)


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

    settings = {"hidden_dropout_prob": 0.2, "attention_probs_dropout_prob": 0.2,
                "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                "intermediate_size": 64, "max_position_embeddings": 64} | extra
    return BertConfig(
        vocab_size=vocab_size, id2label=dict(enumerate(labels)),
        label2id={name: i for i, name in enumerate(labels)}, **settings,
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


def train_classifier(model, tokenizer, rows: list[dict], labels, epochs: int = 6, seed: int = 0,
                     learning_rate: float = 3e-3):
    """A few quick epochs so the tiny teacher knows its labels, and knows what it does not know.

    Texts of other topics are trained towards the uniform distribution (outlier exposure):
    a randomly initialised tiny model has no pre-trained sense of "foreign text", which real
    teachers get from pre-training, so without this its routing would be a coin toss.
    """
    import torch

    torch.manual_seed(seed)
    label_ids = {name: i for i, name in enumerate(labels)}
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
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


def build_teacher(folder: Path, kind: str, labels, *, trained: bool = True, seed: int = 0,
                  topics: tuple[str, ...] = tuple(TOPICS)) -> Path:
    """Save a tiny teacher checkpoint (`bert` with WordPiece or `roberta` with BPE) to `folder`,
    its vocabulary and its foreign texts drawn from `topics` (the four first by default)."""
    import torch
    from transformers import BertForSequenceClassification, RobertaForSequenceClassification

    torch.manual_seed(seed)
    if kind == "bert":
        tokenizer = wordpiece_tokenizer(folder, topics)
        model = BertForSequenceClassification(tiny_bert_config(labels, len(tokenizer)))
    else:
        tokenizer = bpe_tokenizer(folder)
        model = RobertaForSequenceClassification(tiny_roberta_config(labels, tokenizer))
    if trained:
        train_classifier(model, tokenizer, make_texts(240, seed=seed + 1, labels=topics), labels)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
