"""The environment check: whether what kiwb.toml names exists on this machine (teacher and
student folders, data files), and whether each local teacher can batch texts
(kiwb.project.padding). It returns the problems instead of raising, so the workbench
opens on a project whose teacher folder vanished and shows the problem where it is."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kiwb.errors import ConfigError
from kiwb.project.config_checks import _Loc, _walk
from kiwb.project.config_schema import ProjectConfig, hub_dataset, is_hub_id, rules_of
from kiwb.project.padding import unpaddable_problem

_PATH_FIX = {
    "data": "point it at a csv, jsonl, json or parquet file, a folder saved by datasets' "
    'save_to_disk, or a Hub data set as "hf://datasets/ORG/NAME"',
    "model": 'point it at a Hugging Face checkpoint folder or a hub id like "org/model"',
}



@dataclass(frozen=True)
class Problem:
    """Something kiwb.toml names that is not there: the key, and the one-line message."""

    key: str  # "teachers[1].path", "[data.unlabeled] path"
    message: str  # the whole line: file, key, what is wrong and the fix

    @property
    def teacher(self) -> int | None:
        """The 1-based number of the [[teachers]] entry the problem is in, if any."""
        if not self.key.startswith("teachers["):
            return None
        return int(self.key[len("teachers["):self.key.index("]")])


def environment_problems(config: ProjectConfig) -> list[Problem]:
    """Every path setting whose file or folder is missing (hub ids are not checked), and
    every local teacher that has no way to pad a batch."""
    problems = []
    for f, value, loc in _walk(config, _Loc(config.file)):
        kind = rules_of(f).path
        if kind is None or value is None or (kind == "model" and is_hub_id(value, config.root)):
            continue
        if kind == "data" and hub_dataset(value) is not None:  # the Hub's: read when loaded
            continue
        resolved = config.resolve(value, allow_hub_id=False)
        key = loc.key(f.name)
        if not os.path.exists(resolved):
            problems.append(Problem(key, f"{config.file}: {key}: {resolved} does not exist; "
                                         f"{_PATH_FIX[kind]}"))
        elif kind == "model" and not os.path.isdir(resolved):
            problems.append(Problem(key, f"{config.file}: {key}: {resolved} is a file; "
                                         f"{_PATH_FIX[kind]}"))
    for number, teacher in enumerate(config.teachers, 1):
        if any(problem.teacher == number for problem in problems) or is_hub_id(teacher.path, config.root):
            continue
        folder = Path(config.resolve(teacher.path, allow_hub_id=False))
        if problem := unpaddable_problem(teacher.name, folder):
            problems.append(Problem(f"teachers[{number}].path", f"{config.file}: {problem}"))
    return problems


def require_environment(config: ProjectConfig) -> ProjectConfig:
    """The config, or ConfigError with the first environment problem."""
    problems = environment_problems(config)
    if problems:
        raise ConfigError(problems[0].message)
    return config
