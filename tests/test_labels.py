"""Labels given to texts: the store's table, undo, the "most useful next" order worked out by
hand, the header's agreement figures, and label files (round trip and bad files)."""

from __future__ import annotations

import pytest

from kiwb.errors import DataError
from kiwb.project.instances import InstanceFilter, count, key_of, page, replace_instances
from kiwb.project.label_files import read_label_file, write_label_file
from kiwb.project.labels import (
    all_labels,
    give_label,
    give_labels,
    labels_by_hash,
    labels_fingerprint,
    replace_all,
    restore,
    text_hash,
)
from kiwb.project.queries import label_progress
from kiwb.project.records import IntegrationRecord, IntegrationSettings
from kiwb.project.store import Store
from kiwb.tui.labeling import header

LABELS = ["sports", "politics", "music", "cooking"]


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "store.sqlite") as opened:
        yield opened


def test_a_label_is_kept_by_text_with_who_and_when_and_undo_puts_back_the_one_before(tmp_path):
    path = tmp_path / "store.sqlite"
    with Store(path) as store:
        assert give_label(store.connection, "a match", "sports") is None
        assert give_label(store.connection, "an election", None) is None  # none of these labels
        before = give_label(store.connection, "a match", "politics")  # changed its mind
        assert before.label == "sports" and before.text == "a match"
        restore(store.connection, text_hash("a match"), before)  # undo the change
        first = give_label(store.connection, "a song", "music")
        restore(store.connection, text_hash("a song"), first)  # undo a first label: no label
    with Store(path) as store:  # reopened: every decision was committed as made
        given = all_labels(store.connection)
    assert [(item.text, item.label, item.shown) for item in given] == [
        ("a match", "sports", "sports"), ("an election", None, "none")]
    assert all(item.user and item.host and item.given_at > 0 for item in given)


def test_replace_all_forgets_the_labels_before_and_a_bad_batch_writes_nothing(store):
    give_labels(store.connection, [("one", "sports"), ("two", "music")])
    assert replace_all(store.connection, [("three", "cooking"), ("three", "music")]) == 1
    assert labels_by_hash(store.connection) == {text_hash("three"): "music"}  # last one wins
    with pytest.raises(AttributeError):  # a text that is not text fails the whole batch
        give_labels(store.connection, [("four", "sports"), (None, "music")])
    assert labels_by_hash(store.connection) == {text_hash("three"): "music"}


def test_the_fingerprint_changes_with_any_decision():
    base = {"h1": "sports", "h2": None}
    assert labels_fingerprint(base) == labels_fingerprint(dict(reversed(base.items())))
    changed = [{"h1": "music", "h2": None}, {"h1": "sports"}, {"h1": "sports", "h2": "none"},
               {"h1": "sports", "h2": None, "h3": "cooking"}]
    assert len({labels_fingerprint(each) for each in [base, *changed]}) == 5


# Eight texts of one integration: (row, margin, routed teacher, target class).
ROWS = [(0, 0.05, 0, 0), (1, 0.01, 0, 0), (2, 0.20, 1, 2), (3, 0.02, 0, 1),
        (4, 0.30, 1, 3), (5, 0.03, 0, 0), (6, 0.04, 1, 2), (7, 0.50, 1, 2)]


def _integrate(store, key="i1", rows=ROWS, settings=None, created_at=1.0, teacher_labels=True,
               gold_labels=None):
    replace_instances(store.connection, key, [
        (row, margin, routed, target, None, [0.5, 0.5], f"text {row}")
        for row, margin, routed, target in rows])
    summary = {"num_texts": len(rows), "teachers_kind": "sequence", "labels": LABELS,
               "per_teacher": [{"name": "A", "wins": 4, "labels": LABELS[:2]},
                               {"name": "B", "wins": 4, "labels": LABELS[2:]}],
               "overlapping_labels": [], "margin_quantiles": {},
               "margin_histogram": [], "conflict_threshold": 0.1, "conflicts": 5}
    if not teacher_labels:  # as an integration recorded before kiwb kept them (version 6)
        del summary["per_teacher"]
        summary.update({"teachers": ["A", "B"], "score_keys": {}, "wins": {"A": 4, "B": 4}})
    if gold_labels is not None:  # what an integration with `labels` records of those it read
        summary["gold_labels"] = gold_labels
    settings = IntegrationSettings(**(settings or {})).to_dict()
    store.record_integration(key, dataset="unlabeled", settings=settings, summary=summary)
    store.connection.execute("UPDATE integrations SET created_at = ? WHERE key = ?",
                             (created_at, key))
    # (an older record reads once the store has migrated it)
    return IntegrationRecord.from_dict(store.integration(key)) if teacher_labels else None


def _rows(store, filters, key="i1", limit=100, after=None):
    return [item.row for item in page(store.connection, key, filters, after=after, limit=limit)]


def test_the_useful_order_takes_the_lowest_margin_of_each_teacher_and_class_in_turn(store):
    _integrate(store)
    useful = InstanceFilter(order="useful")
    # Groups by hand: (A, sports) rows 1, 5, 0 by margin; (A, politics) row 3;
    # (B, music) rows 6, 2, 7; (B, cooking) row 4. Turn 0: 1 (.01), 3 (.02), 6 (.04), 4 (.30);
    # turn 1: 5 (.03), 2 (.20); turn 2: 0 (.05), 7 (.50).
    assert _rows(store, useful) == [1, 3, 6, 4, 5, 2, 0, 7]
    assert _rows(store, InstanceFilter()) == [1, 3, 5, 6, 0, 2, 4, 7]  # margin order, all texts
    # Labeling the first text leaves the order of the rest as it was.
    give_label(store.connection, "text 1", "sports")
    assert _rows(store, useful) == [3, 6, 4, 5, 2, 0, 7]
    # A label given to (B, music) out of order (row 7) moves that group back a turn: rows 6
    # and 2 take turns 1 and 2. Turn 0: 3; turn 1: 5 (.03), 6 (.04); turn 2: 0 (.05), 2 (.20).
    give_label(store.connection, "text 7", "music")
    give_label(store.connection, "text 4", "cooking")
    assert _rows(store, useful) == [3, 5, 6, 0, 2]
    # Pages by keyset join up to the whole order; the count agrees.
    first = page(store.connection, "i1", useful, limit=2)
    rest = _rows(store, useful, after=key_of(first[-1], useful))
    assert [item.row for item in first] + rest == [3, 5, 6, 0, 2]
    assert count(store.connection, "i1", useful) == 5


def test_the_sample_order_lists_unlabeled_texts_by_content_hash_whatever_the_margin(store):
    """The random sample: texts in the order of their content hash, so no score steers which
    come first; pages by keyset join up to the whole order, and labeled texts drop out."""
    _integrate(store)
    sample = InstanceFilter(order="sample")
    by_hash = [row for _, row in sorted((text_hash(f"text {row}"), row) for row, *_ in ROWS)]
    assert _rows(store, sample) == by_hash
    assert by_hash != [1, 3, 5, 6, 0, 2, 4, 7]  # not the margin order in disguise
    give_label(store.connection, f"text {by_hash[0]}", "sports")
    give_label(store.connection, f"text {by_hash[3]}", None)  # none of these labels: labeled too
    rest = [row for row in by_hash if row not in (by_hash[0], by_hash[3])]
    first = page(store.connection, "i1", sample, limit=2)
    assert [item.row for item in first] + _rows(store, sample, after=key_of(first[-1], sample)) == rest
    assert count(store.connection, "i1", sample) == 6
    assert _rows(store, InstanceFilter(order="sample", routed=1)) == [
        row for row in rest if ROWS[row][2] == 1]  # the filters still apply


def test_filters_show_labeled_or_unlabeled_texts_with_their_labels(store):
    _integrate(store)
    give_label(store.connection, "text 3", "politics")
    give_label(store.connection, "text 6", None)
    labeled = page(store.connection, "i1", InstanceFilter(labels="labeled"))
    assert [(item.row, item.labeled, item.given) for item in labeled] == [
        (3, True, "politics"), (6, True, None)]
    assert _rows(store, InstanceFilter(labels="unlabeled")) == [1, 5, 0, 2, 4, 7]
    assert _rows(store, InstanceFilter(labels="unlabeled", max_margin=0.1)) == [1, 5, 0]
    assert count(store.connection, "i1", InstanceFilter(labels="labeled")) == 2


def test_the_header_counts_labels_agreement_and_the_change_after_re_integration(store):
    plain = _integrate(store)
    give_labels(store.connection, [("text 0", "sports"), ("text 2", "sports"),  # B routed: no
                                   ("text 3", "politics"), ("text 6", None), ("elsewhere", "music")])
    progress = label_progress(store, plain)
    assert (progress.in_store, progress.labeled, progress.none) == (5, 4, 1)
    assert (progress.agree, progress.judged, progress.before) == (2, 3, None)
    # Re-integrated with the labels: text 2 now goes to A; the change is measured against
    # the integration before that did not use the labels.
    rows = [(row, margin, 0 if row == 2 else routed, target) for row, margin, routed, target in ROWS]
    read = labels_fingerprint(labels_by_hash(store.connection))
    with_labels = _integrate(store, "i2", rows, settings={"labels": True}, created_at=2.0,
                             gold_labels={"labeled": 3, "left_out": 1, "routing_labels": 3,
                                          "eval_left_out": 0, "fingerprint": read})
    progress = label_progress(store, with_labels)
    assert (progress.agree, progress.judged) == (3, 3)
    assert progress.agreement == 1.0 and progress.before == pytest.approx(2 / 3)
    # its routing was fitted on these labels: the header does not count agreeing with them
    assert progress.read_current and progress.fitted_on
    shown = header(progress).plain
    assert "fitted on them" in shown and "without them agreed 67%" in shown
    assert "routing agrees" not in shown and "in use" in shown
    # a label given after that integration: it no longer read the labels as they are
    give_labels(store.connection, [("text 7", "music")])
    progress = label_progress(store, with_labels)
    assert not progress.read_current and "r re-integrate" in header(progress).plain
    assert "routing agrees" in header(label_progress(store, plain)).plain


def test_an_integration_recorded_before_teacher_label_sets_reads_them_from_the_scores(tmp_path):
    """Store version 7 gives such an integration its teachers' labels from their score sets."""
    path = tmp_path / "older.sqlite"
    with Store(path) as store:
        _integrate(store, teacher_labels=False)
        for teacher, own in (("A", LABELS[:2]), ("B", LABELS[2:])):
            store.register_score_set(f"scores-{teacher}", teacher=teacher, dataset="unlabeled",
                                     num_texts=8, num_shards=1, meta={"labels": own})
        give_labels(store.connection, [("text 0", "sports"), ("text 2", "sports"),
                                       ("text 3", "politics")])
        store.connection.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    with Store(path) as store:  # reopened at version 6: migrated
        older = IntegrationRecord.from_dict(store.integration("i1"))
        assert older.summary.teacher_labels == {"A": LABELS[:2], "B": LABELS[2:]}
        progress = label_progress(store, older)
    assert (progress.agree, progress.judged) == (2, 3)


# -- label files ---------------------------------------------------------------------------

@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_label_files_round_trip_text_with_commas_quotes_and_line_breaks(store, tmp_path, suffix):
    given = [("plain", "sports"), ("a, comma", "music"), ('a "quote"', None),
             ("two\nlines", "cooking"), ("ünïcode ✓", "politics"), ("bare\rreturn", "music"),
             ("crlf\r\nbreak", "sports"), ("unicode\u2028line\u0085separators\u2029", None)]
    give_labels(store.connection, given)
    path = tmp_path / f"labels{suffix}"
    assert write_label_file(path, all_labels(store.connection)) == len(given)
    read = read_label_file(path, LABELS)
    assert sorted((item.text, item.label) for item in read) == sorted(given, key=lambda pair: pair[0])
    # when and by whom each was given come back too, so an import keeps them
    stored = {item.text: item for item in all_labels(store.connection)}
    assert all((item.given_at, item.user, item.host) == (
        round(stored[item.text].given_at, 3), stored[item.text].user, stored[item.text].host)
        for item in read)


def test_an_import_keeps_who_gave_a_label_and_when(store):
    from kiwb.project.labels import Decision

    give_labels(store.connection, [Decision("a", "sports", 1000.0, "alice", "alicehost"),
                                   ("b", "music")])
    by_text = {item.text: item for item in all_labels(store.connection)}
    assert (by_text["a"].given_at, by_text["a"].user, by_text["a"].host) == (1000.0, "alice",
                                                                            "alicehost")
    assert by_text["b"].given_at > 1000.0 and by_text["b"].user != "alice"


@pytest.mark.parametrize(("content", "fragments"), [
    ('{"text": "a", "label": "sports"}\n{"text": "b", "label": "opera"}\n',
     ["labels.jsonl, line 2", "unknown label 'opera'", "sports, politics, music, cooking",
      "none for none of these labels"]),
    ('{"text": "a"}\n', ["line 1", "no 'label' column", "--label-column"]),
    ('{"text": "a", "label": "sports"}\nnot json\n', ["line 2", "not JSON"]),
    ('{"text": "a", "label": "sports", "given_at": "yesterday"}\n',
     ["line 1", "given_at 'yesterday' is not a time"]),
])
def test_a_bad_jsonl_label_file_is_refused_naming_the_line(tmp_path, content, fragments):
    path = tmp_path / "labels.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError) as refused:
        read_label_file(path, LABELS)
    for fragment in fragments:
        assert fragment in str(refused.value)


def test_a_bad_csv_label_file_is_refused_naming_the_line(tmp_path):
    path = tmp_path / "labels.csv"
    path.write_text("body,label\nsome text,sports\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"labels.csv, line 2: no 'text' column"):
        read_label_file(path, LABELS)
    path.write_bytes("text,label\nfine,sports\ncaf\xe9,music\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"labels.csv, line 3: not UTF-8 text; save the file as UTF-8"):
        read_label_file(path, LABELS)
    with pytest.raises(DataError, match=r"give a .csv or .jsonl file"):
        read_label_file(tmp_path / "labels.txt", LABELS)
    path.write_text("", encoding="utf-8")
    with pytest.raises(DataError, match=r"labels.csv: empty file; give a header line"):
        read_label_file(path, LABELS)


def test_the_useful_order_pages_alike_however_many_labels_a_group_has(store):
    """Paged by keyset, the group-by-group reading gives the order the definition does:
    turn = labels in the group + place among its unlabeled texts, then margin, then row."""
    import random

    rng = random.Random(3)
    rows = [(row, rng.random(), rng.randrange(2), rng.randrange(3)) for row in range(300)]
    _integrate(store, rows=rows)
    give_labels(store.connection, [(f"text {row}", "sports") for row, *_ in rows[:120]
                                   if rng.random() < 0.6])
    labeled = set(labels_by_hash(store.connection))
    groups: dict[tuple, list] = {}
    for row, margin, routed, target in sorted(rows, key=lambda r: (r[1], r[0])):
        groups.setdefault((routed, target), []).append((row, margin, text_hash(f"text {row}")))
    expected = []
    for members in groups.values():
        given = sum(1 for *_, key in members if key in labeled)
        unlabeled = [(row, margin) for row, margin, key in members if key not in labeled]
        expected += [(given + turn, margin, row) for turn, (row, margin) in enumerate(unlabeled)]
    useful, seen, after = InstanceFilter(order="useful"), [], None
    while chunk := page(store.connection, "i1", useful, after=after, limit=7):
        seen += [key_of(item, useful) for item in chunk]
        after = key_of(chunk[-1], useful)
    assert seen == sorted(expected)


def test_every_bulk_change_keeps_the_labels_before_and_any_set_comes_back(store):
    """An import keeps the labels it changes, a replacement the ones it forgets, a restore the
    ones it puts aside: no change to the given labels loses any."""
    from kiwb.project.labels import keep_current, label_history, restore_set

    assert keep_current(store.connection, "nothing yet") is None  # no labels: nothing kept
    give_labels(store.connection, [("one", "sports"), ("two", None)])
    give_labels(store.connection, [("three", "music")], keep="kiwb labels import b.csv")
    replace_all(store.connection, [("four", "cooking")], reason="kiwb labels import --replace c.csv")
    kept = label_history(store.connection)
    assert [(item.id, item.reason, item.labels) for item in kept] == [
        (1, "kiwb labels import b.csv", 2), (2, "kiwb labels import --replace c.csv", 3)]
    assert restore_set(store.connection, 2) == 3
    assert sorted((item.text, item.label) for item in all_labels(store.connection)) == [
        ("one", "sports"), ("three", "music"), ("two", None)]
    assert label_history(store.connection)[-1].reason == "kiwb labels restore 2"
    restore_set(store.connection, 3)  # the restore itself is undone the same way
    assert [(item.text, item.label) for item in all_labels(store.connection)] == [("four", "cooking")]
    with pytest.raises(ValueError, match="no set 9"):
        restore_set(store.connection, 9)
