"""The workbench's pure parts: renderers, event folding, file inspection, config edits, themes."""

from __future__ import annotations

import dataclasses

import pytest
from tui_support import (
    LABELS_A,
    drawn_cells,
    integration_summary,
    record_integration,
    run_async,
    write_config,
    write_teacher,
)

from kiwb.errors import ConfigError, KiwbError
from kiwb.project.config import load_config
from kiwb.project.records import (
    BestCheckpoint,
    RoutingAccuracy,
    RoutingDetails,
    ScoreShard,
    TeacherFacts,
    TeacherRouting,
    TrainDone,
    TrainEval,
    TrainStart,
    TrainStep,
    teacher_facts,
)
from kiwb.tui import config_edit, plots, themes
from kiwb.tui.history import RunHistory, Runs, ScoreHistograms
from kiwb.tui.inspect import human_size, inspect_dataset, inspect_teacher, union_with_overlaps
from kiwb.tui.panes.accuracy import _routing
from kiwb.tui.panes.jobs import integration_note
from kiwb.tui.panes.uncertainty import accuracy_line, split_line
from kiwb.tui.widgets import fit_widths

# -- renderers -------------------------------------------------------------------------------


@pytest.mark.parametrize(("values", "width", "expected"), [
    ([1, 2, 3, 4], 8, [1, 1, 2, 2, 3, 3, 4, 4]),     # room: every bin repeats
    ([1, 2, 3, 4], 2, [3, 7]),                       # no room: neighbours add up
    ([1, 2, 3, 4], 4, [1, 2, 3, 4]),
    ([], 3, [0, 0, 0]),
])
def test_bucket_repeats_or_sums_bins(values, width, expected):
    assert plots.bucket(values, width) == expected


def test_histogram_draws_eighths_scaled_to_the_tallest_bar():
    text = plots.histogram([0, 1, 2], 3, 1, show_axis=False)
    # one row is 8 eighths: 2 -> a full cell, 1 -> half of it, 0 -> nothing
    assert text.plain.split("\n") == [" ▄█"]
    assert plots.histogram([0, 2, 4], 3, 2, show_axis=False).plain.split("\n") == ["  █", " ██"]


def test_histogram_gives_every_non_zero_bin_a_sliver():
    assert plots.histogram([100, 1, 0], 3, 1, show_axis=False).plain == "█▁ "


def test_histogram_axis_and_marker():
    text = plots.histogram([4, 0, 0, 0, 0, 0, 0, 0, 0, 4], 10, 2, marker=0.5, marker_style="red")
    bars, axis = text.plain.split("\n")
    assert bars == "█    ┊   █"
    assert axis == "0  0.5   1"
    assert any(span.style == "red" for span in text.spans)


def test_mirrored_histogram_compares_shapes_of_groups_of_different_sizes():
    text = plots.mirrored_histogram([0, 0, 10], [2, 0, 0], 3, 3)
    upper, axis, lower = text.plain.split("\n")
    assert upper == "  █" and lower == "█  "   # 10 of 10 and 2 of 2 are both 100 %
    assert axis == "0 1"


def test_mirrored_histogram_marks_a_split_above_and_below_the_axis():
    text = plots.mirrored_histogram([0, 0, 0, 4], [4, 0, 0, 0], 4, 3, marker=0.6,
                                    marker_style="red")
    upper, axis, lower = text.plain.split("\n")
    assert upper == "  ┊█" and lower == "█ ┊ "   # 0.6 falls in the third of four columns
    assert axis == "0  1"
    assert [text.plain[span.start:span.end] for span in text.spans if span.style == "red"] == \
        ["┊", "┊"]
    assert plots.mirrored_histogram([0, 4], [4, 0], 2, 3, marker=0.9).plain.split("\n")[0] == " █"


@pytest.mark.parametrize(("entry", "expected"), [
    ({"won": 270, "share": 0.41, "split": 0.62},
     "A: won 270 (16%) · est. in its labels 41% · split 0.62"),
    ({"won": 1700, "share": None, "split": None}, "A: won 1,700 (100%) · split –"),
    ({"won": 270, "share": 0.41, "split": 0.615, "calibration_error": 0.081, "labeled_own": 30},
     "A: won 270 (16%) · est. in its labels 41% · split 0.61 · calibration error 0.08"),
    ({"won": 812, "share": None, "split": 0.55,
      "reference": "seeded, then refitted on the 812 pool texts routed to it"},
     "A: won 812 (48%) · split 0.55 · seeded, then refitted on the 812 pool texts routed to it"),
])
def test_split_line_says_what_the_routing_gave_a_teacher(entry, expected):
    routing = TeacherRouting.from_dict({"histogram_here": [], "histogram_elsewhere": [],
                                        **{k: v for k, v in entry.items() if k != "won"}})
    assert split_line(TeacherFacts(name="A", wins=entry["won"], routing=routing), 1700) == expected


@pytest.mark.parametrize(("routing", "name", "line", "cell"), [
    ({"mc_dropout": 0.703, "plain_confidence": 0.692, "chosen": 0.81}, "stacked",
     "routing accuracy: stacked 81.0% · MC dropout 70.3% · plain confidence 69.2%",
     "stacked 81.0%"),
    ({"mc_dropout": 0.703, "plain_confidence": 0.692}, None,  # recorded by an older kiwb
     "routing accuracy: MC dropout 70.3% · plain confidence 69.2%", "70.3% / 69.2%"),
])
def test_routing_accuracy_names_the_chosen_routing_when_recorded(routing, name, line, cell):
    routing = RoutingAccuracy.from_dict(routing)
    assert accuracy_line(routing, name) == line
    assert _routing(routing, name) == cell
    assert _routing(None) == "–"


def test_integration_note_names_the_routing_and_the_texts_each_teacher_won():
    summary = dataclasses.replace(
        integration_summary([0.5] * 1700), conflicts=12,
        per_teacher=teacher_facts(["a", "b"], ["ka", "kb"], [270, 1430]),
        conflict_threshold=0.1, routing=RoutingDetails(name="mixture",
                                                       labeled_texts=0))
    assert integration_note(summary) == (
        "integrated 1,700 texts with mixture routing (a won 270, b won 1,430): 12 conflicts "
        "under margin 0.1; see Uncertainty (4) and Conflicts (6)")


def test_hbar_and_sparkline():
    assert plots.hbar(0.5, 4) == "██  "
    assert plots.hbar(1 / 16, 2) == "▏ "     # 1/16 of 2 cells = 1 eighth of one
    assert plots.hbar(2.0, 3) == "███"
    assert plots.sparkline([1, 2, 3], 10).plain == "▁▅█"   # 1 + round(3.5) eighths
    assert plots.sparkline([5, 5], 4).plain == "██"
    assert plots.sparkline([1, 1, 3, 3], 2).plain == "▁█"   # averaged in pairs


def test_labelled_bars_show_missing_values():
    lines = plots.labelled_bars([("sports", 1.0), ("music", None)], 30).plain.split("\n")
    assert lines[0].startswith("sports") and lines[0].endswith("100.0%")
    assert lines[1].startswith("music") and lines[1].rstrip().endswith("–")


def test_side_by_side_pads_each_block():
    from rich.text import Text

    joined = plots.side_by_side([Text("ab\nc"), Text("x")], [3, 1], gap=1)
    assert joined.plain.split("\n") == ["ab  x", "c    "]


# -- state from events ------------------------------------------------------------------------


def _shard(teacher, key, shard, mc, det=None, dataset="unlabeled"):
    event = ScoreShard(teacher=teacher, dataset=dataset, key=key, shard=shard, rows=sum(mc),
                       seconds=1.0, mc_confidence_hist=mc, det_confidence_hist=det or mc)
    return {"kind": event.kind, "data": event.to_dict()}


def _eval(step, accuracy):
    return TrainEval(step=step, accuracy=accuracy, metric="accuracy", macro_f1=accuracy,
                     per_class_accuracy={},
                     confusion=[], num_texts=10, routing_accuracy=None)


def _step(step, loss):
    return TrainStep(step=step, loss=loss, lr=1e-4, texts_per_s=10.0, total_steps=30)


def test_score_histograms_sum_shards_once_and_restart_on_a_new_key():
    histograms = ScoreHistograms()
    assert histograms.add(_shard("a", "k1", 0, [1, 2]))
    assert histograms.add(_shard("a", "k1", 1, [3, 0]))
    assert histograms.add(_shard("a", "k1", 1, [3, 0]))   # recorded twice, counted once
    assert not histograms.add(_shard("a", "k1", 2, [9, 9], dataset="eval"))
    (a,) = histograms.teachers()
    assert a.mc[:2] == [4, 2] and a.texts == 6
    histograms.add(_shard("a", "k2", 0, [0, 1]))           # rescored: the old key is dropped
    assert histograms.teachers()[0].mc[:2] == [0, 1]
    histograms.add(_shard("b", "k3", 0, [1, 0]))
    assert [t.teacher for t in histograms.teachers(["b", "a"])] == ["b", "a"]


def test_run_history_follows_resume_and_restart():
    run = RunHistory("r")
    run.add(TrainStart(step=0, total_steps=30, method="muki-hard"))
    for step in (10, 20):
        run.add(_step(step, 1.0 / step))
        run.add(_eval(step, step / 100))
    run.add(TrainStart(step=10, total_steps=30, method="muki-hard"))   # resumed from step 10
    assert run.steps == [10] and [e.step for e in run.evals] == [10]
    run.add(_step(20, 0.04))
    run.add(_eval(20, 0.5))
    run.add(TrainDone(step=30, best=None))
    assert run.state == "done" and run.best_eval.accuracy == 0.5


def test_a_finished_runs_best_is_the_checkpoint_its_trainer_kept():
    """The workbench shows the evaluation of the checkpoint train.done names (the trainer's
    BestCheckpoint), not one it works out again; while running, the best so far."""
    run = RunHistory("r")
    run.add(TrainStart(step=0, total_steps=30, method="muki-hard"))
    for step, accuracy in ((10, 0.5), (20, 0.75), (30, 0.75)):
        run.add(_eval(step, accuracy))
    assert run.best_eval.step == 20  # the first of the highest, as the trainer picks
    run.add(TrainDone(step=30, best=BestCheckpoint(step=10, accuracy=0.5)))
    assert run.best_eval.step == 10
    run.add(TrainStart(step=0, total_steps=30, method="muki-hard"))    # started afresh
    assert run.steps == [] and run.latest_eval is None


def test_runs_keep_each_run_apart():
    runs = Runs()
    for run, method in (("a", "uhc"), ("b", "muki-soft")):
        start = TrainStart(step=0, total_steps=10, method=method)
        assert runs.add({"kind": start.kind, "run": run, "data": start.to_dict()})
    assert not runs.add({"kind": "score.shard", "run": None, "data": {}})
    assert [r.method for r in runs] == ["uhc", "muki-soft"]


def test_runs_refuse_an_event_that_lacks_a_key_in_one_line():
    with pytest.raises(KiwbError, match=r"^train\.step event has no 'loss' \(it has: step\)$"):
        Runs().add({"kind": "train.step", "run": "a", "data": {"step": 1}})


# -- reading files without transformers --------------------------------------------------------


def test_union_marks_labels_shared_by_teachers():
    assert union_with_overlaps([("a", "b"), ("b", "c")]) == [("a", 1), ("b", 2), ("c", 1)]


def test_inspect_teacher_reads_json_and_sizes(tmp_path):
    root = write_config(tmp_path / "proj")
    config = load_config(root)
    summary = inspect_teacher(config, config.teachers[1])
    assert summary.labels == ("music", "cooking") and summary.problem is None
    assert summary.architecture == "RobertaForSequenceClassification"
    assert summary.tokenizer == "RobertaTokenizerFast" and summary.size_bytes == 4096
    assert human_size(4096) == "4.0 KB" and human_size(None) == "–"


@pytest.mark.parametrize(("make", "model"), [("wordpiece", "WordPiece"), ("bpe", "BPE")])
def test_a_fast_tokenizer_is_named_by_its_model_and_vocabulary_size(tmp_path, make, model):
    """Not transformers 5's class name, TokenizersBackend for every fast tokenizer."""
    import tiny

    root = write_config(tmp_path / "proj")
    config = load_config(root)
    folder = tmp_path / "proj" / "teachers" / "b"
    tokenizer = (tiny.wordpiece_tokenizer(folder) if make == "wordpiece"
                 else tiny.bpe_tokenizer(folder))
    tokenizer.save_pretrained(folder)
    assert "TokenizersBackend" in (folder / "tokenizer_config.json").read_text()
    summary = inspect_teacher(config, config.teachers[1])
    assert summary.tokenizer == f"{model} {len(tokenizer):,}"


def test_inspect_teacher_names_problems_and_fixes(tmp_path):
    root = write_config(tmp_path / "proj")
    write_teacher(root / "generic", ("LABEL_0", "LABEL_1"))
    write_teacher(root / "encoder", LABELS_A, architecture="BertModel")
    (root / "empty").mkdir()
    config = config_edit.add_teacher(load_config(root), "g", str(root / "generic"))
    config = config_edit.add_teacher(config, "e", str(root / "encoder"))
    config = config_edit.add_teacher(config, "x", str(root / "empty"))
    problems = {t.name: inspect_teacher(config, t).problem for t in config.teachers}
    assert "generically" in problems["g"] and "override" in problems["g"]
    assert "not a sequence classifier" in problems["e"]
    assert "no config.json" in problems["x"]
    fixed = config_edit.set_teacher_labels(config, "g", "one, two")
    assert inspect_teacher(fixed, fixed.teacher("g")).problem is None
    wrong = config_edit.set_teacher_labels(config, "g", "one, two, three")
    assert "lists 3 names but the checkpoint has 2" in inspect_teacher(wrong, wrong.teacher("g")).problem


def test_inspect_dataset_counts_rows_and_checks_columns(tmp_path):
    root = write_config(tmp_path / "proj")
    (root / "data" / "texts.csv").write_text("body,topic\n\"a, b\",x\nc,y\nd,x\n")
    config = config_edit.set_dataset(load_config(root), "eval", "data/texts.csv", "body", "topic")
    summary = inspect_dataset(config, "eval", config.data.eval)
    assert (summary.rows, summary.columns, summary.format) == (3, ["body", "topic"], "csv")
    assert summary.samples[0]["body"] == "a, b" and summary.label_counts == {"x": 2, "y": 1}
    wrong = config_edit.set_dataset(config, "eval", "data/texts.csv", "text", "topic")
    assert "no column 'text'" in inspect_dataset(wrong, "eval", wrong.data.eval).problem
    jsonl = inspect_dataset(config, "unlabeled", config.data.unlabeled)
    assert jsonl.rows == 10 and jsonl.format == "jsonl"


def test_inspect_dataset_reads_parquet(tmp_path):
    import pyarrow as arrow
    import pyarrow.parquet as parquet

    root = write_config(tmp_path / "proj")
    parquet.write_table(arrow.table({"text": ["a", "b", "c", "d"]}), root / "data" / "t.parquet")
    config = config_edit.set_dataset(load_config(root), "unlabeled", "data/t.parquet", limit="2")
    summary = inspect_dataset(config, "unlabeled", config.data.unlabeled)
    assert (summary.rows, summary.format, summary.samples[0]) == (2, "parquet", {"text": "a"})


def test_the_data_form_names_a_hub_data_set_with_its_split_and_subset(tmp_path):
    """Written to kiwb.toml as given; the Data pane says it is the jobs' to read (the
    workbench fetches nothing); a subset is refused for a local file."""
    root = write_config(tmp_path / "proj")
    config = config_edit.set_dataset(load_config(root), "eval", "hf://datasets/fancyzhx/ag_news",
                                     "text", "label", split="test", subset="default")
    spec = load_config(root).data.eval
    assert (spec.path, spec.split, spec.subset) == ("hf://datasets/fancyzhx/ag_news", "test",
                                                    "default")
    summary = inspect_dataset(config, "eval", spec)
    assert summary.problem is None and summary.format.startswith(
        "Hub data set (subset default, split test)")
    with pytest.raises(ConfigError, match="a subset is a Hub data set's"):
        config_edit.set_dataset(config, "eval", "data/unlabeled.jsonl", subset="default")


# -- config edits --------------------------------------------------------------------------------


def test_config_edits_validate_before_writing(tmp_path):
    root = write_config(tmp_path / "proj")
    before = (root / "kiwb.toml").read_text()
    with pytest.raises(ConfigError, match="does not exist"):
        config_edit.add_teacher(load_config(root), "c", "no/such/folder")
    with pytest.raises(ConfigError, match="already used"):
        config_edit.add_teacher(load_config(root), "A", "teachers/a")
    with pytest.raises(ConfigError, match="limit"):
        config_edit.set_dataset(load_config(root), "unlabeled", "data/unlabeled.jsonl", limit="ten")
    assert (root / "kiwb.toml").read_text() == before           # nothing half-written
    removed = config_edit.remove_teacher(load_config(root), "b")
    assert [t.name for t in load_config(root).teachers] == ["a"] == [t.name for t in removed.teachers]
    assert "# Short unique name of this teacher" in (root / "kiwb.toml").read_text()


def test_set_scoring_writes_only_changes(tmp_path):
    root = write_config(tmp_path / "proj")
    config = load_config(root)
    assert config_edit.set_scoring(config, mc_passes=config.scoring.mc_passes) is config
    assert config_edit.set_scoring(config, mc_passes=4).scoring.mc_passes == 4
    assert load_config(root).scoring.mc_passes == 4


def test_new_project_writes_defaults(tmp_path):
    written = config_edit.new_project(tmp_path / "fresh")
    assert load_config(written).name == "fresh"


# -- small helpers ------------------------------------------------------------------------------


def test_packaged_themes_load_and_a_broken_one_is_named(tmp_path):
    loaded = themes.load_themes([themes.package_themes_folder()])
    names = {theme.name for theme in loaded.themes}
    assert {"kiwb-dark", "kiwb-light", "kiwb-ansi"} <= names and not loaded.problems
    assert next(t for t in loaded.themes if t.name == "kiwb-ansi").ansi
    (tmp_path / "bad.toml").write_text('name = "bad"\nprimary = "not-a-colour"\n')
    (tmp_path / "typo.toml").write_text('name = "t"\nprimray = "#fff"\n')
    (tmp_path / "broken.toml").write_text("name = [\n")
    problems = themes.load_themes([tmp_path]).problems
    assert [p.split(":")[0] for p in problems] == ["bad.toml", "broken.toml", "typo.toml"]
    assert "is not a colour" in problems[0] and "primray" in problems[2]


def test_choose_theme():
    available = {"kiwb-dark", "kiwb-light", "kiwb-ansi", "textual-dark"}
    assert themes.choose_theme(None, available, "truecolor") == ("kiwb-dark", None)
    assert themes.choose_theme(None, available, "standard") == ("kiwb-ansi", None)
    assert themes.choose_theme("kiwb-light", available, "standard") == ("kiwb-light", None)
    chosen, note = themes.choose_theme("solarized", available, "256")
    assert chosen == "kiwb-dark" and "no theme 'solarized'" in note and "kiwb-light" in note
    assert themes.choose_theme(None, {"textual-dark"}, "256")[0] == "textual-dark"


def test_plot_colours_default_from_a_themes_standard_colours():
    from textual.theme import BUILTIN_THEMES

    defaults = themes.plot_variable_defaults(BUILTIN_THEMES["textual-light"])
    assert defaults["kiwb-wrong"] == BUILTIN_THEMES["textual-light"].error
    assert themes.few_colours("standard") and not themes.few_colours("truecolor")


def test_theme_files_in_the_repository_are_the_packaged_ones():
    from pathlib import Path

    top = Path(__file__).parent.parent / "themes"
    packaged = themes.package_themes_folder()
    names = sorted(path.name for path in packaged.glob("*.toml"))
    assert names == ["ansi.toml", "dark.toml", "light.toml"]
    assert sorted(path.name for path in top.glob("*.toml")) == names
    for name in names:  # links into the package as checked in; a copy must match as well
        assert (top / name).read_text() == (packaged / name).read_text(), name


def test_kiwb_dir_opens_the_workbench(monkeypatch, tmp_path, capsys):
    from kiwb import cli

    opened = []
    monkeypatch.setattr("kiwb.tui.run", lambda root, theme=None, pane=None: opened.append(
        (root, theme, pane)) or 0)
    assert cli.main([str(tmp_path)]) == 0
    assert cli.main(["ui", str(tmp_path), "--pane", "conflicts", "--theme", "kiwb-light"]) == 0
    assert opened == [(tmp_path.resolve(), None, None), (tmp_path.resolve(), "kiwb-light", "conflicts")]
    assert cli.main([str(tmp_path / "missing")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_a_mistyped_command_is_answered_with_the_command_not_a_folder(monkeypatch, tmp_path,
                                                                      capsys):
    """`kiwb status` or `kiwb trian` is no command and no folder: the error names the command
    meant (another tool's word, or a near spelling) instead of a folder missing; an existing
    folder of that name still opens, and a word like no command is taken for a folder."""
    from kiwb import cli

    monkeypatch.chdir(tmp_path)
    for word, meant in (("status", "jobs"), ("trian", "train"), ("Eval", "evaluate"),
                        ("dmeo", "demo")):
        assert cli.main([word]) == 2
        assert capsys.readouterr().err == (
            f"kiwb: error: {word!r} is neither a command nor a folder: did you mean kiwb "
            f"{meant}? (kiwb --help lists the commands; kiwb init {word} creates a project "
            "folder of that name)\n")
    assert cli.main(["experiments"]) == 2
    assert capsys.readouterr().err == ("kiwb: error: experiments: no such folder; create a "
                                       "project there with: kiwb init experiments\n")
    opened = []
    monkeypatch.setattr("kiwb.tui.run", lambda root, theme=None, pane=None: opened.append(root)
                        or 0)
    (tmp_path / "status").mkdir()
    assert cli.main(["status"]) == 0
    assert opened == [tmp_path / "status"]


@pytest.mark.parametrize(("words", "meant"), [
    (["integrate", "--routing", "rnak"], "rank"), (["labels", "exprt"], "export"),
    (["store", "chek"], "check"), (["integrate", "--routing", "zzz"], None)])
def test_a_misspelt_choice_is_answered_with_the_one_meant(capsys, words, meant):
    """argparse's refusal of a choice, with the choice spelt near the word given (none when
    nothing is near)."""
    from kiwb import cli

    with pytest.raises(SystemExit) as refused:
        cli.main(words)
    error = capsys.readouterr().err.splitlines()[-1]
    assert refused.value.code == 2 and f"invalid choice: '{words[-1]}'" in error
    assert error.endswith(f"; did you mean {meant}?" if meant else ")")


def test_labels_and_store_given_a_folder_do_what_only_reads(monkeypatch, tmp_path, capsys):
    """`kiwb labels [DIR]` lists the labels and `kiwb store [DIR]` checks the store, as their
    `list` and `check` actions do; a word that is no action nor folder is refused as before."""
    from kiwb import cli

    root = tmp_path / "project"
    assert cli.main(["init", str(root)]) == 0
    monkeypatch.chdir(root)
    for default, explicit in ((["labels", str(root)], ["labels", "list", str(root)]),
                              (["labels"], ["labels", "list"]),
                              (["store", str(root)], ["store", "check", str(root)]),
                              (["store"], ["store", "check"])):
        capsys.readouterr()
        assert cli.main(explicit) == 0
        shown = capsys.readouterr().out
        assert cli.main(default) == 0
        assert capsys.readouterr().out == shown != ""
    with pytest.raises(SystemExit) as refused:
        cli.main(["labels", "nothere"])
    assert refused.value.code == 2 and "invalid choice: 'nothere'" in capsys.readouterr().err


def test_read_changes_follows_events_by_id_and_reports_a_new_integration(tmp_path):
    from kiwb.project.paths import ProjectPaths
    from kiwb.project.queries import read_changes
    from kiwb.project.store import Store

    with Store(ProjectPaths(tmp_path).store) as store:
        for step in range(5):
            store.append_event("train.step", _step(step, 1.0).to_dict(), run="r")
        store.append_event("job.progress", {"done": 1}, job_id=None)     # read through store.jobs
        first = read_changes(store, 0, None, max_events=3)
        assert [e["data"]["step"] for e in first.events] == [0, 1, 2] and first.more_events
        rest = read_changes(store, first.last_event_id, None, max_events=3)
        assert [e["data"]["step"] for e in rest.events] == [3, 4] and not rest.more_events
        assert rest.integration is None and rest.integration_stamp is None
        record_integration(store, "k", integration_summary([0.5]))
        changed = read_changes(store, rest.last_event_id, None)
        assert changed.integration.key == "k" and changed.events == []
        assert changed.integration.summary == integration_summary([0.5])
        assert read_changes(store, 0, changed.integration_stamp).integration is None


@run_async
async def test_table_header_follows_columns_widened_after_a_repaint():
    # The stale-header race made deterministic: the table is painted between the new row
    # and the idle on which it widens its columns.
    from textual.app import App
    from textual.geometry import Region

    from kiwb.tui.widgets import Table

    class OneTable(App):
        def compose(self):
            table = Table(id="t", cursor_type="row")
            table.add_columns("a", "b")
            yield table

    app = OneTable()
    async with app.run_test(size=(40, 6)) as pilot:
        await pilot.pause()
        table = app.query_one("#t", Table)
        table.clear()
        table.add_row("a long first cell", "x")
        table.move_cursor(row=0)
        table.render_lines(Region(0, 0, 40, 2))
        await pilot.pause()
        header, row = (strip.text for strip in table.render_lines(Region(0, 0, 40, 2)))
        assert header.index("b") == row.index("x") == len(" a long first cell  ")


@pytest.mark.parametrize(("widths", "room", "expected"), [
    ([3, 5, 10], 20, [3, 5, 10]),                    # room for all: each its own width
    ([3, 5, 10], 17, [3, 5, 9]),                     # the widest gives up what is missing
    ([6, 6, 8, 8, 5, 160], 78, [6, 6, 8, 8, 5, 45]),  # a long text column takes what is left
    ([2, 30, 30], 33, [2, 16, 15]),                  # cut alike; the spare cell to the first
    ([10, 10, 10], 5, [4, 4, 4]),                    # no narrower than 4: the table scrolls
])
def test_fit_widths_cuts_the_widest_columns_first(widths, room, expected):
    assert fit_widths(widths, room) == expected


def _one_table(width: int):
    """An app showing one Table `width` cells wide, with columns a and b."""
    from textual.app import App

    from kiwb.tui.widgets import Table

    class OneTable(App):
        CSS = f"Table {{ width: {width}; }}"

        def compose(self):
            table = Table(id="t", cursor_type="row")
            table.add_column("a", key="a")
            table.add_column("b", key="b")
            yield table

    return OneTable()


@run_async
async def test_table_columns_follow_cells_updated_in_place():
    app = _one_table(40)
    async with app.run_test(size=(40, 6)) as pilot:
        table = app.query_one("#t")
        table.add_row("queued", "", key="job")
        await pilot.pause()
        assert drawn_cells(table) == [["a", "b"], ["queued", ""]]
        table.update_cell("job", "a", "finished")
        table.update_cell_at((0, 1), "3,200/3,200 texts")
        await pilot.pause()
        assert drawn_cells(table) == [["a", "b"], ["finished", "3,200/3,200 texts"]]
        table.update_cell("job", "a", "ok")   # narrower again, to what it shows
        await pilot.pause()
        assert drawn_cells(table) == [["a", "b"], ["ok", "3,200/3,200 texts"]]
        assert table.columns["a"].width == 2
        table.clear()   # refilled with shorter rows: narrower too
        table.add_row("x", "y")
        await pilot.pause()
        assert drawn_cells(table) == [["a", "b"], ["x", "y"]]
        assert [column.width for column in table.columns.values()] == [1, 1]


@run_async
async def test_a_table_too_narrow_for_its_cells_cuts_the_widest_with_an_ellipsis():
    from rich.text import Text

    app = _one_table(20)
    async with app.run_test(size=(40, 6)) as pilot:
        table = app.query_one("#t")
        table.add_row("score", Text("a text far too long for the table", "bold"))
        await pilot.pause()
        assert drawn_cells(table) == [["a", "b"], ["score", "a text far …"]]
        assert table.virtual_size.width <= table.size.width   # no horizontal scrolling
        assert table.get_row_at(0)[1].plain == "a text far too long for the table"  # kept whole


@run_async
async def test_table_cells_are_plain_text_not_markup():
    # cells hold what users wrote: `[/r/news]` read as markup crashed the table, `[b]` vanished
    app = _one_table(60)
    async with app.run_test(size=(60, 6)) as pilot:
        table = app.query_one("#t")
        table.add_row("see [/r/news]", "a [b] c", key="text")
        await pilot.pause()
        assert drawn_cells(table) == [["a", "b"], ["see [/r/news]", "a [b] c"]]
        table.update_cell("text", "b", "[bold]not bold[/bold]")
        await pilot.pause()
        assert drawn_cells(table)[1] == ["see [/r/news]", "[bold]not bold[/bold]"]
