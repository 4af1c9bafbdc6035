"""Jobs killed with SIGKILL at random moments (issue 59): 20 per job kind here (more with
KIWB_KILL_POINTS, and in benchmarks/crash_points.py), every invariant of tests/crash_points.py
holding after each."""

from __future__ import annotations

import os
import random
from concurrent.futures import ThreadPoolExecutor

import pytest
from crash_points import KINDS, build, trial

pytestmark = pytest.mark.slow
POINTS = int(os.environ.get("KIWB_KILL_POINTS", "20"))


@pytest.fixture(scope="module")
def bench(tmp_path_factory, teachers_dir, student_base):
    return build(tmp_path_factory.mktemp("crash"), teachers_dir, student_base)


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("kind", KINDS)
def test_every_invariant_holds_after_a_kill_at_random_moments(bench, kind):
    delays = [random.Random(f"{kind} {number}") for number in range(POINTS)]  # reproducible
    with ThreadPoolExecutor(max_workers=2) as pool:  # the machine's two cores
        trials = list(pool.map(lambda number: trial(bench, kind, number, delays[number]),
                               range(POINTS)))
    failed = [(item.delay, name, item.notes) for item in trials
              for name, held in item.held.items() if not held]
    assert not failed, failed
    # the moments spread over the run: most kills land while the job still runs
    assert sum(item.killed for item in trials) >= POINTS // 2, [item.delay for item in trials]
