"""The routing check (kiwb.core.routing_check): numbers worked out by hand, and end to end on
the full demo. What called for it: five labels and a few-label routing sent (nearly) every
text to one teacher without a word (temperature routing did, and trust, when kiwb had them);
stacked, the few-label routing kiwb keeps, holds on the same five."""

from __future__ import annotations

import csv
import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from cli_helpers import run_kiwb

from kiwb.core.routing_check import (
    OK,
    ONE_TEACHER,
    WORSE_THAN_MC,
    RoutingCheck,
    RoutingComparison,
    check_routing_outcome,
)


def check(wins, expected, comparison=None, **options):
    options = {"uses_labels": False, **options}
    return check_routing_outcome(options.pop("routing", "rank"), wins, expected,
                                 comparison=comparison, **options)


# -- a teacher starved of texts ---------------------------------------------------------------


def test_a_teacher_that_wins_nothing_of_half_the_texts_is_starved():
    found = check({"news": 1200, "lifestyle": 0}, {"news": 0.45, "lifestyle": 0.55})
    assert found.status == ONE_TEACHER and found.starved == ("lifestyle",)
    assert found.problem == ("rank routing: news won 100.0% of 1,200 texts; lifestyle won 0 "
                             "(0.0%) though an estimated 55.0% are in its labels")
    assert found.flagged and found.mark == " ⚠ one-teacher"
    assert found.line().startswith("Warning: the routing looks wrong: rank routing: news won")


@pytest.mark.parametrize(("won", "flagged"), [
    (124, True),   # 12.4% of the texts < 0.25 x 50% = 12.5%
    (125, False),  # exactly a quarter of what was expected: not starved
    (300, False),
])
def test_starved_means_under_a_quarter_of_the_expected_share(won, flagged):
    found = check({"a": 1000 - won, "b": won}, {"a": 0.5, "b": 0.5})
    assert found.flagged is flagged and found.starved == (("b",) if flagged else ())


def test_a_teacher_expected_to_win_few_texts_is_not_judged():
    # 9% expected: under EXPECTED_FLOOR (10%), so winning none of them says too little
    assert check({"a": 1000, "b": 0}, {"a": 0.91, "b": 0.09}).status == OK
    assert check({"a": 1000, "b": 0}, {"a": 0.9, "b": 0.10}).status == ONE_TEACHER


def test_three_teachers_name_each_starved_one():
    found = check({"a": 950, "b": 30, "c": 20}, {"a": 0.4, "b": 0.3, "c": 0.3})
    assert found.starved == ("b", "c")
    assert "a won 95.0% of 1,000 texts" in found.problem
    assert "b won 30 (3.0%)" in found.problem and "c won 20 (2.0%)" in found.problem


def test_one_sharp_teacher_among_five_does_not_make_an_even_routing_look_starving():
    """benchmarks/many_teachers.py, five teachers on 500 Debian test texts: raw MC confidence
    gave rust-utils 75.6% of them (its labels hold 12.6%); rank routing's own split was about
    even. A quarter of 75.6% is 18.9%, so its 16.6% was called starved; expected shares are
    capped at two even shares (2 / 5 = 40%), a quarter of which is 10%."""
    wins = {"devel-doc": 104, "golang-haskell": 96, "libdevel-libs": 99, "perl-python": 118,
            "rust-utils": 83}
    mc_shares = {"devel-doc": 0.06, "golang-haskell": 0.05, "libdevel-libs": 0.084,
                 "perl-python": 0.05, "rust-utils": 0.756}
    assert check(wins, mc_shares).status == OK
    # the same teacher winning under a quarter of the cap (9.8% < 10%) is still starved
    found = check({**wins, "rust-utils": 49, "perl-python": 152}, mc_shares)
    assert found.starved == ("rust-utils",)
    assert "rust-utils won 49 (9.8%) though an estimated 40.0% are in its labels" in found.problem


def test_the_cap_leaves_two_teachers_as_they_were():
    # two even shares of two teachers is 100%: an expected 95% stays 95%
    assert check({"a": 770, "b": 230}, {"a": 0.05, "b": 0.95}).starved == ("b",)  # 23% < 23.75%
    assert check({"a": 760, "b": 240}, {"a": 0.05, "b": 0.95}).status == OK


# -- a routing much worse than MC confidence --------------------------------------------------


@pytest.mark.parametrize(("chosen", "mc", "texts", "worse"), [
    # gap 0.40 >= max(0.05, 2 sqrt((0.25 + 0.09) / 400) = 0.058)
    (0.50, 0.90, 400, True),
    # gap 0.04 < 0.05
    (0.86, 0.90, 400, False),
    # gap 0.06 >= max(0.05, 2 sqrt((0.1344 + 0.09) / 400) = 0.047)
    (0.84, 0.90, 400, True),
    # the same gap on 50 texts: 2 sqrt(0.2244 / 50) = 0.134 > 0.06, within noise
    (0.84, 0.90, 50, False),
    # under MIN_LABELED_TEXTS (20): not compared at all
    (0.10, 0.90, 19, False),
    # better than MC confidence
    (0.95, 0.90, 400, False),
])
def test_much_worse_than_mc_confidence(chosen, mc, texts, worse):
    assert RoutingComparison(chosen, mc, texts).much_worse() is worse


def test_a_routing_worse_than_mc_is_flagged_with_its_figures():
    found = check({"a": 500, "b": 500}, {"a": 0.5, "b": 0.5},
                  RoutingComparison(0.5, 0.9025, 400))
    assert found.status == WORSE_THAN_MC and found.starved == ()
    assert found.problem == ("rank routing: routing accuracy on eval 50.0% against 90.2% for MC "
                             "confidence (400 labeled texts)")


def test_both_findings_are_said_and_the_status_names_the_starved_teacher():
    found = check({"news": 1200, "lifestyle": 0}, {"news": 0.45, "lifestyle": 0.55},
                  RoutingComparison(0.5, 0.9025, 400), routing="stacked", uses_labels=True,
                  labels_given=5)
    assert found.status == ONE_TEACHER
    assert "lifestyle won 0" in found.problem and "50.0% against 90.2%" in found.problem


# -- what to try -----------------------------------------------------------------------------


@pytest.mark.parametrize(("routing", "uses_labels", "use_mc", "hint"), [
    ("stacked", True, True, "try a routing that needs no labels (--routing rank or --routing "
     "confidence), or label more texts (5 labeled now) and integrate again"),
    ("rank", False, True, "try another routing (--routing confidence)"),
    ("class-rank", False, True, "try another routing (--routing rank or --routing confidence)"),
    ("rank", False, False, "switch MC dropout back on ([integration] use_mc = true, or leave "
     "out --no-mc)"),
])
def test_the_hint_says_what_to_try(routing, uses_labels, use_mc, hint):
    found = check({"a": 1000, "b": 0}, {"a": 0.5, "b": 0.5}, routing=routing,
                  uses_labels=uses_labels, use_mc=use_mc, labels_given=5)
    assert found.hint == hint


def test_a_check_round_trips_and_summaries_without_one_have_none():
    from kiwb.project.records import IntegrationSummary

    found = check({"a": 1000, "b": 0}, {"a": 0.5, "b": 0.5})
    assert RoutingCheck.from_dict(found.to_dict()) == found
    assert RoutingCheck.from_dict(None) is None
    assert check({"a": 500, "b": 500}, {"a": 0.5, "b": 0.5}) == RoutingCheck(OK)
    older = {"num_texts": 2, "per_teacher": [{"name": "a", "score_key": "k", "wins": 2}],
             "labels": ["x"], "overlapping_labels": [], "margin_quantiles": {},
             "margin_histogram": [], "conflict_threshold": 0.1, "conflicts": 0,
             "teachers_kind": "sequence"}
    assert IntegrationSummary.from_dict(older).check is None
    summary = IntegrationSummary.from_dict({**older, "check": found.to_dict()})
    assert summary.check == found and summary.to_dict()["check"] == found.to_dict()


def test_the_model_card_says_what_the_routing_check_found():
    from kiwb.workers.export import model_card

    found = check({"news": 1200, "lifestyle": 0}, {"news": 0.45, "lifestyle": 0.55})
    manifest = {"run": "r", "labels": ["x", "y"], "teachers": [], "checkpoint": "step-1", "step": 1,
                "method": {"method": "muki-hard", "routing": "rank"}, "routing_check": found.to_dict()}
    card = model_card(manifest)
    assert ("- kiwb's routing check: one-teacher (rank routing: news won 100.0% of 1,200 texts; "
            "lifestyle won 0 (0.0%) though an estimated 55.0% are in its labels; try another "
            "routing (--routing confidence))") in card
    ok = model_card({**manifest, "routing_check": RoutingCheck(OK).to_dict()})
    assert "- kiwb's routing check: ok\n" in ok


# -- the case that found it: the full demo, five labels, a few-label routing ---------------


FULL_DEMO = os.environ.get("KIWB_DEMO_RESULTS")  # CI builds the full demo before the suite


def five_lowest_margin_labels(project: Path, destination: Path) -> Path:
    """The gold labels of the five texts at the head of the conflicts list (the labels a user
    would give first in the Conflicts pane), as a label file."""
    from kiwb.demo.corpus import generate, split_by_label
    from kiwb.demo.recipe import FULL

    rows = generate(sum(FULL.split_sizes.values()), seed=FULL.seed, mixed_share=FULL.mixed_share)
    gold = {row["text"]: row["label"] for row in split_by_label(rows, FULL.split_sizes,
                                                                seed=FULL.seed)["pool"]}
    with sqlite3.connect(project / "store.sqlite") as connection:
        key = connection.execute("SELECT key FROM integrations ORDER BY created_at LIMIT 1").fetchone()[0]
        texts = [text for (text,) in connection.execute(
            "SELECT text FROM instances WHERE integration = ? ORDER BY margin, row LIMIT 5", (key,))]
    with destination.open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["text", "label"])
        writer.writerows([text, gold[text]] for text in texts)
    return destination


@pytest.mark.slow
@pytest.mark.skipif(not FULL_DEMO, reason="set KIWB_DEMO_RESULTS to a full demo's results file")
def test_on_the_demo_stacked_holds_on_five_labels_and_routing_without_mc_is_flagged(tmp_path):
    project = tmp_path / "demo"
    shutil.copytree(Path(FULL_DEMO).parent, project)  # its paths are relative to its folder
    run_kiwb("labels", "import", project, five_lowest_margin_labels(project, tmp_path / "five.csv"),
             cwd=tmp_path)
    # the routing the workbench re-integrates with given labels holds on the five a user gives
    # first (temperature and trust routing, which kiwb had, gave one teacher 91-100% of them)
    held = json.loads(run_kiwb("integrate", project, "--given-labels", "--routing", "stacked",
                               "--json", cwd=tmp_path).stdout)
    assert held["check"]["status"] == OK, held["check"]
    assert min(held["wins"].values()) / held["num_texts"] > 0.4

    # the demo's own integration the check flags: rank without MC dropout (83.2% of the eval
    # texts routed right with transformers 5.24, against 90.2% for MC confidence)
    shown = run_kiwb("integrate", project, "--no-mc", "--routing", "rank", cwd=tmp_path)
    summary = json.loads(run_kiwb("integrate", project, "--no-mc", "--routing", "rank", "--json",
                                  cwd=tmp_path).stdout)
    found = RoutingCheck.from_dict(summary["check"])
    assert found.status == WORSE_THAN_MC and found.starved == (), summary["wins"]
    accuracy = summary["eval"]["routing_accuracy"]
    assert accuracy["chosen"] < accuracy["mc_dropout"] - 0.05
    said = " ".join((shown.stdout + shown.stderr).split())  # Rich wraps the lines
    assert "Warning: the routing looks wrong: rank routing: routing accuracy on eval" in said
    assert "switch MC dropout back on" in said

    jobs = run_kiwb("jobs", project, cwd=tmp_path).stdout
    assert "⚠ worse-than-mc" in jobs and "its routing looks wrong" in " ".join(jobs.split())
    recorded = json.loads(run_kiwb("jobs", project, "--json", cwd=tmp_path).stdout)
    assert recorded[-1]["ending"]["routing_check"]["status"] == WORSE_THAN_MC


# -- the workbench's Uncertainty pane ---------------------------------------------------------


def test_the_uncertainty_pane_shows_the_routing_check(tmp_path):
    import dataclasses

    from textual.widgets import Static
    from tui_support import (
        integration_summary,
        record_integration,
        run_async,
        synthetic_project,
        text_of,
        wait_for,
        workbench,
    )

    from kiwb.project.paths import ProjectPaths
    from kiwb.project.store import Store

    project = synthetic_project(tmp_path / "proj", integrated=False, trained=False)
    flagged = check({"a": 10, "b": 0}, {"a": 0.5, "b": 0.5}, routing="stacked", uses_labels=True,
                    labels_given=3)
    with Store(ProjectPaths(project).store) as store:
        record_integration(store, "fine", dataclasses.replace(
            integration_summary([0.5] * 10), check=RoutingCheck(OK)))

    @run_async
    async def shown():
        app = workbench(project)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("4")
            warning = app.screen.query_one("#routing-check", Static)
            await wait_for(pilot, lambda: "are conflicts" in text_of(app.screen.query_one("#margins")))
            assert not warning.display  # an integration that is fine shows no warning
            with Store(ProjectPaths(project).store) as store:  # a newer, flagged integration
                record_integration(store, "collapsed", dataclasses.replace(
                    integration_summary([0.5] * 10), check=flagged))
            app.screen.refresh_now()
            await wait_for(pilot, lambda: warning.display, what="the routing check")
            said = " ".join(text_of(warning).split())
            assert said == " ".join(flagged.line().split())
            assert "stacked routing: a won 100.0% of 10 texts; b won 0 (0.0%)" in said

    shown()
