"""Words for token-level (NER) teachers: the one recorded pre-tokenizer, and where each word
starts under any fast tokenizer, in windows that fit the model.

Integration happens per word, so that teachers with different tokenizers agree on positions:
every teacher is read at the first sub-word of each word (the usual convention of NER
fine-tuning), which gives one row of logits per word whatever the tokenizer.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor
    from transformers import BatchEncoding

PRETOKENIZER = "whitespace-punct-v1"

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
# Between two word runs these keep one word: apostrophes, hyphens, and the invisible soft
# hyphen, zero-width non-joiner and joiner that Persian and Indic words carry inside them.
_JOINERS = "'\u2019\\-\u2010\u2011\u00ad\u200c\u200d"
_URL_TRAILING = ".,;:!?'\"\\]}>"
_EMOJI_MODIFIERS = "\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f"  # skin tones, flag tags


def split_words(text: str) -> list[str]:
    """The words of `text` under PRETOKENIZER "whitespace-punct-v1", in order.

    At each position the first rule that matches wins:
    1. a URL (`scheme://...` or `www....`) up to the next space, less trailing `.,;:!?'"]}>`
       and less a `(` or `)` it does not pair (`(see http://x.org/a_(b))` keeps `a_(b)`);
    2. an e-mail address (`name@host.tld`);
    3. an @handle or #hashtag (`@user_1`, `#NLP`, `#東京`), one word as tweet NER data has them;
    4. an abbreviation of dotted single letters (`U.S.`, `e.g.`);
    5. one CJK ideograph: each is a word, as BERT's basic tokenizer and character-level
       Chinese NER data have them (kana and hangul runs are ordinary words);
    6. a run of letters, digits, combining marks and `_`, kept whole across an apostrophe or
       hyphen between two runs (`don't`, `e-mail`, `COVID-19`) and across `.,:/` between two
       digits (`1,000.50`, `12:30`, `24/7`);
    7. any other visible character, with the emoji modifiers, variation selectors and
       zero-width joins that follow it (`👍🏽`, `👨‍👩‍👧`), or a flag (two regional indicators).
    Whitespace and invisible control or format characters outside those cases (zero-width
    space, byte-order mark, bidi marks) separate words and belong to none, so whitespace-only
    text has no words. Categories come from this Python's `unicodedata`.
    """
    return _word_pattern().findall(text)


@functools.cache
def _word_pattern() -> re.Pattern[str]:
    marks, hidden = _category_class("M"), _category_class("Cc", "Cf")
    visible = f"[^\\s{hidden}]"
    word_char = f"(?:[^\\W{_CJK}]|[{marks}])"
    url_char = f"[^\\s{hidden}()]"
    rules = [
        f"(?:[A-Za-z][A-Za-z0-9+.-]*://|[Ww]{{3}}\\.)(?:{url_char}|\\({url_char}*\\))+"
        f"(?<![{_URL_TRAILING}])",
        r"\w[\w.+-]*@\w[\w-]*(?:\.\w[\w-]*)+",
        f"[@#][\\w{marks}]+",
        f"(?:[^\\W\\d_{_CJK}]\\.){{2,}}",
        f"[{_CJK}][{marks}]*",
        f"{word_char}+(?:(?:[{_JOINERS}]|(?<=\\d)[.,:/](?=\\d)){word_char}+)*",
        "[\U0001f1e6-\U0001f1ff]{2}",
        f"{visible}(?:[{marks}{_EMOJI_MODIFIERS}]|\u200d{visible})*",
    ]
    return re.compile("|".join(rules))


def _category_class(*prefixes: str) -> str:
    """The body of a regex character class holding every code point of these categories."""
    ranges: list[list[int]] = []
    # Planes 2-13 and 15-16 hold only ideographs, private use or nothing yet: no marks nor
    # format characters, and skipping them makes this a sixth of a second faster.
    for code in itertools.chain(range(0x20000), range(0xE0000, 0xF0000)):
        if unicodedata.category(chr(code)).startswith(prefixes):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])
    return "".join(f"\\U{low:08x}-\\U{high:08x}" for low, high in ranges)


@dataclass(frozen=True)
class WordPieces:
    """One window of one text, ready for the model (unpadded: the caller pads a batch).

    `first_pieces[i]` is the token position of the first sub-word of word `words[i]`;
    `owned` is the part of `words` this window answers for (all of it without a stride).
    """

    input_ids: list[int]
    attention_mask: list[int]
    first_pieces: list[int]
    words: range
    owned: range
    stand_ins: int = 0  # words that yielded no sub-word of their own (see align_words)
    truncated_words: int = 0  # 1 when the window's only word was longer than a window: cut


@dataclass(frozen=True)
class Windowing:
    """Counts over many texts' windows, for a log line such as "3 texts were windowed"."""

    texts: int = 0
    windowed_texts: int = 0
    windows: int = 0
    stand_ins: int = 0
    truncated_words: int = 0

    def add(self, windows: Sequence[WordPieces]) -> Windowing:
        """These counts with one more text, given its windows."""
        return Windowing(
            texts=self.texts + 1,
            windowed_texts=self.windowed_texts + (len(windows) > 1),
            windows=self.windows + len(windows),
            stand_ins=self.stand_ins + sum(window.stand_ins for window in windows),
            truncated_words=self.truncated_words + sum(w.truncated_words for w in windows),
        )


def align_words(
    tokenizer, words: list[str], max_length: int, *, stride_words: int | None = None
) -> list[WordPieces]:
    """The windows of one text's `words`, each at most `max_length` tokens with specials.

    Windows hold whole words, greedily, in order; with `stride_words`, each window after the
    first repeats up to that many preceding words as left context (as many as leave room for
    a new word), which the previous window owns (a word is owned by the first window that
    covers it). A word longer than a whole window gets a window of its own with its pieces
    cut to fit. A word that yields no sub-word (an empty string, a character the tokenizer
    drops) is fed as the tokenizer's unk token; without one it borrows the nearest preceding
    word's position in its window (else the following one's, else position 0); either way it
    counts as a stand-in. No words give no windows.
    """
    _require_fast(tokenizer)
    if stride_words is not None and stride_words < 0:
        raise ValueError(f"stride_words must be 0 or more, not {stride_words}")
    budget = max_length - tokenizer.num_special_tokens_to_add(pair=False)
    if budget < 1:
        raise ValueError(f"max_length {max_length} leaves no room for words besides specials")
    if not words:
        return []
    fed, counts, pieceless = _stand_in_words(tokenizer, list(words))
    windows = []
    for start, end, owned_start in _window_spans(counts, budget, stride_words or 0):
        encoding, first_pieces = _encode_window(tokenizer, fed[start:end], max_length)
        windows.append(WordPieces(
            input_ids=list(encoding["input_ids"]),
            attention_mask=list(encoding["attention_mask"]),
            first_pieces=first_pieces,
            words=range(start, end),
            owned=range(owned_start, end),
            stand_ins=sum(owned_start <= index < end for index in pieceless),
            truncated_words=int(end - start == 1 and counts[start] > budget),
        ))
    return windows


def _require_fast(tokenizer) -> None:
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(
            f"{type(tokenizer).__name__} is a slow (Python) tokenizer, and aligning words needs "
            "a fast one's word_ids(): load it with use_fast=True or give the model a "
            "tokenizer.json"
        )


def _piece_counts(tokenizer, words: list[str]) -> list[int]:
    encoding = tokenizer(words, is_split_into_words=True, add_special_tokens=False)
    counts = [0] * len(words)
    for word in encoding.word_ids():
        if word is not None:
            counts[word] += 1
    return counts


def _stand_in_words(tokenizer, words: list[str]) -> tuple[list[str], list[int], set[int]]:
    """The words to feed, their piece counts, and which words yielded no piece of their own."""
    counts = _piece_counts(tokenizer, words)
    pieceless = {index for index, count in enumerate(counts) if count == 0}
    if pieceless and tokenizer.unk_token is not None:
        words = [tokenizer.unk_token if i in pieceless else word for i, word in enumerate(words)]
        counts = _piece_counts(tokenizer, words)
    return words, counts, pieceless


def _window_spans(counts: list[int], budget: int, stride: int) -> list[tuple[int, int, int]]:
    """(start, end, owned start) of each window: whole words within `budget` pieces, with
    the most context (up to `stride` words) that leaves room for at least one new word."""
    spans = []
    owned_start = 0
    while owned_start < len(counts):
        for context in range(min(stride, owned_start), -1, -1):
            start = owned_start - context
            end = _fill(counts, start, budget)
            if end > owned_start:
                break
        spans.append((start, end, owned_start))
        owned_start = end
    return spans


def _fill(counts: list[int], start: int, budget: int) -> int:
    """The end of the longest run of words from `start` within `budget`; at least one word."""
    used, end = 0, start
    while end < len(counts) and used + counts[end] <= budget:
        used += counts[end]
        end += 1
    return max(end, start + 1)


def _encode_window(
    tokenizer, words: list[str], max_length: int
) -> tuple[BatchEncoding, list[int]]:
    """The encoding of one window's words, and each word's first sub-word position in it."""
    encoding = tokenizer(words, is_split_into_words=True, truncation=True, max_length=max_length)
    first_pieces: list[int | None] = [None] * len(words)
    for position, word in enumerate(encoding.word_ids()):
        if word is not None and first_pieces[word] is None:
            first_pieces[word] = position
    return encoding, _borrow_positions(first_pieces)


def _borrow_positions(first_pieces: list[int | None]) -> list[int]:
    """Each missing position taken from the nearest word before, else after, else 0."""
    known = [position for position in first_pieces if position is not None]
    filled, previous = [], None
    for position in first_pieces:
        previous = position if position is not None else previous
        filled.append(previous if previous is not None else (known[0] if known else 0))
    return filled


def first_piece_logits(logits: Tensor, first_pieces: Sequence[int]) -> Tensor:
    """The (W, C) rows of one window's (T, C) `logits` at its words' first sub-words."""
    import torch

    if logits.dim() != 2:
        raise ValueError(f"expected one window's (T, C) logits, got shape {tuple(logits.shape)}")
    return logits[torch.as_tensor(list(first_pieces), dtype=torch.long, device=logits.device)]


def merge_windows(windows: Sequence[WordPieces], rows: Sequence[Tensor]) -> Tensor:
    """One text's (N, C) per-word rows in word order, from each window's (W, C) rows,
    keeping each word's row from the window that owns it."""
    import torch

    owned = []
    for window, window_rows in zip(windows, rows, strict=True):
        offset = window.owned.start - window.words.start
        owned.append(window_rows[offset:offset + len(window.owned)])
    return torch.cat(owned)
