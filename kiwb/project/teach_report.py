"""`kiwb-teach.json`: the dev figures `kiwb teach` writes beside a teacher it trained.

A teacher that learned nothing (it never predicts some of its labels on dev) poisons every
integration it joins, so kiwb refuses it when it is added to a project or scored. Teachers
from elsewhere have no such file and are taken as they are.
"""

from __future__ import annotations

import json
from pathlib import Path

from kiwb.core.learning_check import LearningCheck
from kiwb.errors import ConfigError

REPORT_FILE = "kiwb-teach.json"
REPORT_FORMAT = 1


def report_payload(labels: list[str], metrics: dict, check: LearningCheck) -> dict:
    """What is written: the labels, the kept epoch's dev figures and the learning check."""
    figures = {key: metrics.get(key) for key in ("step", "accuracy", "macro_f1", "per_class_accuracy",
                                                  "num_texts")}
    return {"format": REPORT_FORMAT, "labels": labels, "dev": figures, "check": check.to_dict()}


def read_check(folder: Path) -> LearningCheck | None:
    """The learning check recorded with a checkpoint, or None (no report, or unreadable)."""
    try:
        report = json.loads((Path(folder) / REPORT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return LearningCheck.from_dict(report.get("check")) if isinstance(report, dict) else None


def refuse_untrained_teacher(config, teacher) -> None:
    """Refuse adding a local teacher whose kiwb-teach.json says it learned nothing."""
    from kiwb.project.config_schema import is_hub_id

    if is_hub_id(teacher.path, config.root):
        return
    problem = untrained_teacher_problem(teacher.name, Path(config.resolve(teacher.path, allow_hub_id=False)))
    if problem:
        raise ConfigError(problem)


def untrained_teacher_problem(name: str, folder: Path) -> str | None:
    """One line refusing a teacher whose own dev figures say it learned nothing; else None."""
    check = read_check(folder)
    if check is None or check.learned:
        return None
    return (f"teacher {name!r}: {folder}/{REPORT_FILE} says it has collapsed classes: "
            f"{check.problem}; {check.hint}, or remove it from the project (to use it anyway, "
            f"delete {REPORT_FILE})")
