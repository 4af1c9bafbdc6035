"""A training run learns from the integration `kiwb integrate` recorded: it finds it by its key,
reads the targets kept beside it (kiwb.workers.integration_targets) and pins the key in its
manifest; where none is recorded for its inputs, it works it out the same way without recording
it (the workbench shows the integrations a user made)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import torch
from cli_helpers import run_kiwb

from kiwb.project.labels import give_label
from kiwb.project.paths import ProjectPaths
from kiwb.project.records import IntegrationSettings
from kiwb.project.store import Store
from kiwb.project.teacher_kinds import load_project
from kiwb.workers.checkpoints import write_manifest
from kiwb.workers.integrate import run_integration
from kiwb.workers.integration_targets import load_targets, save_targets
from kiwb.workers.train import prepare
from kiwb.workers.training_data import TrainRequest


@pytest.fixture
def project(scored_project, tmp_path) -> Path:
    """A private copy of the shared scored project, with no integration recorded."""
    copy = shutil.copytree(scored_project, tmp_path / "proj",
                           ignore=shutil.ignore_patterns("runs", "exports", "integrations"))
    with Store(ProjectPaths(copy).store) as store, store.transaction() as db:
        db.execute("DELETE FROM integrations")
    return copy


def _settings(project: Path, **values) -> IntegrationSettings:
    return IntegrationSettings.from_project(load_project(project), **values)


def _integrate(project: Path, settings: IntegrationSettings):
    with Store(ProjectPaths(project).store) as store:
        return run_integration(load_project(project), store, settings)


def _prepare(project: Path, settings: IntegrationSettings):
    loaded = load_project(project)
    with Store(ProjectPaths(project).store) as store:
        return prepare(loaded.config, store, TrainRequest(run="r", settings=settings), loaded.kind)


def _integrations(project: Path) -> list[tuple[str, float]]:
    with Store(ProjectPaths(project).store) as store:
        return [tuple(row) for row in store.connection.execute(
            "SELECT key, created_at FROM integrations ORDER BY created_at")]


def test_training_reads_the_targets_kiwb_integrate_kept_and_pins_its_key(project):
    settings = _settings(project)
    record = _integrate(project, settings)
    kept = load_targets(project, record.key)
    assert kept["targets"].shape == (160, 4) and kept["weights"].shape == (160,)

    data = _prepare(project, settings)
    assert data.manifest["integration"] == record.key
    assert torch.equal(data.targets, kept["targets"]) and torch.equal(data.weights, kept["weights"])
    assert _integrations(project) == [(record.key, record.created_at)]  # read, not made again
    # the routing's check, funnel and eval figures are the integration's own
    assert data.manifest["routing_check"] == record.summary.check.to_dict()
    assert data.manifest["class_funnel"] == record.summary.funnel.to_dict()
    assert data.eval_routing == record.summary.eval.routing_accuracy.to_dict()

    # what the run learns is what the file holds: changed there, changed in the run
    flipped = kept["targets"].flip(1)
    save_targets(project, record.key, {"targets": flipped, "weights": kept["weights"]})
    assert torch.equal(_prepare(project, settings).targets, flipped)


def test_a_run_with_no_integration_recorded_learns_the_one_kiwb_integrate_would_record(project):
    settings = _settings(project)
    data = _prepare(project, settings)
    key = data.manifest["integration"]
    assert _integrations(project) == []  # nothing recorded behind the user's back
    assert not ProjectPaths(project).integration_file(key).exists()

    record = _integrate(project, settings)  # kiwb integrate afterwards: the same key and targets
    assert record.key == key and torch.equal(load_targets(project, key)["targets"], data.targets)
    assert data.manifest["routing_check"] == record.summary.check.to_dict()


@pytest.mark.parametrize("harm", ["removed", "cut short", "overwritten"])
def test_an_integration_kept_without_targets_is_made_again_under_its_key(project, harm):
    """A record from a kiwb that kept no targets, or whose file was removed or damaged, is
    integrated again, to the same key and the same targets."""
    settings = _settings(project)
    record = _integrate(project, settings)
    made = load_targets(project, record.key)["targets"]
    kept = ProjectPaths(project).integration_file(record.key)
    if harm == "removed":
        kept.unlink()
    elif harm == "cut short":
        kept.write_bytes(kept.read_bytes()[:200])
    else:
        kept.write_bytes(b"not an npz file")

    data = _prepare(project, settings)
    assert data.manifest["integration"] == record.key and torch.equal(data.targets, made)
    assert ProjectPaths(project).integration_file(record.key).exists()


def test_other_inputs_read_another_integration(project):
    """The integration is found by every input, not by its settings alone: a label given to a
    text after kiwb integrate makes a new one, and a new setting does too."""
    settings = _settings(project, labels=True)
    record = _integrate(project, settings)
    assert _prepare(project, settings).manifest["integration"] == record.key

    with Store(ProjectPaths(project).store) as store:
        text = store.connection.execute(
            "SELECT text FROM instances WHERE integration = ? ORDER BY margin LIMIT 1",
            (record.key,)).fetchone()[0]
        give_label(store.connection, text, None)  # marked none of these labels: left out of training
    data = _prepare(project, settings)
    assert data.manifest["integration"] != record.key
    assert len(data.texts) == 159 and text not in data.texts

    other = _prepare(project, _settings(project, conflict_threshold=0.5))
    assert other.manifest["integration"] not in {record.key, data.manifest["integration"]}
    assert [key for key, _ in _integrations(project)] == [record.key]


def test_eval_figures_are_read_only_from_an_integration_measured_on_this_eval_set(project):
    """The eval set is no input of the targets, so it is not in the key; a run reads the
    stored eval figures (and the check and funnel made with them) only while the eval texts
    and gold labels are those they were measured on, and integrates again otherwise. (With
    "auto", the default, the eval labels choose the routing: the key changes with them.)"""
    settings = _settings(project, routing="rank")
    record = _integrate(project, settings)
    config = project / "kiwb.toml"
    old_eval = Path(re.search(r'\[data\.eval\][^\[]*?path = "([^"]+)"', config.read_text())[1])
    rows = [json.loads(line) for line in old_eval.read_text().splitlines()]
    relabeled = [{**row, "label": rows[(i + 1) % len(rows)]["label"]} for i, row in enumerate(rows)]
    new_eval = project / "eval-relabeled.jsonl"
    new_eval.write_text("".join(json.dumps(row) + "\n" for row in relabeled))
    config.write_text(config.read_text().replace(str(old_eval), str(new_eval)))

    data = _prepare(project, settings)
    assert data.manifest["integration"] == record.key  # the same targets' key
    assert _integrations(project) == [(record.key, record.created_at)]  # left as it was
    remade = _integrate(project, settings)  # kiwb integrate on the relabeled eval set
    assert remade.key == record.key
    assert remade.summary.eval.measured_on != record.summary.eval.measured_on
    assert data.eval_routing == remade.summary.eval.routing_accuracy.to_dict()
    assert data.eval_routing != record.summary.eval.routing_accuracy.to_dict()


def test_store_prune_removes_the_targets_no_run_needs_and_a_run_makes_them_again(project):
    """`kiwb store prune` keeps the newest integration's targets and those a run pins, and
    removes the rest (older integrations', keys the store has no record of, a killed write's
    staging file); the records stay, and a run that reads a pruned integration works the same
    targets out again."""
    older = _integrate(project, _settings(project, conflict_threshold=0.2))
    pinned_settings = _settings(project, conflict_threshold=0.3)
    pinned = _integrate(project, pinned_settings)
    newest = _integrate(project, _settings(project, conflict_threshold=0.4))
    run = _prepare(project, pinned_settings)  # a run's manifest, as the trainer writes it
    write_manifest(ProjectPaths(project).run_dir("r"), run.manifest)
    folder = ProjectPaths(project).integrations
    (folder / "no-such-integration.npz").write_bytes(b"left by a restored store")
    (folder / f".{older.key}.npz.abcd1234.tmp").write_bytes(b"left by a killed write")
    before = load_targets(project, older.key)["targets"]
    every = sorted(path.name for path in folder.iterdir())

    dry = run_kiwb("store", "prune", project, "--dry-run", cwd=project)
    said = " ".join(dry.stdout.split())
    assert said.startswith("Would remove 3 files of integrations/ (") and "no run needs" in said
    assert sorted(path.name for path in folder.iterdir()) == every  # a dry run removes nothing
    with Store(ProjectPaths(project).store) as store:  # a live job may read a file: refused
        job = store.jobs.create("train", "live", {})
        store.jobs.claim(job, pid=os.getpid())
        refused = run_kiwb("store", "prune", project, cwd=project, check=False)
        store.jobs.end(job, "finished", {})
    assert refused.returncode == 2 and refused.stderr.startswith(
        f"kiwb: error: job {job} (train live") and refused.stderr.rstrip().endswith(
        "wait for it or kiwb cancel it, then prune")
    assert sorted(path.name for path in folder.iterdir()) == every

    done = run_kiwb("store", "prune", project, cwd=project)
    said = " ".join(done.stdout.split())
    assert said.startswith("Removed 3 files of integrations/ (")
    assert "kept 2: the newest integration; pinned by run r" in said
    assert sorted(path.name for path in folder.iterdir()) == sorted(
        [f"{pinned.key}.npz", f"{newest.key}.npz"])
    assert [key for key, _ in _integrations(project)] == [older.key, pinned.key, newest.key]
    assert run_kiwb("store", "prune", project, cwd=project).stdout.startswith("Nothing to remove")

    again = _prepare(project, _settings(project, conflict_threshold=0.2))
    assert again.manifest["integration"] == older.key and torch.equal(again.targets, before)
    assert ProjectPaths(project).integration_file(older.key).exists()  # kept back by the run
