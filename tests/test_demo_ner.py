"""`kiwb demo --kind token` (NER): the shipped NER corpus, the teachers' labels, and the whole quick NER
demo end to end through the real CLI; and `kiwb demo` without --kind still the text demo."""

from __future__ import annotations

import json
import random
import re
from importlib import resources

import pytest
from cli_helpers import run_kiwb

from kiwb.demo.ner_corpus import (
    SLOT,
    corpus_spec,
    entity_types,
    fill,
    generate_splits,
    unseen_names,
)
from kiwb.demo.ner_recipe import FULL, QUICK, TEACHERS
from kiwb.demo.recipe import STUDENTS
from kiwb.project.run_folder import read_best

SIZES = {"teach": 60, "pool": 40, "eval": 20}


def test_corpus_ships_inside_the_package_and_every_slot_has_words():
    assert resources.files("kiwb.demo").joinpath("ner_corpus.json").is_file()
    spec = corpus_spec()
    for pattern in spec["patterns"] + spec["ambiguous_patterns"]:
        for entity_type, name in SLOT.findall(pattern):
            assert name in (spec["names"] if entity_type else spec["words"]), (pattern, name)
    assert entity_types() == ["LOC", "MISC", "ORG", "PER"]


def test_teachers_halve_the_sorted_types():
    assert [entity_type for types in TEACHERS.values() for entity_type in types] == entity_types()
    assert list(TEACHERS) == ["loc-misc", "org-per"]


def test_sentences_are_tagged_bio2_word_by_word():
    row = fill("{PER:person} left {ORG:club_city} for {LOC:city} {when} .", corpus_spec(),
               random.Random(0))
    assert len(row["tokens"]) == len(row["tags"]) and row["text"] == " ".join(row["tokens"])
    assert row["tags"][0] == "B-PER" and row["tags"][1] == "I-PER"  # every person has 2 words
    assert row["tags"][-1] == "O" and row["tokens"][-1] == "."
    for previous, tag in zip(["O", *row["tags"]], row["tags"], strict=False):
        assert not tag.startswith("I-") or previous[2:] == tag[2:], row


def entities(row: dict) -> list[str]:
    """The names a tagged row holds, each as its words joined."""
    found = []
    for word, tag in zip(row["tokens"], row["tags"], strict=True):
        if tag.startswith("B-"):
            found.append(word)
        elif tag.startswith("I-"):
            found[-1] += f" {word}"
    return found


def test_splits_are_deterministic_distinct_and_teach_lacks_the_unseen_names():
    parts = generate_splits(SIZES, seed=3)
    assert parts == generate_splits(SIZES, seed=3) != generate_splits(SIZES, seed=4)
    assert {part: len(rows) for part, rows in parts.items()} == SIZES
    texts = [row["text"] for rows in parts.values() for row in rows]
    assert len(set(texts)) == len(texts)
    names = corpus_spec()["names"]
    unseen = unseen_names(corpus_spec(), 0.3, random.Random(3))  # what generate_splits drew
    taught = {name for list_name, listed in names.items() for name in listed
              if name not in unseen[list_name]}
    assert all(name in taught for row in parts["teach"] for name in entities(row))
    assert any(name not in taught for row in parts["pool"] for name in entities(row))


@pytest.mark.parametrize("word_ids, tags, expected", [
    ([None, 0, 1, 1, None], ["B-LOC", "O"], [-100, 1, 0, -100, -100]),
    ([None, 0, 0, 1, None], ["B-MISC", "I-MISC"], [-100, 3, -100, 4, -100]),
])
def test_labels_sit_on_each_words_first_sub_word(word_ids, tags, expected):
    from kiwb.demo.ner_build import first_piece_labels, teacher_tags

    label2id = {tag: index for index, tag in enumerate(teacher_tags(("LOC", "MISC")))}
    assert first_piece_labels(word_ids, tags, label2id) == expected


def test_a_teacher_learns_only_its_own_types():
    from kiwb.demo.ner_build import own_tags, teacher_tags

    assert teacher_tags(("ORG", "PER")) == ["O", "B-ORG", "I-ORG", "B-PER", "I-PER"]
    tags = ["B-PER", "I-PER", "O", "B-LOC", "B-ORG", "I-ORG"]
    assert own_tags(tags, ("LOC", "MISC")) == ["O", "O", "O", "B-LOC", "O", "O"]


def test_ner_recipes_have_their_own_keys():
    from kiwb.demo.recipe import FULL as TEXT_FULL
    from kiwb.demo.recipe import QUICK as TEXT_QUICK

    assert len({FULL.key(), QUICK.key(), TEXT_FULL.key(), TEXT_QUICK.key()}) == 4
    assert FULL.key() == type(FULL)().key()


def test_kiwb_demo_without_kind_is_the_text_demo():
    from kiwb.cli import build_parser
    from kiwb.demo import build, recipe
    from kiwb.demo.command import default_demo_root, demo_parts

    assert build_parser().parse_args(["demo", "--no-ui"]).kind == "sequence"
    assert build_parser().parse_args(["demo", "--kind", "token"]).kind == "token"
    assert demo_parts("sequence") == (build.build_demo, recipe.FULL, recipe.QUICK)
    # the folders keep their names, so a demo built before is found again
    assert default_demo_root().name == "demo" and default_demo_root("token").name == "demo-ner"
    assert default_demo_root("multi-label").name == "demo-multi-label"


@pytest.mark.slow
def test_the_quick_ner_demo_end_to_end(tmp_path):
    root = tmp_path / "ner"
    done = run_kiwb("demo", root, "--kind", "token", "--no-ui", "--quick", cwd=tmp_path)
    assert re.search(r"entity F1 on \d+ tagged eval sentences", done.stdout)
    assert re.search(r"student · MUKI-Hard\s+│\s+\d+\.\d%", done.stdout)
    results = json.loads((root / "demo-results.json").read_text())
    assert results["recipe"] == QUICK.key() and set(results["students"]) == set(STUDENTS)
    assert set(results["teachers"]) == set(TEACHERS)
    f1 = {name: report["accuracy"] for name, report in results["students"].items()}
    assert all(0 <= value <= 1 for value in f1.values())
    assert all(report["kind"] == "token" for report in results["students"].values())
    # Each teacher alone finds half the types; integrating them must do better.
    assert max(results["teachers"].values()) < max(f1.values())
    assert f1["MUKI-Hard"] > max(results["teachers"].values())
    assert 0.5 <= results["routing"]["chosen"] <= 1

    from transformers import pipeline

    tag = pipeline("token-classification", model=str(root / "exports" / "muki-hard"),
                   aggregation_strategy="simple")
    groups = tag("Elena Marsh flew from Lisbon to Osaka on Monday .")
    assert groups and all(group["entity_group"] in entity_types() for group in groups)

    # The taggers were fine-tuned from the demo's base: kiwb merge makes one tagger of them,
    # its head's tag rows in the union's slots ("O" averaged), evaluated and exported as a run.
    run_kiwb("merge", root, "--method", "ties", "--lambda", "1", "--top-k", "20",
             "--foreground", cwd=tmp_path)
    merged = read_best(root / "runs" / "merge-ties-lambda1-k20")
    assert 0 <= merged["metrics"]["accuracy"] <= 1 and merged["metrics"]["kind"] == "token"
    run_kiwb("export", root, "--run", "merge-ties-lambda1-k20", "--foreground", cwd=tmp_path)
    tag = pipeline("token-classification", model=str(root / "exports" / "merge-ties-lambda1-k20"),
                   aggregation_strategy="simple")
    assert all(group["entity_group"] in entity_types()
               for group in tag("Elena Marsh flew from Lisbon to Osaka on Monday ."))

    # A second run reuses every part; without a terminal it says how to run this demo again.
    again = run_kiwb("demo", root, "--kind", "ner", "--quick", cwd=tmp_path)  # its former name
    reused = " ".join(again.stderr.split())
    assert "Reused corpus, base, teacher loc-misc, teacher org-per" in reused
    assert f"kiwb demo {root} --kind token --no-ui" in again.stdout


def test_the_results_table_shows_each_teacher_the_ensemble_each_student_and_the_routing():
    """The NER demo's table (its end-to-end run is slow): read back as the terminal shows it."""
    from rich.console import Console

    from kiwb.demo.ner_results import results_table

    results = {"eval_texts": 80, "teachers": {"people": 0.412, "places": 0.388},
               "ensemble": 0.7, "routing": {"routing": "confidence", "chosen": 0.9,
                                            "mc_dropout": 0.9, "plain_confidence": 0.85},
               "students": {"muki-hard": {"accuracy": 0.75, "macro_f1": 0.7,
                                          "check": {"status": "ok"}},
                            "vanilla-kd": {"accuracy": 0.5, "macro_f1": 0.4,
                                           "check": {"status": "below-reference"}}}}
    console = Console(width=160, record=True, color_system=None)
    console.print(results_table(results))
    rows = [" ".join(line.replace("│", " ").split()) for line in console.export_text().splitlines()]
    assert any(row.startswith("teacher people alone") and row.endswith("41.2%") for row in rows)
    assert "Ensemble (no training) 70.0%" in rows
    assert "student · muki-hard 75.0% 70.0% ok" in rows
    assert any(row.startswith("student · vanilla-kd 50.0% 40.0% ⚠") for row in rows)
    assert "teacher routing · confidence (the students') 90.0%" in rows
    assert "teacher routing · plain confidence 85.0%" in rows
