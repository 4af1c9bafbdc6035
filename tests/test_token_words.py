"""Words for token-level teachers: the recorded pre-tokenizer, each word's first sub-word under
two different real tokenizers with hand-written vocabularies, and windows of long texts."""

from __future__ import annotations

import pytest
import torch

from kiwb.kinds.token.words import (
    PRETOKENIZER,
    Windowing,
    align_words,
    first_piece_logits,
    merge_windows,
    split_words,
)

# Each sub-word is spelled out in both vocabularies, so every split below is known by hand.
WORDS = ["the", "goalkeeper", "cheered", "new", "yorkers", "!"]
WORDPIECE_TOKENS = ["the", "goal", "##keep", "##er", "cheer", "##ed", "new", "york", "##ers", "!"]
BPE_TOKENS = ["Ġthe", "Ġgoal", "keep", "er", "Ġche", "er", "ed", "Ġnew", "Ġyork", "ers", "Ġ!"]


def wordpiece_tokenizer():
    """A BERT-style WordPiece tokenizer (lower-casing, [CLS] ... [SEP]) over a fixed vocabulary."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    vocab = {token: i for i, token in enumerate(dict.fromkeys(specials + WORDPIECE_TOKENS))}
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]",
    )


def _spelling_merges(tokens: list[str]) -> list[tuple[str, str]]:
    """BPE merges that build each token left to right, one character at a time."""
    merges = []
    for token in tokens:
        for end in range(2, len(token) + 1):
            merges.append((token[:end - 1], token[end - 1]))
    return list(dict.fromkeys(merges))


def bpe_tokenizer(*, unk: bool = True):
    """A RoBERTa-style byte-level BPE tokenizer (prefix space, <s> ... </s>) over fixed merges."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    # Word starts rank first, so "yorkers" is york|ers and not yor|ke|r|s; "cheer" is no
    # token, so "cheered" splits che|er|ed (three pieces, where WordPiece has two).
    merges = _spelling_merges(["Ġthe", "Ġgoal", "Ġche", "Ġnew", "Ġyork", "keep", "er", "ed"])
    merges += [("er", "s"), ("Ġ", "!")]
    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    pieces = specials + pre_tokenizers.ByteLevel.alphabet() + [a + b for a, b in merges]
    vocab = {token: i for i, token in enumerate(dict.fromkeys(pieces))}
    tokenizer = Tokenizer(models.BPE(vocab, merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.RobertaProcessing(
        ("</s>", vocab["</s>"]), ("<s>", vocab["<s>"])
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
        cls_token="<s>", sep_token="</s>", unk_token="<unk>" if unk else None,
        add_prefix_space=True,
    )


@pytest.fixture(scope="module", params=["wordpiece", "bpe"])
def tokenizer(request):
    return wordpiece_tokenizer() if request.param == "wordpiece" else bpe_tokenizer()


# --- first sub-words -------------------------------------------------------------------------

def test_first_sub_words_under_two_tokenizers_by_hand():
    wordpiece, bpe = wordpiece_tokenizer(), bpe_tokenizer()
    (by_wordpiece,) = align_words(wordpiece, WORDS, 32)
    (by_bpe,) = align_words(bpe, WORDS, 32)

    assert wordpiece.convert_ids_to_tokens(by_wordpiece.input_ids) == [
        "[CLS]", *WORDPIECE_TOKENS, "[SEP]"]
    assert bpe.convert_ids_to_tokens(by_bpe.input_ids) == ["<s>", *BPE_TOKENS, "</s>"]
    # the | goal keep er | cheer ed | new | york ers | !    after [CLS] at 0
    assert by_wordpiece.first_pieces == [1, 2, 5, 7, 8, 10]
    # the | goal keep er | che er ed | new | york ers | !   after <s> at 0
    assert by_bpe.first_pieces == [1, 2, 5, 8, 9, 11]
    for tokenizer, window in ((wordpiece, by_wordpiece), (bpe, by_bpe)):
        assert len(window.first_pieces) == len(WORDS) and window.words == range(6)
        assert window.owned == window.words and window.attention_mask == [1] * len(window.input_ids)
        ends = [*window.first_pieces[1:], len(window.input_ids) - 1]
        for word, first, end in zip(WORDS, window.first_pieces, ends, strict=True):
            start_of_word = tokenizer.decode(window.input_ids[first:first + 1]).strip()
            assert start_of_word and word.startswith(start_of_word)
            assert tokenizer.decode(window.input_ids[first:end]).strip() == word


def test_first_piece_logits_takes_the_rows_of_the_first_pieces():
    logits = torch.arange(24.0).reshape(12, 2)  # (T, C): row t holds 2t, 2t + 1
    rows = first_piece_logits(logits, [1, 2, 5])
    assert rows.tolist() == [[2.0, 3.0], [4.0, 5.0], [10.0, 11.0]]
    with pytest.raises(ValueError, match="one window's"):
        first_piece_logits(logits[None], [1])


def test_a_word_without_sub_words_is_fed_as_the_unk_token(tokenizer):
    # "" yields no sub-word under either tokenizer (a `tokens` column can hold one).
    (window,) = align_words(tokenizer, ["the", "", "new"], 16)
    assert len(window.first_pieces) == 3 and window.stand_ins == 1
    assert window.input_ids[window.first_pieces[1]] == tokenizer.unk_token_id
    assert tokenizer.convert_ids_to_tokens(window.input_ids[window.first_pieces[2]]).endswith("new")


def test_without_an_unk_token_such_a_word_borrows_a_neighbours_position():
    (window,) = align_words(bpe_tokenizer(unk=False), ["", "the", "", "new"], 16)
    assert window.first_pieces == [1, 1, 1, 2]  # the first borrows from after, the third before
    assert window.stand_ins == 2


def test_a_slow_tokenizer_is_refused_in_one_line(tmp_path):
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the"]) + "\n")
    slow = BertTokenizerLegacy(str(vocab))
    with pytest.raises(ValueError) as refused:
        align_words(slow, WORDS, 32)
    message = str(refused.value)
    assert "\n" not in message and "BertTokenizerLegacy" in message
    assert "fast" in message and "use_fast=True" in message and "tokenizer.json" in message


def test_bad_lengths_are_refused_and_no_words_give_no_windows(tokenizer):
    assert align_words(tokenizer, [], 16) == []
    with pytest.raises(ValueError, match="no room"):
        align_words(tokenizer, WORDS, 2)  # the two specials fill it
    with pytest.raises(ValueError, match="stride_words"):
        align_words(tokenizer, WORDS, 16, stride_words=-1)


# --- windows ---------------------------------------------------------------------------------

def _merged_word_indices(windows) -> list[float]:
    """Each window's logits hold, at each word's first piece, that word's index in the text."""
    rows = []
    for window in windows:
        logits = torch.full((len(window.input_ids), 1), -1.0)
        for word, position in zip(window.words, window.first_pieces, strict=True):
            logits[position] = word
        rows.append(first_piece_logits(logits, window.first_pieces))
    return merge_windows(windows, rows)[:, 0].tolist()


def test_a_long_text_splits_into_whole_word_windows_covering_each_word_once(tokenizer):
    words = ["the", "goalkeeper", "yorkers"] * 5  # 1 + 3 + 2 pieces under both tokenizers
    windows = align_words(tokenizer, words, 8)  # 6 pieces besides the two specials
    assert [window.words for window in windows] == [range(i, i + 3) for i in range(0, 15, 3)]
    assert all(len(window.input_ids) == 8 for window in windows)
    assert [index for window in windows for index in window.owned] == list(range(15))
    assert _merged_word_indices(windows) == list(range(15))
    assert not any(window.truncated_words or window.stand_ins for window in windows)


def test_a_stride_repeats_words_as_context_owned_by_the_earlier_window(tokenizer):
    words = ["the", "goalkeeper", "yorkers"] * 5
    windows = align_words(tokenizer, words, 8, stride_words=1)
    # pieces 1, 3, 2 | 2 + 1 + 3 | 3 + 2 + 1 | ...: each window after the first starts a word
    # early, and that word's row comes from the window before.
    assert [(w.words, w.owned) for w in windows[:3]] == [
        (range(0, 3), range(0, 3)), (range(2, 5), range(3, 5)), (range(4, 7), range(5, 7))]
    assert [index for window in windows for index in window.owned] == list(range(15))
    assert all(len(window.input_ids) <= 8 for window in windows)
    assert _merged_word_indices(windows) == list(range(15))


def test_a_word_longer_than_a_window_gets_its_own_window_cut_to_fit(tokenizer):
    words = ["the", "goalkeepkeepkeepkeep", "new"]  # goal + keep x 4: five pieces
    windows = align_words(tokenizer, words, 5, stride_words=2)  # room for 3 pieces
    # Neither the long word nor anything before it fits as context beside another word.
    assert [(w.words, w.owned) for w in windows] == [
        (range(0, 1), range(0, 1)), (range(1, 2), range(1, 2)), (range(2, 3), range(2, 3))]
    cut = windows[1]
    assert len(cut.input_ids) == 5 and cut.first_pieces == [1] and cut.truncated_words == 1
    assert tokenizer.decode(cut.input_ids[1:4], skip_special_tokens=True).strip() == "goalkeepkeep"
    assert _merged_word_indices(windows) == [0.0, 1.0, 2.0]


def test_windowing_counts_texts_windows_stand_ins_and_cut_words(tokenizer):
    summary = Windowing()
    texts = [(WORDS, 16), (["the", "goalkeepkeepkeepkeep", "", "new"], 5), (["new"] * 20, 6)]
    for words, max_length in texts:  # 1 window; the | goalkeepkeep | [UNK] new; 4 words each
        summary = summary.add(align_words(tokenizer, words, max_length))
    assert summary == Windowing(
        texts=3, windowed_texts=2, windows=1 + 3 + 5, stand_ins=1, truncated_words=1)


# --- the pre-tokenizer -----------------------------------------------------------------------

@pytest.mark.parametrize(("text", "words"), [
    ("", []),
    (" \t\n\u00a0\u3000 ", []),
    ("I don't use e-mail, do you?", ["I", "don't", "use", "e-mail", ",", "do", "you", "?"]),
    ("COVID-19 rock'n'roll students' '90s --x",
     ["COVID-19", "rock'n'roll", "students", "'", "'", "90s", "-", "-", "x"]),
    ("It costs $1,000.50 (3.14%) at 12:30, 24/7.",
     ["It", "costs", "$", "1,000.50", "(", "3.14", "%", ")", "at", "12:30", ",", "24/7", "."]),
    ("Visit https://example.com/a?b=1. Or www.kiwb.org!",
     ["Visit", "https://example.com/a?b=1", ".", "Or", "www.kiwb.org", "!"]),
    ("(see http://en.wikipedia.org/wiki/Foo_(bar))",
     ["(", "see", "http://en.wikipedia.org/wiki/Foo_(bar)", ")"]),
    ("mail john.smith@example.co.uk.", ["mail", "john.smith@example.co.uk", "."]),
    ("@john_doe loves #NLP2024 and #東京 C#",
     ["@john_doe", "loves", "#NLP2024", "and", "#東京", "C", "#"]),
    ("The U.S. and e.g. A.I", ["The", "U.S.", "and", "e.g.", "A", ".", "I"]),
    ("so good😂😂 👍🏽 👨\u200d👩\u200d👧 🇩🇪 ❤️ 1️⃣",
     ["so", "good", "😂", "😂", "👍🏽", "👨\u200d👩\u200d👧", "🇩🇪", "❤️", "1️⃣"]),
    ("東京は日本の首都です。ソウル 서울",
     ["東", "京", "は", "日", "本", "の", "首", "都", "です", "。", "ソウル", "서울"]),
    ("हिन्दी cafe\u0301 می\u200cخواهم", ["हिन्दी", "cafe\u0301", "می\u200cخواهم"]),
    ("zero\u200bwidth \ufeffbom", ["zero", "width", "bom"]),
])
def test_split_words(text, words):
    assert split_words(text) == words


def test_split_words_keeps_every_visible_character_in_order():
    text = "Dr. O'Neil (NYC) paid 3,5 € — \"wow\"… #1 fan!!"
    words = split_words(text)
    assert "".join(words) == "".join(text.split())
    assert words[:4] == ["Dr", ".", "O'Neil", "("] and PRETOKENIZER == "whitespace-punct-v1"
