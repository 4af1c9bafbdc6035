"""Reading a token project's data: each text's words, and each word's gold tag where given."""

from __future__ import annotations

from kiwb.errors import DataError
from kiwb.kinds.token.tags import read_tag_set, spans_to_tags
from kiwb.kinds.token.words import PRETOKENIZER, split_words
from kiwb.project.fingerprint import texts_fingerprint
from kiwb.workers.data import TextTable, open_source, row_name, setting_place, with_item_names

WORD_SEPARATOR = "\x1f"  # no word holds it: a text's words joined for hashing


def load_word_table(path: str, *, text_column: str = "text", tokens_column: str | None = None,
                    tags_column: str | None = None, split: str | None = None,
                    limit: int | None = None, role: str = "data",
                    subset: str | None = None) -> TextTable:
    """The texts of a data set with their words (a tokens column, or the text split by kiwb's
    pre-tokenizer) and, with `tags_column`, each word's gold tag converted to BIO2."""
    dataset = open_source(path, split, role, subset)
    columns = list(dataset.column_names)
    _require_columns(path, role, columns, text_column, tokens_column, tags_column)
    if len(dataset) == 0:
        raise DataError(f"{path}: the data set has no rows; give it at least one text")
    if limit is not None:
        dataset = dataset.select(range(min(limit, len(dataset))))
    words = (_word_lists(dataset[tokens_column], path, tokens_column) if tokens_column
             else [split_words(_text(value, path, row, text_column))
                   for row, value in enumerate(dataset[text_column])])
    for row, row_words in enumerate(words):
        if not row_words:
            raise DataError(f"{path}: {row_name(path, row)} has no words (an empty text); remove it or give "
                            "it a text")
    texts = (list(dataset[text_column]) if text_column in columns
             else [" ".join(row_words) for row_words in words])
    tags = (_gold_tags(with_item_names(dataset[tags_column], dataset.features[tags_column]),
                       words, path, tags_column) if tags_column else None)
    # The words are what is scored: the same texts split otherwise are other data.
    split_by = f"tokens:{tokens_column}" if tokens_column else PRETOKENIZER
    fingerprint = texts_fingerprint([split_by] + [WORD_SEPARATOR.join(w) for w in words])
    return TextTable(path, texts, None, fingerprint, words=words, tags=tags)


def _require_columns(path, role, columns, text_column, tokens_column, tags_column) -> None:
    wanted = [(tokens_column, "tokens_column"), (tags_column, "tags_column")]
    if tokens_column is None:
        wanted.append((text_column, "text_column"))
    for column, key in wanted:
        if column is not None and column not in columns:
            raise DataError(f"{path}: no column {column!r} (columns: {', '.join(columns)}); set "
                            f"{setting_place(key, role)}")


def _text(value, path, row: int, column: str) -> str:
    if not isinstance(value, str):
        raise DataError(f"{path}: {row_name(path, row)} of column {column!r} is {value!r}, not a text; "
                        "remove or fill that row")
    return value


def _word_lists(values: list, path, column: str) -> list[list[str]]:
    words = []
    for row, value in enumerate(values):
        if not isinstance(value, list) or not all(isinstance(word, str) for word in value):
            raise DataError(f"{path}: {row_name(path, row)} of column {column!r} is {value!r}, not a list of "
                            "words; give each row its words as a list of strings")
        words.append(list(value))
    return words


def _gold_tags(values: list, words: list[list[str]], path, column: str) -> list[list[str]]:
    """Each row's tags checked against its words, read in the scheme the whole column shows
    (BIO, IOB1, BIOES or bare types) and written as BIO2."""
    rows = _word_lists(values, path, column)
    for row, (row_tags, row_words) in enumerate(zip(rows, words, strict=True)):
        if len(row_tags) != len(row_words):
            raise DataError(f"{path}: {row_name(path, row)} has {len(row_words)} words but {len(row_tags)} "
                            f"tags in {column!r}; give each word exactly one tag (set "
                            "tokens_column to the words the tags belong to)")
    names = sorted({tag for row_tags in rows for tag in row_tags} | {"O"})
    try:
        tag_set = read_tag_set(names)
    except ValueError as error:
        raise DataError(f"{path}: column {column!r}: {error}") from None
    index = {tag: i for i, tag in enumerate(tag_set.tags)}
    return [spans_to_tags(tag_set.decode([index[tag] for tag in row_tags]), len(row_tags))
            for row_tags in rows]


def load_role_table(path: str, spec, role: str, config=None) -> TextTable:
    """The token kind's load_table: a data set of the project, by its [data.ROLE] `spec`; a
    file given to `kiwb evaluate --data` (role "evaluate") reads the words and gold tags from
    columns "tokens" and "tags" unless named."""
    if role in ("eval", "labeled") and spec.tags_column is None:
        raise DataError(f"{path}: [data.{role}] of a project of NER teachers needs each word's "
                        'gold tag: set tags_column = "tags" (and tokens_column = "tokens" for '
                        "the words they belong to); label_column is for text classifiers")
    tokens, tags = spec.tokens_column, spec.tags_column
    if role == "evaluate":
        tokens, tags = tokens or "tokens", tags or "tags"
    return load_word_table(path, text_column=spec.text_column, tokens_column=tokens,
                           tags_column=tags, split=spec.split, limit=spec.limit, role=role,
                           subset=spec.subset)
