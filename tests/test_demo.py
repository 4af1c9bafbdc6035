"""`kiwb demo`: the shipped corpus, and the whole demo end to end through the real CLI
(with the small hidden --quick recipe, so it runs in well under a minute)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import pytest
from cli_helpers import kiwb_env, run_kiwb

from kiwb.demo.corpus import corpus_file, corpus_spec, generate, split_by_label, topic_labels
from kiwb.demo.recipe import FULL, QUICK, STUDENTS, TEACHERS
from kiwb.project.run_folder import list_checkpoints


def test_corpus_ships_inside_the_package():
    shipped = resources.files("kiwb.demo").joinpath("corpus.json")
    assert shipped.is_file()
    assert corpus_file().read_text(encoding="utf-8") == shipped.read_text(encoding="utf-8")
    assert len(topic_labels()) >= 6
    assert sorted(label for labels in TEACHERS.values() for label in labels) == sorted(topic_labels())


def test_every_slot_of_every_pattern_has_words():
    spec = corpus_spec()
    for label, topic in spec["topics"].items():
        for pattern in topic["patterns"]:
            for slot in re.findall(r"\{(\w+)\}", pattern):
                assert slot in topic["slots"] or slot in spec["shared"], (label, slot)
    for entry in spec["mixed"]:
        known = {**spec["shared"], **spec["topics"][entry["also"]]["slots"],
                 **spec["topics"][entry["label"]]["slots"]}
        for pattern in entry["patterns"]:
            assert all(slot in known for slot in re.findall(r"\{(\w+)\}", pattern)), pattern


def test_corpus_is_deterministic_distinct_and_split_by_label():
    rows = generate(20, seed=3)
    assert rows == generate(20, seed=3)
    assert rows != generate(20, seed=4)
    assert len({row["text"] for row in rows}) == len(rows) == 20 * len(topic_labels())
    assert all(row["text"][0].isupper() and "{" not in row["text"] for row in rows)
    parts = split_by_label(rows, {"a": 12, "b": 8})
    assert len(parts["a"]) == 12 * len(topic_labels()) and len(parts["b"]) == 8 * len(topic_labels())
    assert not {row["text"] for row in parts["a"]} & {row["text"] for row in parts["b"]}


def test_recipes_differ_and_have_their_own_keys():
    assert FULL.key() != QUICK.key()
    assert FULL.key() == type(FULL)().key()


def test_demo_tokenizer_is_reproducible():
    from kiwb.demo.build import build_tokenizer

    texts = [row["text"] for row in generate(10, seed=0)]
    first, second = build_tokenizer(texts, QUICK), build_tokenizer(texts, QUICK)
    assert first.get_vocab() == second.get_vocab()
    assert first.tokenize("Zzyzx!") and "[UNK]" not in first.tokenize("Zzyzx!")


@pytest.mark.slow
def test_demo_refuses_a_folder_that_is_not_a_demo(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    result = run_kiwb("demo", tmp_path, "--no-ui", "--quick", cwd=tmp_path, check=False)
    assert result.returncode == 2
    assert "not empty and holds no kiwb demo" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.slow
def test_demo_end_to_end_then_reused(tmp_path):
    # No folder given: the user data folder (platformdirs honours XDG_DATA_HOME on Linux).
    # Without a terminal the workbench cannot open: it builds, then says what to run.
    built = subprocess.run([sys.executable, "-m", "kiwb", "demo", "--quick"], cwd=tmp_path,
                           env={**kiwb_env(), "XDG_DATA_HOME": str(tmp_path / "data")},
                           capture_output=True, text=True, timeout=240, check=True)
    root = tmp_path / "data" / "kiwb" / "demo"
    assert "pre-train base" in built.stderr and f"kiwb ui {root}" in built.stdout
    base_weights = root / "models" / "base" / "model.safetensors"
    built_at = base_weights.stat().st_mtime_ns

    started = time.perf_counter()
    first = run_kiwb("demo", root, "--no-ui", "--quick", cwd=tmp_path)
    first_seconds = time.perf_counter() - started
    assert "Reused corpus, base, teacher news, teacher lifestyle" in " ".join(first.stderr.split())
    for row in ("teacher news alone", "Ensemble (no training)", "teacher routing · MC dropout",
                "teacher routing · plain confidence", *(f"student · {name}" for name in STUDENTS)):
        assert row in first.stdout, row
    assert re.search(r"student · MUKI-Hard\s+│\s+\d+\.\d%", first.stdout)

    exported = root / "exports" / "muki-hard"
    from transformers import pipeline

    classify = pipeline("text-classification", model=str(exported))
    prediction = classify("The striker scored twice in the derby on Sunday.")[0]
    assert prediction["label"] in topic_labels()
    manifest = json.loads((exported / "kiwb-manifest.json").read_text())
    assert sorted(manifest["labels"]) == sorted(topic_labels())

    # The documentation's first try of the student: a project folder, its newest run.
    predicted = run_kiwb("predict", root, "Parliament passed the budget bill after a long debate",
                         cwd=tmp_path)
    assert predicted.stdout.split()[0] in topic_labels()
    newest = max((p for p in (root / "runs").iterdir() if p.is_dir()),  # its last checkpoint
                 key=lambda p: list_checkpoints(p)[-1].stat().st_mtime)
    assert f"Run {newest.name}, the newest of {len(STUDENTS)}" in " ".join(predicted.stderr.split())
    results = json.loads((root / "demo-results.json").read_text())
    assert results["recipe"] == QUICK.key() and set(results["students"]) == set(STUDENTS)

    started = time.perf_counter()
    again = run_kiwb("demo", root, "--no-ui", "--quick", cwd=tmp_path)
    assert time.perf_counter() - started < first_seconds
    assert "All scores are up to date (cached)" in again.stderr
    assert again.stderr.count("is finished from an earlier run") == len(STUDENTS)
    assert base_weights.stat().st_mtime_ns == built_at
    assert "MUKI-Hard" in again.stdout


# .ci/run runs the full demo headless first and names its results file here.
FULL_RESULTS = os.environ.get("KIWB_DEMO_RESULTS")


@pytest.mark.skipif(not FULL_RESULTS, reason="set KIWB_DEMO_RESULTS to a full demo's results file")
def test_the_full_demo_is_honest():
    """On the full demo, MC dropout routes better than plain confidence and the MUKI student
    beats the untrained Ensemble, as the documentation says."""
    results = json.loads(open(FULL_RESULTS, encoding="utf-8").read())
    assert results["recipe"] == FULL.key()
    # The students train with [training]'s defaults (no epochs or learning rate set by hand)
    # and reach the Ensemble; kiwb's own check finds nothing wrong with MUKI-Hard or -Soft.
    assert (FULL.student_epochs, FULL.student_learning_rate, FULL.student_min_steps) == (None, None, None)
    for method in ("MUKI-Hard", "MUKI-Soft"):
        assert results["students"][method]["accuracy"] > results["ensemble"]
        assert results["students"][method]["check"]["status"] == "ok"
    assert results["routing"]["mc_dropout"] > results["routing"]["plain_confidence"]
    assert results["students"]["MUKI-Hard"]["accuracy"] > results["ensemble"] + 0.10
    assert results["students"]["MUKI-Hard"]["accuracy"] > results["students"]["Vanilla KD"]["accuracy"]
    assert (results["students"]["MUKI-Hard"]["accuracy"]
            > results["students"]["MUKI-Hard without MC dropout"]["accuracy"])
    assert results["students"]["Vanilla KD"]["check"]["status"] == "collapsed"


@pytest.mark.skipif(not FULL_RESULTS, reason="set KIWB_DEMO_RESULTS to a full demo's results file")
def test_the_readmes_example_is_one_the_demo_student_gets_right(tmp_path):
    """The sentence the README, the docs and the Export pane give `kiwb predict` and `pipeline`
    is answered right by the demo's exported student."""
    from kiwb.tui.panes.export import LOAD_SNIPPET

    root = Path(__file__).resolve().parents[1]
    sentence = re.search(r'kiwb predict \./student "([^"]+)"', (root / "README.md").read_text()).group(1)
    for page in ("README.md", "docs/getting-started.md", "docs/training.md"):
        assert sentence in (root / page).read_text(encoding="utf-8"), page
    assert sentence in LOAD_SNIPPET
    exported = json.loads(open(FULL_RESULTS, encoding="utf-8").read())["exported"]
    answered = run_kiwb("predict", exported, sentence, "--top", "1", cwd=tmp_path).stdout
    assert answered.split()[0] == "finance", answered


# The documented spread of the demo over CPUs and library releases (the single-label kind's
# page, docs/kinds/single-label.md): its rows by name,
# and where the demo's results file keeps each.
SPREAD_ROWS = {
    "Ensemble": lambda results: results["ensemble"],
    **{f"student · {method}": (lambda results, method=method: results["students"][method]["accuracy"])
       for method in ("Vanilla KD", "UHC", "MUKI-Hard", "MUKI-Soft", "MUKI-Hard without MC dropout")},
    "teacher routing · rank": lambda results: results["routing"]["chosen"],
}
SPREAD_MARGIN = 2.0  # points beyond the documented spread, for a CPU not yet seen


def documented_spread() -> dict[str, tuple[float, float]]:
    """Each row of the documented spread table: (lowest, highest) over the machines it lists."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "kinds" / "single-label.md").read_text(encoding="utf-8")
    table = page[page.index("| method | AVX-512 "):].split("\n\n")[0]
    spread = {}
    for line in table.splitlines()[2:]:
        name, *cells = [cell.strip() for cell in line.strip("|").split("|")]
        values = [float(value) for value in re.findall(r"(\d+\.\d)%", " ".join(cells))]
        if name in SPREAD_ROWS:
            spread[name] = (min(values), max(values))
    return spread


def test_the_docs_give_a_spread_for_every_row_they_compare():
    assert set(documented_spread()) == set(SPREAD_ROWS)
    low, high = documented_spread()["student · UHC"]
    assert low < high  # a spread, not one figure said to hold everywhere


@pytest.mark.skipif(not FULL_RESULTS, reason="set KIWB_DEMO_RESULTS to a full demo's results file")
def test_the_full_demo_is_within_the_documented_spread():
    """The figures this machine's demo produced lie within the documented spread over
    CPUs and library releases, widened by SPREAD_MARGIN points."""
    results = json.loads(open(FULL_RESULTS, encoding="utf-8").read())
    outside = []
    for name, (low, high) in documented_spread().items():
        value = 100 * SPREAD_ROWS[name](results)
        if not low - SPREAD_MARGIN <= value <= high + SPREAD_MARGIN:
            outside.append(f"{name}: {value:.1f}% here, documented {low}%–{high}%")
    assert not outside, "; ".join(outside)


def test_the_full_demo_trains_its_students_with_kiwbs_defaults():
    """No hand tuning: the full recipe leaves [training]'s epochs, learning rate and minimum
    steps at kiwb's defaults; only the quick smoke recipe shortens training."""
    from kiwb.demo.build import student_overrides

    assert student_overrides(FULL) == {}
    assert set(student_overrides(QUICK)) == {"epochs", "learning_rate", "min_steps"}
