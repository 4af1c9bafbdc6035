"""`kiwb demo --kind embedding`: its teachers are the text demo's of half the topics each, kept
as sentence encoders, and the quick build runs end to end with every pair weighting."""

from __future__ import annotations

import json
import re

import pytest
from test_bad_input import run_kiwb

from kiwb.demo.command import demo_parts, demo_students, results_table_of
from kiwb.demo.embedding_recipe import EXPORTED, FULL, QUICK, STUDENTS, TEACHERS


def test_the_embedding_demo_is_registered():
    assert len(TEACHERS) == 2 and not set.intersection(*map(set, TEACHERS.values()))
    build, full, quick = demo_parts("embedding")
    assert (build.__name__, full, quick) == ("build_embedding_demo", FULL, QUICK)
    assert demo_students("embedding") == (STUDENTS, EXPORTED)
    assert {overrides["method"] for overrides in STUDENTS.values()} == {"mc", "maskout", "equal"}
    assert results_table_of("embedding").__module__ == "kiwb.demo.embedding_results"
    assert FULL.key() != QUICK.key()


@pytest.mark.slow
def test_the_quick_embedding_demo_end_to_end(tmp_path):
    root = tmp_path / "demo"
    done = run_kiwb("demo", root, "--kind", "embedding", "--no-ui", "--quick", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert re.search(r"embedding demo · kNN accuracy on \d+ eval texts", done.stdout)
    results = json.loads((root / "demo-results.json").read_text())
    assert results["recipe"] == QUICK.key() and set(results["students"]) == set(STUDENTS)
    assert set(results["probes"]) == {*TEACHERS, "concatenation", "average"}
    for report in results["students"].values():
        assert report["kind"] == "embedding" and 0 <= report["accuracy"] <= 1
    for name in TEACHERS:  # each teacher a sentence encoder: its head dropped, its pooling named
        teacher = root / "models" / f"teacher-{name}"
        assert json.loads((teacher / "config.json").read_text())["architectures"] == ["BertModel"]
        assert (teacher / "modules.json").is_file()
        assert not (root / "models" / f"classifier-{name}").exists()
    exported = root / "exports" / "mc"
    assert (exported / "modules.json").is_file() and (exported / "1_Pooling" / "config.json").is_file()
