"""A run's manifest is built in one place (kiwb.project.run_manifest.RunManifest): every kind's
trained runs and the merge runs write the same entries under the same names, and a resume
compares what it writes."""

from __future__ import annotations

import re
from pathlib import Path

import kiwb
from kiwb.project.resume_checks import RESUME_CHECKS
from kiwb.project.run_manifest import RunManifest

TEACHERS = [{"name": "a", "hash": "h1", "labels": ["x"]}, {"name": "b", "hash": "h2", "labels": ["y"]}]


def test_a_trained_runs_manifest_holds_every_input_a_resume_compares():
    manifest = RunManifest(kind="sequence", teachers=TEACHERS, labels=["x", "y"],
                           method={"method": "muki-hard"}, student="base", data={"n": 2},
                           eval_data=None, training={"epochs": 3.0},
                           own={"class_funnel": None}).to_dict()
    assert manifest == {
        "kiwb_version": kiwb.__version__, "kind": "sequence", "teachers": TEACHERS,
        "labels": ["x", "y"], "method": {"method": "muki-hard"}, "student": "base",
        "data": {"n": 2}, "labeled_data": None, "given_labels": None,
        "training": {"epochs": 3.0}, "eval_data": None, "class_funnel": None}
    # what a resume compares and every run has (the others a job adds: scores, the merge it
    # started from, [embedding], the stored integration its targets were read from)
    shared = set(RESUME_CHECKS) - {"scores", "init_from_merge", "embedding", "integration"}
    assert shared <= set(manifest)


def test_a_merge_runs_manifest_has_no_training_inputs():
    manifest = RunManifest(kind="token", teachers=TEACHERS, labels=["x", "y"],
                           method={"method": "merge-average"}, student=None,
                           eval_data={"texts": "f"}, own={"merge": {"method": "average"}}).to_dict()
    assert manifest == {
        "kiwb_version": kiwb.__version__, "kind": "token", "teachers": TEACHERS,
        "labels": ["x", "y"], "method": {"method": "merge-average"}, "student": None,
        "eval_data": {"texts": "f"}, "merge": {"method": "average"}}


def test_no_run_manifest_is_written_by_hand():
    """Only the manifests of exports (kiwb-manifest.json, a folder of their own) are built
    elsewhere; a run's manifest.json is RunManifest's."""
    root = Path(kiwb.__file__).parent
    by_hand = sorted(str(path.relative_to(root)) for path in root.rglob("*.py")
                     if re.search(r'"kiwb_version":\s*__version__', path.read_text(encoding="utf-8")))
    assert by_hand == ["kinds/embedding/export.py", "project/run_manifest.py", "workers/export.py"]
