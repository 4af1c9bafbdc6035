"""The student of a token project: a tagger over the union's BIO2 tags, taught per word.

A training row is a text; its words are aligned to the student's sub-words like a teacher's
(first sub-word per word), and its targets are its words' rows of the word targets. A text
longer than the student's maximum length trains on its first window only (counted and logged);
evaluation and prediction read every word, window by window.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kiwb.console import console, one_line
from kiwb.core.losses import softmax_distillation_loss
from kiwb.errors import KiwbError
from kiwb.kinds.sequence.student import SequenceStudent
from kiwb.kinds.token.metrics import entity_report
from kiwb.kinds.token.scoring import pad_windows, window_texts
from kiwb.kinds.token.words import align_words, merge_windows
from kiwb.workers.runtime import (
    FittedBatch,
    autocast_context,
    load_classifier,
    to_device,
)
from kiwb.workers.shard_scoring import capped_max_length, length_sorted_batches
from kiwb.workers.student import load_student_base


@dataclass(frozen=True)
class TextRow:
    """One training text: its first window, and the global indices of the words it holds."""

    input_ids: list[int]
    attention_mask: list[int]
    first_pieces: list[int]
    words: range  # global word indices (into the word targets)
    # (position, word within the row) of each word's later sub-words: they learn the word's
    # target as inside tags, so that a pipeline grouping sub-words finds whole words.
    continuations: tuple[tuple[int, int], ...] = ()


def continuation_pieces(first_pieces: list[int], length: int, trailing: int
                        ) -> tuple[tuple[int, int], ...]:
    """The later sub-words of each word: the positions between a word's first piece and the
    next word's, the last word's up to the trailing special tokens."""
    ends = [*first_pieces[1:], length - trailing]
    return tuple((position, word) for word, (first, end) in enumerate(zip(first_pieces, ends,
                                                                          strict=True))
                 for position in range(first + 1, end))


def load_token_student(base: str, union: list[str]):
    """A token classifier from `base` with a new head over the union tags, and its (fast)
    tokenizer."""
    model, tokenizer = load_student_base(base, union, kind="token")
    if not getattr(tokenizer, "is_fast", False):
        raise KiwbError(f"student base {base}: its tokenizer ({type(tokenizer).__name__}) is a "
                        "slow one, and aligning words needs a fast one: give the base a "
                        "tokenizer.json")
    return model, tokenizer


def text_rows(tokenizer, texts_words: list[list[str]], max_length: int) -> list[TextRow]:
    """Each text's first window as a training row; the texts cut short are counted aloud."""
    rows, cut, start = [], 0, 0
    limit = capped_max_length(tokenizer, max_length)
    for words in texts_words:
        windows = align_words(tokenizer, words, limit)
        first = windows[0]
        cut += len(windows) > 1
        trailing = tokenizer.num_special_tokens_to_add(pair=False) - first.first_pieces[0]
        rows.append(TextRow(first.input_ids, first.attention_mask, first.first_pieces,
                            range(start + first.owned.start, start + first.owned.stop),
                            continuation_pieces(first.first_pieces, len(first.input_ids),
                                                max(0, trailing))))
        start += len(words)
    if cut:
        console.print(f"{cut:,} of {len(texts_words):,} training texts are longer than "
                      f"max_length ({limit} tokens): they train on their first window of words",
                      highlight=False, markup=False)
    return rows


def row_logits(model, tokenizer, rows: list[TextRow], device: torch.device,
               continuations: bool = False) -> torch.Tensor:
    """(words of the rows, |Y|) logits at each word's first sub-word, rows in order; with
    `continuations`, then the later sub-words' logits, rows in order."""
    batch = to_device(pad_windows(tokenizer, rows), device)
    logits = model(**batch).logits.float()  # (B, T, |Y|)
    left = getattr(tokenizer, "padding_side", "right") == "left"
    picked, later = [], []
    for slot, row in enumerate(rows):
        shift = logits.shape[1] - len(row.input_ids) if left else 0
        positions = torch.as_tensor(row.first_pieces, device=logits.device) + shift
        picked.append(logits[slot, positions])
        if continuations and row.continuations:
            inside = torch.as_tensor([p for p, _ in row.continuations], device=logits.device)
            later.append(logits[slot, inside + shift])
    return torch.cat(picked + later)


@torch.no_grad()
def predict_word_tags(model, tokenizer, texts_words: list[list[str]], max_length: int,
                      batch: FittedBatch, device: torch.device,
                      autocast_dtype: str = "float32") -> list[list[int]]:
    """The student's tag id for every word of every text (all windows read)."""
    shard = window_texts(tokenizer, texts_words, capped_max_length(tokenizer, max_length))
    was_training = model.training
    model.eval()
    try:
        with autocast_context(device, autocast_dtype):
            per_window = batch.run(lambda size: _window_logits(model, tokenizer, shard, size, device),
                                   device, "evaluating", items=max(1, len(shard.windows)))
    finally:
        model.train(was_training)
    found = []
    for text in range(len(texts_words)):
        mine = [index for index, owner in enumerate(shard.text_of) if owner == text]
        windows = [shard.windows[index] for index in mine]
        merged = merge_windows(windows, [per_window[index] for index in mine]) if mine else None
        found.append(merged.argmax(-1).tolist() if merged is not None else [])
    return found


@torch.no_grad()
def first_window_logits(model, tokenizer, rows: list[TextRow], device: torch.device,
                        autocast_dtype: str = "float32") -> torch.Tensor:
    """The student's (words, |Y|) tag logits for every word of the rows' training windows,
    rows in order."""
    was_training = model.training
    model.eval()
    try:
        with autocast_context(device, autocast_dtype):
            found = [row_logits(model, tokenizer, rows[start:start + 16], device).float().cpu()
                     for start in range(0, len(rows), 16)]
    finally:
        model.train(was_training)
    return torch.cat(found) if found else torch.zeros(0, model.config.num_labels)


def first_window_tags(model, tokenizer, rows: list[TextRow], device: torch.device,
                      autocast_dtype: str = "float32") -> torch.Tensor:
    """The student's tag id for every word of the rows' training windows, rows in order."""
    return first_window_logits(model, tokenizer, rows, device, autocast_dtype).argmax(-1)


def per_teacher_entity_fit(logits: torch.Tensor, targets: torch.Tensor, coverage: torch.Tensor,
                           union: list[str], lengths: list[int], types: list[str]) -> float:
    """A UHC tagger's fit: it is taught each teacher's tag distribution over that teacher's own
    tags (O and its types), so per teacher, the entity F1 (over its types) of the student's top
    tag among that teacher's tags against the teacher's target's top tag, word by word of texts
    of `lengths` words; the mean over teachers. logits (words, |Y|), targets (words, N, |Y|),
    coverage (N, |Y|)."""
    fits = []
    for teacher, own in enumerate(coverage.bool()):
        inside = logits.masked_fill(~own, -torch.inf).argmax(-1).tolist()
        known = [kind for kind in types if own[union.index(f"B-{kind}")]]
        fits.append(entity_fit(as_sentences(targets[:, teacher].argmax(-1).tolist(), lengths, union),
                               as_sentences(inside, lengths, union), known))
    return sum(fits) / len(fits) if fits else 0.0


def as_sentences(tags: list[int], lengths: list[int], union: list[str]) -> list[list[str]]:
    """A flat run of tag ids, cut into texts of `lengths` words, as tag names."""
    found, start = [], 0
    for count in lengths:
        found.append([union[tag] for tag in tags[start:start + count]])
        start += count
    return found


def entity_fit(taught: list[list[str]], predicted: list[list[str]], types: list[str]) -> float:
    """Entity F1 of predicted tags against taught ones; 1 when neither holds an entity."""
    report = entity_report(taught, predicted, types)
    if not report["num_gold_entities"] and not report["num_predicted_entities"]:
        return 1.0
    return report["f1"]


def _window_logits(model, tokenizer, shard, batch_size: int, device) -> list:
    found: list = [None] * len(shard.windows)
    lengths = [len(window.input_ids) for window in shard.windows]
    for batch_rows in length_sorted_batches(lengths, batch_size):
        windows = [shard.windows[row] for row in batch_rows]
        rows = [TextRow(w.input_ids, w.attention_mask, w.first_pieces, w.words) for w in windows]
        logits = row_logits(model, tokenizer, rows, device).cpu()
        start = 0
        for row, window in zip(batch_rows, windows, strict=True):
            found[row] = logits[start:start + len(window.first_pieces)]
            start += len(window.first_pieces)
    return found


def evaluation_figures(gold: list[list[str]], predicted: list[list[str]],
                       types: list[str]) -> dict:
    """A token student's figures in the shape a TrainEval holds: `accuracy` is the headline
    entity F1 (conlleval), `macro_f1` its mean over types, `per_class_accuracy` F1 per type,
    `confusion` each word's type against its predicted type, O last (what kiwb's learning
    check reads); the entity-level figures, the entity confusion and boundary errors under
    `entity`."""
    report = entity_report(gold, predicted, types)
    classes = [*types, "O"]
    index = {name: i for i, name in enumerate(classes)}
    confusion = [[0] * len(classes) for _ in classes]
    for gold_tags, predicted_tags in zip(gold, predicted, strict=True):
        for gold_tag, predicted_tag in zip(gold_tags, predicted_tags, strict=True):
            confusion[index[gold_tag[2:] or "O"]][index[predicted_tag[2:] or "O"]] += 1
    return {
        "accuracy": report["f1"], "macro_f1": report["macro_f1"],
        "per_class_accuracy": {entity_type: figures["f1"]
                               for entity_type, figures in report["per_type"].items()},
        "confusion": confusion, "num_texts": report["num_sentences"],
        "entity": {**{key: report[key] for key in (
            "precision", "recall", "f1", "strict", "word_accuracy", "boundary_errors",
            "confusion", "num_gold_entities", "num_predicted_entities")},
            "per_type_recall": {entity_type: figures["recall"]
                                for entity_type, figures in report["per_type"].items()}},
    }


def inside_tags(targets: torch.Tensor, union: list[str]) -> torch.Tensor:
    """Targets for a word's later sub-words: each B-T's mass moved to I-T."""
    moved = targets.clone()
    for position, tag in enumerate(union):
        if tag.startswith("B-"):
            inside = union.index("I-" + tag[2:])
            moved[..., inside] += moved[..., position]
            moved[..., position] = 0.0
    return moved


class TokenStudent:
    """The student of a token project, as the Trainer reaches it (kiwb.workers.student's
    SequenceStudent is the sequence kind's): rows are texts, targets are per word."""

    kind = "token"
    # Per word, the same losses as a text classifier's (kiwb.kinds.sequence.student.SequenceStudent).
    supervised_loss = staticmethod(torch.nn.functional.cross_entropy)
    distillation_loss = staticmethod(softmax_distillation_loss)

    def __init__(self, types: list[str], pool_words: list[list[str]],
                 eval_words: list[list[str]] | None, eval_tags: list[list[str]] | None,
                 max_length: int):
        self.types, self.pool_words, self.max_length = list(types), pool_words, max_length
        self.eval_words, self.eval_tags = eval_words, eval_tags

    # The learning check reads the tags as a text classifier's classes (kiwb.workers.student).
    eval_check = SequenceStudent.eval_check
    pool_check = SequenceStudent.pool_check
    target_shares = SequenceStudent.target_shares
    min_steps = SequenceStudent.min_steps  # a softmax over tags

    def load_base(self, base: str, labels: list[str]):
        return load_token_student(base, labels)

    def load_checkpoint(self, folder):
        return load_classifier(folder, kind="token")

    def features(self, tokenizer, data, max_length: int) -> list[TextRow]:
        return text_rows(tokenizer, self.pool_words, max_length)

    def eval_features(self, tokenizer, data, max_length: int) -> list[list[str]]:
        return self.eval_words  # read whole, window by window, at each evaluation

    def logits(self, model, tokenizer, features, rows, device) -> torch.Tensor:
        """Logits of the rows' words' first sub-words, then of their later sub-words."""
        return row_logits(model, tokenizer, [features[int(row)] for row in rows], device,
                          continuations=True)

    def _words(self, features, rows) -> tuple[torch.Tensor, torch.Tensor]:
        """Global word indices of the rows' first sub-words, then of their later ones."""
        chosen = [features[int(row)] for row in rows]
        first = torch.cat([torch.arange(row.words.start, row.words.stop) for row in chosen])
        later = [row.words.start + word for row in chosen for _, word in row.continuations]
        return first, torch.tensor(later, dtype=torch.long)

    def loss_units(self, features, rows) -> int:
        """The loss terms of the rows: one per word's first sub-word and per later sub-word,
        so a piece of a batch (a micro-batch, a rank's share) counts by its words."""
        chosen = [features[int(row)] for row in rows]
        return sum(len(row.words) + len(row.continuations) for row in chosen)

    def row_targets(self, data, rows, features=None) -> tuple[torch.Tensor, torch.Tensor]:
        first, later = self._words(features, rows)
        targets = torch.cat([data.targets[first], inside_tags(data.targets[later], data.labels)])
        return targets, data.weights[torch.cat([first, later])]

    def row_gold(self, data, rows, features=None) -> torch.Tensor:
        first, later = self._words(features, rows)
        inside = {i: data.labels.index("I-" + tag[2:]) if tag.startswith("B-") else i
                  for i, tag in enumerate(data.labels)}
        later_gold = torch.tensor([inside[int(i)] for i in data.label_ids[later]],
                                  dtype=torch.long)
        return torch.cat([data.label_ids[first], later_gold])

    def evaluate(self, model, tokenizer, features, data, batch, device, autocast_dtype) -> dict:
        predicted = predict_word_tags(model, tokenizer, features, self.max_length, batch, device,
                                      autocast_dtype)
        names = [[data.labels[i] for i in text] for text in predicted]
        return evaluation_figures(self.eval_tags, names, self.types)

    def check_labels(self, data) -> list[str]:
        return [*self.types, "O"]

    def predicted_counts(self, model, tokenizer, features, batch, device, autocast_dtype,
                         num_labels: int) -> list[int]:
        counts = [0] * num_labels
        names = self._union_names(model)
        for tag in first_window_tags(model, tokenizer, features, device, autocast_dtype).tolist():
            counts[self._class_of(names[tag])] += 1
        return counts

    def fit(self, model, tokenizer, features, data, rows, batch, device, autocast_dtype) -> dict:
        """The entity F1 of the student's tags on the pool rows `rows` (the window it trains
        on) against their target tags' top tag (the gold tags, supervised; UHC: per teacher,
        per_teacher_entity_fit). {"fit": F1}."""
        chosen = [features[int(row)] for row in rows]
        words = torch.cat([torch.arange(row.words.start, row.words.stop) for row in chosen]
                          or [torch.zeros(0, dtype=torch.long)])
        lengths = [len(row.words) for row in chosen]
        if data.label_ids is None and data.targets.dim() == 3:  # UHC: one target per teacher
            logits = first_window_logits(model, tokenizer, chosen, device, autocast_dtype)
            return {"fit": per_teacher_entity_fit(logits, data.targets[words], data.coverage,
                                                  list(data.labels), lengths, self.types)}
        predicted = first_window_tags(model, tokenizer, chosen, device, autocast_dtype).tolist()
        taught = target_tags(data)[words].tolist()
        return {"fit": entity_fit(as_sentences(taught, lengths, data.labels),
                                  as_sentences(predicted, lengths, data.labels), self.types)}

    def _union_names(self, model) -> list[str]:
        return [model.config.id2label[i] for i in range(model.config.num_labels)]

    def _class_of(self, tag: str) -> int:
        return len(self.types) if tag == "O" else self.types.index(tag[2:])

    def target_tops(self, data) -> torch.Tensor:
        """Each taught word's type (O last): its target's top tag, or its gold tag."""
        return torch.tensor([self._class_of(data.labels[i]) for i in target_tags(data).tolist()],
                            dtype=torch.long)


def target_tags(data) -> torch.Tensor:
    """Each taught word's tag id: its target's top tag (UHC's per-teacher targets averaged
    first), or its gold tag (supervised)."""
    if data.label_ids is not None:
        return data.label_ids
    return (data.targets if data.targets.dim() == 2 else data.targets.mean(1)).argmax(-1)


def evaluate_tagger(checkpoint, table, device: torch.device, batch_size: int,
                    max_length: int) -> dict:
    """The token kind's evaluate: entity F1 (the headline, in `accuracy`), F1 per type
    and the rest of a tagger's figures on a table of words and gold tags."""
    if table.tags is None:
        raise KiwbError(f"{table.source}: evaluating a tagger needs each word's gold tag: set "
                        "tags_column (and tokens_column)")
    from transformers import AutoTokenizer

    model = load_classifier(checkpoint, kind="token").to(device)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    tags = [model.config.id2label[i] for i in range(model.config.num_labels)]
    types = list(dict.fromkeys(tag[2:] for tag in tags if tag != "O"))
    unknown = sorted({tag[2:] for row in table.tags for tag in row if tag != "O"} - set(types))
    if unknown:
        raise KiwbError(f"{table.source}: entity types {', '.join(unknown[:5])} are not among "
                        f"the student's ({', '.join(types)})")
    predicted = predict_word_tags(model, tokenizer, table.words, max_length,
                                  FittedBatch(batch_size), device)
    report = evaluation_figures(table.tags, [[tags[i] for i in row] for row in predicted], types)
    return {**report, "kind": "token"}


@torch.no_grad()
def predict_entities(folder, texts: list[str],
                     max_length: int = 512) -> list[list[tuple[str, str]]]:
    """The entities a token student finds in each text: (type, words), in text order; texts
    are split into words by kiwb's pre-tokenizer, as scoring splits them."""
    from transformers import AutoTokenizer

    from kiwb.kinds.token.tags import read_tag_set
    from kiwb.kinds.token.words import split_words

    model = load_classifier(folder, kind="token").eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tag_set = read_tag_set([model.config.id2label[i] for i in range(model.config.num_labels)])
    words = [split_words(text) for text in texts]
    predicted = predict_word_tags(model, tokenizer, words, max_length, FittedBatch(16),
                                  torch.device("cpu"))
    return [[(span.type, " ".join(text_words[span.start:span.end]))
             for span in tag_set.decode(tags)]
            for text_words, tags in zip(words, predicted, strict=True)]


def predicted_entities(folder, texts: list[str], top: int = 3) -> list[str]:
    """The token kind's predict: per text, the entities found and the text's start."""
    from rich.markup import escape

    lines = []
    for text, found in zip(texts, predict_entities(folder, texts), strict=True):
        shown = "  ".join(f"{entity_type}: {words}" for entity_type, words in found)
        lines.append(escape(f"{shown or '(no entity)'}\t{one_line(text)[:60]}"))
    return lines
