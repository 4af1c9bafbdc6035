"""`kiwb init / score / integrate` end to end through the real CLI on tiny real teachers."""

from __future__ import annotations

import json
import signal
import time

import numpy as np
import pytest
from cli_helpers import run_kiwb, start_kiwb, write_project
from tiny import make_texts, write_jsonl

from kiwb.project.config import load_config
from kiwb.project.paths import ProjectPaths
from kiwb.project.shards import SCORES_ONLY
from kiwb.project.store import Store


def _score_sets(root, holding: str = "scores"):
    """The MC score sets (`holding` "representations": the teachers' representation sets)."""
    where = SCORES_ONLY if holding == "scores" else f"NOT ({SCORES_ONLY})"
    with Store(ProjectPaths(root).store) as store:
        rows = store._db.execute("SELECT key, teacher, dataset, num_texts, num_shards FROM "
                                 f"score_sets WHERE {where}")
        return [dict(row) for row in rows]


def _arrays(root, key, num_shards):
    paths = ProjectPaths(root)
    parts = [np.load(paths.shard_file(key, shard)) for shard in range(num_shards)]
    return {name: np.concatenate([p[name] for p in parts]) for name in parts[0].files}


@pytest.fixture
def project(tmp_path, teachers_dir, data_dir):
    run_kiwb("init", "proj", "--teacher", f"a={teachers_dir / 'teacher_a'}",
             "--teacher", f"b={teachers_dir / 'teacher_b'}", "--unlabeled", data_dir / "unlabeled.jsonl",
             "--eval", data_dir / "eval.jsonl", cwd=tmp_path)
    config = tmp_path / "proj" / "kiwb.toml"
    text = config.read_text().replace("mc_passes = 16", "mc_passes = 4").replace("shard_size = 2048", "shard_size = 20")
    config.write_text(text)
    return tmp_path / "proj"


@pytest.mark.slow
def test_init_score_integrate(project):
    assert load_config(project).scoring.mc_passes == 4
    scored = run_kiwb("score", project, cwd=project.parent)
    assert "Done" in scored.stderr

    sets = _score_sets(project)
    assert sorted((s["teacher"], s["dataset"]) for s in sets) == [
        ("a", "eval"), ("a", "unlabeled"), ("b", "eval"), ("b", "unlabeled")]
    # beside them, each teacher's representation of the same texts, kept from the same pass
    kept = _score_sets(project, "representations")
    assert sorted((s["teacher"], s["dataset"], s["num_texts"]) for s in kept) == [
        ("a", "eval (representation)", 32), ("a", "unlabeled (representation)", 48),
        ("b", "eval (representation)", 32), ("b", "unlabeled (representation)", 48)]
    for record in kept:
        arrays = _arrays(project, record["key"], record["num_shards"])
        assert list(arrays) == ["representation", "rows"]  # the rows: checked when read
        assert len(arrays["representation"]) == record["num_texts"]
        assert arrays["rows"].tolist() == list(range(record["num_texts"]))
    for record in sets:
        arrays = _arrays(project, record["key"], record["num_shards"])
        assert arrays["rows"].tolist() == list(range(record["num_texts"]))  # one score per text
        np.testing.assert_allclose(arrays["det_probs"].sum(-1), 1.0, atol=1e-5)
        np.testing.assert_allclose(arrays["mc_probs"].sum(-1), 1.0, atol=1e-5)
        assert ((arrays["mc_confidence"] >= 0) & (arrays["mc_confidence"] <= 1)).all()
        assert (arrays["mutual_information"] >= 0).all()
        assert arrays["det_logits"].shape == (record["num_texts"], 2)

    again = run_kiwb("score", project, cwd=project.parent)
    assert "up to date" in again.stderr

    summary = json.loads(run_kiwb("integrate", project, "--json", cwd=project.parent).stdout)
    assert summary["labels"] == ["sports", "politics", "music", "cooking"]
    assert sum(summary["wins"].values()) == summary["num_texts"] == 48
    # each teacher's facts in one record, the score set it read among them; the per-teacher
    # mappings scripts read before are printed beside it, made from it
    facts = summary["per_teacher"]
    assert {each["name"]: each["score_key"] for each in facts} == {
        found["teacher"]: found["key"] for found in sets if found["dataset"] == "unlabeled"}
    assert summary["teachers"] == [each["name"] for each in facts]
    for view, fact in (("score_keys", "score_key"), ("wins", "wins"), ("teacher_labels", "labels"),
                       ("teacher_dropout", "dropout")):
        assert summary[view] == {each["name"]: each[fact] for each in facts}, view
    assert summary["routing"]["teachers"] == {
        each["name"]: {"won": each["wins"], **each["routing"]} for each in facts}
    assert 0 <= summary["conflicts"] <= 48
    routing = summary["eval"]["routing_accuracy"]
    assert set(routing) == {"mc_dropout", "plain_confidence", "chosen"}  # named once, below
    # the project sets none: auto, which names the routing it chose
    assert summary["routing_choice"]["routing"] == summary["routing"]["name"] != "auto"

    shard_times = {p: p.stat().st_mtime_ns for p in ProjectPaths(project).scores.rglob("*.npz")}
    soft = json.loads(run_kiwb("integrate", project, "--method", "muki-soft", "--tau", "0.5",
                               "--json", cwd=project.parent).stdout)
    assert soft["num_texts"] == 48
    assert {p: p.stat().st_mtime_ns for p in ProjectPaths(project).scores.rglob("*.npz")} == shard_times

    table = run_kiwb("integrate", project, cwd=project.parent).stdout
    assert "texts won" in table and "routing accuracy on eval" in table
    _every_reader_takes_what_the_jobs_recorded(project, summary["key"])


def _every_reader_takes_what_the_jobs_recorded(project, key):
    """What the real score and integrate jobs stored, read back through the typed records by
    every reader: a key spelt differently on either side fails here."""
    from rich.console import Console

    from kiwb.project.queries import feed_events, teacher_views
    from kiwb.project.records import IntegrationRecord, ScoreJobSummary
    from kiwb.report import integration_tables
    from kiwb.tui.history import ScoreHistograms
    from kiwb.tui.panes.accuracy import baseline_rows
    from kiwb.tui.panes.jobs import integration_note
    from kiwb.tui.panes.uncertainty import accuracy_line, split_line

    with Store(ProjectPaths(project).store) as store:
        stored = store.integration(key)
        record = IntegrationRecord.from_dict(stored)
        assert record.to_dict() == stored  # the exact JSON, both ways
        summary = record.summary
        assert set(summary.score_keys) == {"a", "b"}
        views = teacher_views(project, store, record, 0)
        histograms = ScoreHistograms()
        assert all([histograms.add(event) for event in feed_events(store, 0)
                    if event["data"].get("dataset") == "unlabeled"])
        score_jobs = [job for job in store.jobs.all() if job.kind == "score"]
        endings = [ScoreJobSummary.from_dict(job.ending) for job in score_jobs]
    assert [view.teacher for view in views] == ["a", "b"]
    assert [h.key for h in histograms.teachers()] == [summary.score_keys["a"], summary.score_keys["b"]]
    assert [h.texts for h in histograms.teachers()] == [48, 48]
    assert endings[0].texts == 160 and endings[0].precision == "float32"
    assert endings[0].to_dict().items() <= score_jobs[0].ending.items()  # beside the job's own
    console = Console(width=200, record=True, file=None)
    for table in integration_tables(record):
        console.print(table)
    assert "texts won" in console.export_text()
    for facts in summary.per_teacher:
        assert split_line(facts, summary.num_texts).startswith(f"{facts.name}: won {facts.wins}")
    assert f"routing accuracy: {summary.routed_by} " in accuracy_line(
        summary.eval.routing_accuracy, summary.routed_by)
    assert set(baseline_rows(summary)) == {":ensemble", ":teacher:a", ":teacher:b"}
    chosen = summary.routing_choice.chosen  # the project sets no routing: auto chose one
    assert integration_note(summary).startswith(f"integrated 48 texts with {chosen} routing "
                                                "chosen by auto")


@pytest.mark.slow
def test_changed_teacher_is_rescored(project, teachers_dir, tmp_path):
    import shutil

    import torch
    from transformers import AutoModelForSequenceClassification

    changed = tmp_path / "teacher_b_changed"
    shutil.copytree(teachers_dir / "teacher_b", changed)
    config = project / "kiwb.toml"
    config.write_text(config.read_text().replace(str(teachers_dir / "teacher_b"), str(changed)))
    run_kiwb("score", project, cwd=tmp_path)
    assert "up to date" in run_kiwb("score", project, cwd=tmp_path).stderr

    model = AutoModelForSequenceClassification.from_pretrained(changed)
    with torch.no_grad():
        model.classifier.out_proj.bias += 0.5
    model.save_pretrained(changed)
    rescored = run_kiwb("score", project, cwd=tmp_path)
    assert "Scoring 80 text" in rescored.stderr  # teacher b only: 48 unlabeled + 32 eval


@pytest.mark.slow
def test_killed_scoring_resumes_without_loss_or_duplicates(tmp_path, teachers_dir):
    data = write_jsonl(tmp_path / "pool.jsonl", [{"text": r["text"]} for r in make_texts(900, seed=3)])
    teachers = {"a": teachers_dir / "teacher_a", "b": teachers_dir / "teacher_b"}
    killed = write_project(tmp_path / "killed", teachers, data, scoring="mc_passes = 8\nshard_size = 30\n")
    reference = write_project(tmp_path / "reference", teachers, data, scoring="mc_passes = 8\nshard_size = 30\n")

    worker = start_kiwb("score", killed, "--foreground", cwd=tmp_path, log=tmp_path / "score.log")
    deadline = time.time() + 120
    while time.time() < deadline:
        if ProjectPaths(killed).store.exists() and _done_shards(killed) >= 3:
            break
        time.sleep(0.05)
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    total = sum(s["num_shards"] for s in _score_sets(killed))
    done_before = _done_shards(killed)
    assert 3 <= done_before < total, "the kill must land mid-way"
    # What a kill during a shard's write leaves: a staging file beside the unwritten shard.
    with Store(ProjectPaths(killed).store) as store:
        key, shard = next((record["key"], shard) for record in _score_sets(killed)
                          for shard in range(record["num_shards"])
                          if shard not in store.done_shards(record["key"]))
    unwritten = ProjectPaths(killed).shard_file(key, shard)
    unwritten.parent.mkdir(parents=True, exist_ok=True)
    (unwritten.parent / f".{unwritten.name}.k1ll3d0x.tmp").write_bytes(b"half a shard")

    resumed = run_kiwb("score", killed, cwd=tmp_path)
    remaining = int(resumed.stderr.split("Scoring ")[1].split(" ")[0].replace(",", ""))
    assert remaining == 2 * 900 - done_before * 30
    run_kiwb("score", reference, cwd=tmp_path)

    for record in _score_sets(killed):
        arrays = _arrays(killed, record["key"], record["num_shards"])
        assert arrays["rows"].tolist() == list(range(900))
        folder = ProjectPaths(killed).shard_file(record["key"], 0).parent
        assert not [path.name for path in folder.iterdir() if path.name.startswith(".")]
        expected = _arrays(reference, record["key"], record["num_shards"])
        # Per-shard seeding: a resumed run reproduces an uninterrupted one exactly.
        for name in ("mc_probs", "mc_confidence", "det_probs"):
            np.testing.assert_allclose(arrays[name], expected[name], rtol=0, atol=1e-6)
    # the representations kept beside them: every text once, as an uninterrupted run keeps them
    # (one the kill caught between a shard and its representation is added on request)
    run_kiwb("score", killed, "--representations", cwd=tmp_path)
    for record in _score_sets(killed, "representations"):
        arrays = _arrays(killed, record["key"], record["num_shards"])
        expected = _arrays(reference, record["key"], record["num_shards"])
        np.testing.assert_array_equal(arrays["representation"], expected["representation"])


def _done_shards(root) -> int:
    """Finished shards of the MC score sets."""
    with Store(ProjectPaths(root).store) as store:
        return store._db.execute(
            "SELECT COUNT(*) FROM score_shards JOIN score_sets ON key = score_key WHERE "
            f"status='done' AND {SCORES_ONLY}").fetchone()[0]
