"""`routing = "auto"` end to end: the real CLI on tiny real teachers names the routing it chose
and the table it chose from, in `kiwb integrate`, the integration's record, the run's manifest
and the exported model card; `--routing NAME` still forces one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import run_kiwb, write_project
from conftest import TRAINING_SETTINGS
from tiny import make_texts, write_jsonl

from kiwb.core.routing_choice import MIN_LABELED_TEXTS, candidates, label_free_choice


@pytest.fixture(scope="module")
def auto_project(tmp_path_factory, teachers_dir, student_base) -> Path:
    """A pool of 120 texts and an eval set of 30 labeled ones (enough to choose on), scored."""
    root = tmp_path_factory.mktemp("auto")
    write_jsonl(root / "pool.jsonl", [{"text": r["text"]} for r in make_texts(120, seed=41)])
    write_jsonl(root / "eval.jsonl", make_texts(MIN_LABELED_TEXTS + 10, seed=42))
    project = write_project(
        root / "proj", {"a": teachers_dir / "teacher_a", "b": teachers_dir / "teacher_b"},
        root / "pool.jsonl", root / "eval.jsonl",
        extra=f'{TRAINING_SETTINGS}student = "{student_base}"\n')
    run_kiwb("score", project, cwd=root)
    return project


def integrated(project: Path, *args: str) -> dict:
    return json.loads(run_kiwb("integrate", project, *args, "--json", cwd=project).stdout)


def test_auto_chooses_on_the_eval_labels_and_says_so(auto_project):
    summary = integrated(auto_project)
    choice = summary["routing_choice"]
    assert choice["basis"] == "labels" and choice["labeled_texts"] == MIN_LABELED_TEXTS + 10
    assert choice["where"] == "eval"
    assert set(choice["table"]) == {option.name for option in candidates()}
    assert list(choice["table"])[0] == label_free_choice(candidates())[0].name  # first on a tie
    best = max(choice["table"].values())
    assert choice["table"][choice["chosen"]] == best
    first_best = next(name for name, value in choice["table"].items() if value == best)
    assert choice["chosen"] == first_best  # a tie goes to the earlier candidate
    # the record names the routing used, never "auto", wherever it is read
    assert summary["routing"]["name"] == choice["routing"] != "auto"
    assert summary["eval"]["routing_accuracy"]["chosen"] == pytest.approx(best)
    assert 0 <= choice["cross_validated"] <= best + 1e-9

    shown = run_kiwb("integrate", auto_project, cwd=auto_project)
    text = " ".join(shown.stdout.split())
    assert f"Routing chosen by auto: {choice['chosen']}" in text
    assert f"Routing: {choice['chosen']} (auto: routed best of" in " ".join(shown.stderr.split())
    assert "cross-validated choice" in text and "chosen on these texts" in text


def test_a_routing_named_is_used_as_it_is(auto_project):
    summary = integrated(auto_project, "--routing", "rank")
    assert summary["routing"]["name"] == "rank" and "routing_choice" not in summary
    forced = integrated(auto_project, "--routing", "auto")
    assert forced["routing_choice"]["basis"] == "labels"


def test_without_labels_auto_takes_the_label_free_choice(tmp_path, teachers_dir):
    write_jsonl(tmp_path / "pool.jsonl", [{"text": r["text"]} for r in make_texts(120, seed=41)])
    project = write_project(tmp_path / "proj", {"a": teachers_dir / "teacher_a",
                                                "b": teachers_dir / "teacher_b"},
                            tmp_path / "pool.jsonl")
    run_kiwb("score", project, cwd=tmp_path)
    choice = integrated(project)["routing_choice"]
    assert choice["basis"] == "label-free" and choice["labeled_texts"] == 0
    assert "no labeled texts" in choice["why"]


@pytest.mark.slow
def test_a_run_trained_with_auto_keeps_the_choice_in_its_manifest_and_model_card(auto_project, tmp_path):
    choice = integrated(auto_project)["routing_choice"]
    run_kiwb("train", auto_project, "--epochs", "1", "--min-steps", "0", "--foreground",
             cwd=auto_project)
    run = auto_project / "runs" / "muki-hard"  # auto is the default: the name leaves it out
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["method"]["routing"] == "auto"
    assert manifest["routing_choice"] == choice  # training chose as the integration did
    run_kiwb("export", auto_project, "--run", "muki-hard", "--to", tmp_path / "student",
             cwd=auto_project)
    card = (tmp_path / "student" / "README.md").read_text()
    assert f"- routing: `{choice['chosen']}`, chosen by `auto`: routed best of" in card


@pytest.mark.slow
def test_the_workbench_names_the_routing_auto_chose(auto_project):
    """The Uncertainty pane's routing plot, the Jobs pane's note on the integration and the
    Integrate form (which starts at auto) all say what auto did."""
    from textual.widgets import Select, Static
    from tui_support import fill_form, run_async, text_of, wait_for, workbench

    from kiwb.tui.panes.uncertainty import UncertaintyPane
    from kiwb.tui.widgets import Plot

    choice = integrated(auto_project)["routing_choice"]

    @run_async
    async def check():
        app = workbench(auto_project)
        async with app.run_test(size=(100, 40)) as pilot:
            await pilot.press("4")
            pane = app.screen.query_one(UncertaintyPane)
            split = pane.query_one("#routing-split", Plot)
            await wait_for(pilot, lambda: "(auto)" in text_of(split, width=140),
                           what="the routing chosen")
            shown = text_of(split, width=140)
            assert f"Routing · {choice['chosen']} (auto): each teacher's" in shown
            count = f"{len(choice['table'])} routings on {choice['labeled_texts']} labeled texts"
            assert f"auto: best of {count} (eval)" in shown
            await pilot.press("3", "i")
            form = await fill_form(pilot, wait=("routing",))
            assert form.query_one("#field-routing", Select).value == "auto"
            note = " ".join(" ".join(text_of(each, width=140) for each in form.query(Static)).split())
            assert f"Routing auto chose {choice['chosen']} last time: best of" in note

    check()
