"""Routing from the teachers' representations (issue 42), measured on a scored project: shared
by routing.py (debian-8) and many_teachers.py (three to five teachers, teachers that differ).

Every figure is routing accuracy: the share of texts whose top-scored teacher knows the gold
label. Routings are fitted on the pool (label-free) and measured on dev and test; settings are
chosen on dev. Nothing here trains: the representations are read from the projects' stores
(`kiwb score` keeps them, or adds them to scores made before, one forward per text).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout's kiwb

# The grid the settings are chosen from on dev (kiwb.core.representation_routing's defaults
# are the chosen ones).
REFITS = (0, 1, 2, 3)
SHRINKAGE = (0.01, 0.1, 0.3, 0.6, 0.8)
SEED_SHARE = (0.1, 0.3, 0.6, 1.0)
NEIGHBOURS = (5, 10, 20)
RELATIVE = (False, True)


def scores_of(project: Path, role: str, representation: bool = True):
    """A project's scores of one data set, with the teachers' representations."""
    from kiwb.kinds.sequence.integration import scores_from_tasks
    from kiwb.project.config import load_config
    from kiwb.project.store import Store
    from kiwb.workers.score import plan_scoring

    config = load_config(project)
    with Store(project / "store.sqlite") as store:
        tasks = [task for task in plan_scoring(config, store) if task.dataset == role]
        return scores_from_tasks(config, store, tasks, representation)


def seen_of(project: Path):
    """The seen references of a project whose kiwb.toml names seen files (scored)."""
    from kiwb.project.config import load_config
    from kiwb.project.store import Store
    from kiwb.workers.representation_sets import seen_references
    from kiwb.workers.score import plan_scoring

    config = load_config(project)
    with Store(project / "store.sqlite") as store:
        teachers = [t.teacher for t in plan_scoring(config, store) if t.dataset == "unlabeled"]
        return seen_references(config, store, teachers)[0]


def accuracy(scores, routing_scores) -> float:
    from kiwb.core import integration as integ

    return float(integ.routing_accuracy(routing_scores, scores.true_label_ids(), scores.coverage))


def fitted_scores(name: str, pool, splits: dict, settings=None, seen=None) -> dict:
    """Routing scores of each split under routing `name` fitted on the pool."""
    from kiwb.core import routing as routes

    fitted = routes.fit_routing(name, pool.features(), seen=seen, representation=settings)
    return {split: scores.routing_scores(fitted) for split, scores in splits.items()}


def measured(scores_by_split: dict, splits: dict) -> dict:
    return {split: accuracy(splits[split], found) for split, found in scores_by_split.items()}


def sweep(pool, splits: dict, seen=None) -> dict:
    """Every setting of the grid for mahalanobis and knn: {name: {dev, test, settings}}."""
    from kiwb.core.representation_routing import RepresentationSettings

    found = {}
    for refits, shrinkage, share, relative in itertools.product(REFITS, SHRINKAGE, SEED_SHARE,
                                                                RELATIVE):
        if seen is not None and share != SEED_SHARE[1]:
            continue  # seen texts replace the seeds: the share does not apply
        # on seen texts the shrinkage swept is the seen references' own
        settings = RepresentationSettings(seed_share=share, shrinkage=shrinkage, refits=refits,
                                          relative=relative, seen_shrinkage=shrinkage)
        name = (f"mahalanobis{' relative' if relative else ''} refits={refits} "
                f"shrinkage={shrinkage} seeds={share}")
        found[name] = {**measured(fitted_scores("mahalanobis", pool, splits, settings, seen), splits),
                       "settings": dataclasses.asdict(settings), "routing": "mahalanobis"}
    for refits, k, share in itertools.product(REFITS, NEIGHBOURS, SEED_SHARE):
        if seen is not None and share != SEED_SHARE[1]:
            continue
        settings = RepresentationSettings(knn_seed_share=share, neighbours=k, refits=refits)
        name = f"knn refits={refits} k={k} seeds={share}"
        found[name] = {**measured(fitted_scores("knn", pool, splits, settings, seen), splits),
                       "settings": dataclasses.asdict(settings), "routing": "knn"}
    return found


def best_on_dev(rows: dict, routing: str) -> str:
    return max((name for name, row in rows.items() if row["routing"] == routing),
               key=lambda name: rows[name]["dev"])


def combinations(pool, splits: dict) -> dict:
    """The default mahalanobis beside the MC-dropout signal: the mean of the
    two routings' per-teacher scores (both quantiles in [0, 1])."""
    maha = fitted_scores("mahalanobis", pool, splits)
    found = {}
    for other in ("rank", "class-rank"):
        theirs = fitted_scores(other, pool, splits)
        found[f"mahalanobis + {other} (mean of the two scores)"] = measured(
            {split: (maha[split] + theirs[split]) / 2 for split in splits}, splits)
    return found


def class_routed(scores, routing_scores, label: str) -> float | None:
    """Share of the texts of gold class `label` routed to a teacher that has it."""

    true_ids = scores.true_label_ids()
    if label not in scores.labels:
        return None
    mine = true_ids == scores.labels.index(label)
    if not bool(mine.any()):
        return None
    routed = routing_scores.argmax(1)
    return float(scores.coverage[routed[mine], true_ids[mine]].float().mean()) if len(routed) else None


def default_rows(pool, splits: dict, seen=None) -> dict:
    """The label-free routings at kiwb's settings, with each one's test wins and per-class
    routed recall: rank and class-rank (MC), energy, mahalanobis, knn (and, with `seen`,
    mahalanobis and knn on the seen texts)."""
    rows = {}
    names = ["rank", "class-rank", "energy", "mahalanobis", "knn"]
    for name in names:
        found = fitted_scores(name, pool, splits)
        rows[name] = {**measured(found, splits), "per_class_test": per_class(splits["test"], found["test"])}
    if seen is not None:
        for name in ("mahalanobis", "knn"):
            found = fitted_scores(name, pool, splits, seen=seen)
            rows[f"{name} · seen"] = {**measured(found, splits),
                                      "per_class_test": per_class(splits["test"], found["test"])}
    return rows


def per_class(scores, routing_scores) -> dict:
    return {label: class_routed(scores, routing_scores, label) for label in scores.labels}


def percent(value) -> str:
    return "" if value is None else f"{100 * value:.1f}"


def render_rows(rows: dict, title: str) -> list[str]:
    lines = [f"| {title} | dev (%) | test (%) |", "|---|---|---|"]
    lines += [f"| {name} | {percent(row['dev'])} | {percent(row['test'])} |" for name, row in rows.items()]
    return lines


def save(path: Path, results: dict) -> None:
    path.write_text(json.dumps(results, indent=2))


def render_columns(columns: dict[str, dict], mail: bool = False) -> list[str]:
    """One table of the representation routings with a column per setting (N teachers, a
    pairing): kiwb's settings, then the best of the grid on dev; dev / test each."""
    shown = {name: entry for name, entry in columns.items() if entry}
    if not shown:
        return []
    lines = ["| routing (dev / test, %) | " + " | ".join(shown) + " |",
             "|---|" + "---|" * len(shown)]
    names = list(dict.fromkeys(name for entry in shown.values() for name in entry["defaults"]))
    for name in names:
        cells = [f"{percent(row['dev'])} / {percent(row['test'])}" if (row := entry["defaults"].get(name))
                 else "" for entry in shown.values()]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for routing in ("mahalanobis", "knn"):
        cells = []
        for entry in shown.values():
            best = best_on_dev(entry["grid"], routing)
            cells.append(f"{percent(entry['grid'][best]['dev'])} / "
                         f"{percent(entry['grid'][best]['test'])} ({best.split(' ', 1)[1]})")
        lines.append(f"| {routing}, best settings on dev | " + " | ".join(cells) + " |")
    for name in next(iter(shown.values())).get("combinations", {}):
        cells = [f"{percent(entry['combinations'][name]['dev'])} / "
                 f"{percent(entry['combinations'][name]['test'])}" for entry in shown.values()]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def auto_rows(pool, splits: dict) -> dict:
    """`routing = "auto"` as kiwb integrates it (kiwb.kinds.sequence.routing_choice): chosen on
    dev's labels, and without labels; each row names the routing chosen."""
    from kiwb.core import routing as routes
    from kiwb.kinds.sequence.routing_choice import choose_routing
    from kiwb.project.records import IntegrationSettings

    rows = {}
    for label, labeled in (("eval labels", splits["dev"]), ("no labels", None)):
        settings, choice = choose_routing(IntegrationSettings(routing="auto"), pool, labeled,
                                          "dev")
        fitted = routes.fit_routing(settings.routing, pool.features(), use_mc=settings.use_mc,
                                    teacher_names=pool.teachers)
        rows[f"auto ({label}: {choice.chosen})"] = {
            split: accuracy(scores, scores.routing_scores(fitted)) for split, scores in splits.items()}
    return rows
