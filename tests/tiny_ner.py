"""Tiny real NER teachers and data for tests: real tokenizers and token classifiers, built in
seconds."""

from __future__ import annotations

import random
import re
from pathlib import Path

from tiny import (
    bert_wordpiece_tokenizer,
    tiny_bert_config,
    tiny_roberta_config,
    wordpiece_vocab,
    write_jsonl,
)

__all__ = [
    "ALL_TYPES", "BATCH_SIZE", "ENTITY_WORDS", "FILLER", "SCHEMES", "TEACHER_A_TYPES",
    "TEACHER_B_TYPES", "TEMPLATES", "build_ner_teacher", "encode_tags", "entity_spans",
    "first_piece_labels", "make_sentences", "ner_bpe_tokenizer", "ner_wordpiece_tokenizer",
    "own_tags", "predict_tags", "tag_names", "train_tagger", "write_jsonl",
]

ENTITY_WORDS = {
    "PER": ["Alice", "Bob Marley", "Carlos", "Dana Scully", "Erik", "Fatima Ali", "Grace Hopper",
            "Hiro", "Ingrid", "Jamal"],
    "LOC": ["Paris", "New York", "Berlin", "Lagos", "Tokyo", "Cape Town", "Oslo", "Buenos Aires",
            "Lima", "Quebec"],
    "ORG": ["Acme", "United Nations", "Globex", "Red Cross", "Siemens", "World Bank", "Initech",
            "Unicef", "Toyota", "Interpol"],
    # "World Cup" shares a word with "World Bank": only the next word tells the types apart.
    "MISC": ["Olympics", "Euro", "Nobel Prize", "World Cup", "Grammy", "Ramadan", "Bitcoin",
             "Christmas", "English", "Super Bowl"],
}
ALL_TYPES = tuple(sorted(ENTITY_WORDS))
# The sorted types halved, as the benchmark splits them between its two teachers.
TEACHER_A_TYPES = ALL_TYPES[:2]
TEACHER_B_TYPES = ALL_TYPES[2:]
FILLER = ("today", "yesterday", "again", "quietly", "reportedly", "finally", "also", "soon")
SCHEMES = ("bio", "iob1", "bioes")
BATCH_SIZE = 16

# {TYPE} is an entity of that type, {w} a filler word. With at most 2 words per entity and one
# filler, every template gives 5 to 12 words.
TEMPLATES = (
    "Everyone waited for {PER} .", "{PER} {w} said no to the offer .",
    "It rained in {LOC} {w} .", "The road to {LOC} was closed .",
    "Shares of {ORG} fell .", "{ORG} {w} cut its prices .",
    "Fans {w} celebrated the {MISC} .", "The {MISC} starts next week .",
    "{PER} lives near {LOC} .", "{ORG} opened an office in {LOC} .", "{PER} {w} joined {ORG} .",
    "{LOC} hosted the {MISC} {w} .", "{PER} won the {MISC} .", "{ORG} sponsored the {MISC} .",
    "{PER} met {PER} in {LOC} .", "{PER} flew to {LOC} with {ORG} staff .",
    "{PER} joined {ORG} after the {MISC} .", "{ORG} and {ORG} met in {LOC} {w} .",
    "{PER} watched the {MISC} in {LOC} .", "The weather was {w} fine .",
    "Nobody knew what happened next .", "They walked home after the long meeting .",
    "Prices rose {w} this week .",
)
SLOT = re.compile(r"\{(\w+)\}")


def make_sentences(count: int, seed: int, types=ALL_TYPES) -> list[dict]:
    """Sentences of 5-12 words with 0-3 entities of `types`, tagged BIO2; the same per seed."""
    rng = random.Random(seed)
    # Templates that need another type are left out, not refilled: a sentence stays readable.
    usable = [t for t in TEMPLATES if set(SLOT.findall(t)) - {"w"} <= set(types)]
    return [_fill(rng.choice(usable), rng) for _ in range(count)]


def _fill(template: str, rng: random.Random) -> dict:
    tokens: list[str] = []
    spans: list[tuple[int, int, str]] = []
    for part in template.split():
        slot = SLOT.fullmatch(part)
        if slot is None:
            tokens.append(part)
        elif slot[1] == "w":
            tokens.append(rng.choice(FILLER))
        else:
            words = rng.choice(ENTITY_WORDS[slot[1]]).split()
            spans.append((len(tokens), len(tokens) + len(words), slot[1]))
            tokens += words
    return {"tokens": tokens, "tags": encode_tags(len(tokens), spans, "bio"),
            "text": " ".join(tokens)}


def entity_spans(tags: list[str]) -> list[tuple[int, int, str]]:
    """Entities as (start, end exclusive, type) from BIO, IOB1 or BIOES tags."""
    spans: list[list] = []
    closed = True
    for index, tag in enumerate(tags):
        prefix, _, kind = tag.partition("-")
        if prefix == "O":
            closed = True
            continue
        # I-/E- continue an open entity of their type; anything else begins one, so IOB1's
        # leading I- and a broken BIO I- both still decode.
        if closed or prefix in "BS" or spans[-1][2] != kind:
            spans.append([index, index + 1, kind])
        spans[-1][1] = index + 1
        closed = prefix in "ES"
    return [tuple(span) for span in spans]


def encode_tags(length: int, spans, scheme: str) -> list[str]:
    """Word tags in `scheme` (bio, iob1 or bioes) for sorted, non-overlapping spans."""
    tags = ["O"] * length
    previous_end, previous_kind = -1, None
    for start, end, kind in spans:
        tags[start:end] = [f"I-{kind}"] * (end - start)
        if scheme == "bioes":
            tags[start] = f"S-{kind}" if end - start == 1 else f"B-{kind}"
            if end - start > 1:
                tags[end - 1] = f"E-{kind}"
        # IOB1 spends a B- only where it is needed: on an entity that directly follows another
        # of the same type.
        elif scheme == "bio" or (start == previous_end and kind == previous_kind):
            tags[start] = f"B-{kind}"
        previous_end, previous_kind = end, kind
    return tags


def tag_names(types, scheme: str = "bio") -> list[str]:
    """The teacher's label order: O, then each type's prefixed tags."""
    prefixes = ("B", "I", "E", "S") if scheme == "bioes" else ("B", "I")
    return ["O"] + [f"{prefix}-{kind}" for kind in types for prefix in prefixes]


def _corpus() -> list[str]:
    words = [name for names in ENTITY_WORDS.values() for name in names] + list(FILLER)
    return [row["text"] for row in make_sentences(400, seed=99)] + [" ".join(words)]


def ner_wordpiece_tokenizer():
    """A BERT-style WordPiece tokenizer, cased as NER checkpoints usually are."""
    # Every other word is kept only as pieces, so names split in 2-4 pieces as in a real model;
    # shredding every name to characters leaves the tiny model unable to learn them.
    return bert_wordpiece_tokenizer(wordpiece_vocab(_corpus(), lowercase=False, split_every=2),
                                    lowercase=False)


def ner_bpe_tokenizer():
    """A RoBERTa-style byte-level BPE tokenizer that accepts words split in advance."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tokenizer.decoder = decoders.ByteLevel()
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    # 256 bytes plus about 300 merges: words split as with the WordPiece tokenizer above.
    trainer = trainers.BpeTrainer(vocab_size=550, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(_corpus(), trainer)
    tokenizer.post_processor = processors.RobertaProcessing(
        ("</s>", tokenizer.token_to_id("</s>")), ("<s>", tokenizer.token_to_id("<s>"))
    )
    # add_prefix_space: each pre-split word is encoded as after a space, as in running text.
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, model_max_length=64, bos_token="<s>", eos_token="</s>",
        unk_token="<unk>", pad_token="<pad>", mask_token="<mask>", cls_token="<s>",
        sep_token="</s>", add_prefix_space=True,
    )


def first_piece_labels(encoding, tag_rows: list[list[str]], label2id: dict) -> list[list[int]]:
    """Label ids on each word's first sub-word; -100 (ignored) on later pieces and specials."""
    labels = []
    for row, tags in enumerate(tag_rows):
        previous = None
        row_labels = []
        for word in encoding.word_ids(row):
            first = word is not None and word != previous
            row_labels.append(label2id[tags[word]] if first else -100)
            previous = word
        labels.append(row_labels)
    return labels


def train_tagger(model, tokenizer, rows: list[dict], types, *, scheme: str = "bio",
                 epochs: int = 8, seed: int = 0):
    """A few quick epochs on `rows` with only `types` tagged, other entities left as O.

    A released NER model never saw the types it was not trained on, so their words are plain
    O to it; that is what makes teachers of different types disagree the way real ones do.
    """
    import torch

    torch.manual_seed(seed)
    rng = random.Random(seed)
    tag_rows = [own_tags(row, types, scheme) for row in rows]
    order = list(range(len(rows)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(epochs):
        rng.shuffle(order)
        for start in range(0, len(order), BATCH_SIZE):
            chunk = order[start:start + BATCH_SIZE]
            batch = tokenizer([rows[i]["tokens"] for i in chunk], is_split_into_words=True,
                              padding=True, return_tensors="pt")
            labels = first_piece_labels(batch, [tag_rows[i] for i in chunk],
                                        model.config.label2id)
            loss = model(**batch, labels=torch.tensor(labels)).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model.eval()


def own_tags(row: dict, types, scheme: str = "bio") -> list[str]:
    """The row's tags as a teacher of `types` in `scheme` should give them."""
    spans = [span for span in entity_spans(row["tags"]) if span[2] in types]
    return encode_tags(len(row["tokens"]), spans, scheme)


def predict_tags(model, tokenizer, rows: list[dict]) -> list[list[str]]:
    """Each word's tag as the model predicts it on the word's first sub-word."""
    import torch

    batch = tokenizer([row["tokens"] for row in rows], is_split_into_words=True, padding=True,
                      return_tensors="pt")
    with torch.no_grad():
        best = model(**batch).logits.argmax(-1)  # (rows, pieces)
    names = model.config.id2label
    predicted = []
    for row in range(len(rows)):
        first_pieces = {}
        for piece, word in enumerate(batch.word_ids(row)):
            if word is not None:
                first_pieces.setdefault(word, piece)
        predicted.append([names[int(best[row, piece])] for piece in first_pieces.values()])
    return predicted


def build_ner_teacher(folder: Path, arch: str, types, *, scheme: str = "bio", seed: int = 0,
                      trained: bool = True) -> Path:
    """Save a tiny NER teacher (`bert` with WordPiece or `roberta` with byte-level BPE) that
    tags `types` in `scheme` to `folder`."""
    import torch
    from transformers import BertForTokenClassification, RobertaForTokenClassification

    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, not {scheme!r}")
    torch.manual_seed(seed)
    labels = tag_names(types, scheme)
    if arch == "bert":
        tokenizer = ner_wordpiece_tokenizer()
        model = BertForTokenClassification(tiny_bert_config(labels, len(tokenizer)))
    elif arch == "roberta":
        tokenizer = ner_bpe_tokenizer()
        model = RobertaForTokenClassification(tiny_roberta_config(labels, tokenizer))
    else:
        raise ValueError(f"arch must be 'bert' or 'roberta', not {arch!r}")
    if trained:
        rows = make_sentences(300, seed=seed + 1)
        train_tagger(model, tokenizer, rows, types, scheme=scheme, seed=seed)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return Path(folder)
