"""Rare classes end to end: kiwb integrate shows the class funnel, the corrections change the
targets, and a student keeps a class its targets used to starve (tiny real models)."""

from __future__ import annotations

import shutil

import pytest
from test_cli_tables import piped_kiwb

pytestmark = pytest.mark.slow


@pytest.fixture
def project(tmp_path, scored_project):
    """A copy of the scored project (scores reused), so each test changes only its own."""
    return shutil.copytree(scored_project, tmp_path / "proj",
                           ignore=shutil.ignore_patterns("runs", "exports"))


def test_integrate_prints_the_class_funnel_at_80_columns(project):
    shown = piped_kiwb("integrate", project, "--foreground", cwd=project.parent)
    print(shown)
    assert "Where each class goes" in shown
    for label in ("sports", "politics", "music", "cooking"):
        assert label in shown
