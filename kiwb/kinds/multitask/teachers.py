"""Reading a multi-task project's teachers: each is checked as any teacher is (a single-label
or multi-label classifier, or a kiwb multi-task model), then its heads are matched to the
project's [[tasks]] by name. Every refusal is one line naming the teacher, task and fix."""

from __future__ import annotations

import dataclasses
import json

from kiwb.errors import TeacherError
from kiwb.kinds.multitask.heads import (
    KIND_OF_TASK,
    TASK_OF_KIND,
    Head,
    heads_of_config,
    output_name,
)
from kiwb.project.config import ProjectConfig, TaskConfig, TeacherConfig
from kiwb.workers.teachers import TeacherInfo, inspect_teacher

KIND = "multi-task"


def inspect_task_teachers(config: ProjectConfig) -> list[TeacherInfo]:
    """Every teacher of a multi-task project, with the heads that answer its tasks."""
    tasks = {task.name: task for task in config.tasks}
    return [task_teacher(config, teacher, tasks) for teacher in config.teachers]


def task_teacher(config: ProjectConfig, teacher: TeacherConfig,
                 tasks: dict[str, TaskConfig]) -> TeacherInfo:
    info = inspect_teacher(
        teacher.name, config.resolve(teacher.path),
        list(teacher.labels) if teacher.labels is not None else None,
        teacher.trust_remote_code, teacher.tag_scheme,
        list(teacher.types) if teacher.types is not None else None, teacher.problem_type)
    available = checkpoint_heads(info)
    if None in available and len(teacher.tasks) > 1:
        raise TeacherError(f"teacher {teacher.name!r} has one head (it is no multi-task model) and "
                           f"cannot answer {len(teacher.tasks)} tasks ({', '.join(teacher.tasks)}): "
                           "name the one task it answers in tasks = [...]")
    wanted = teacher.heads or teacher.tasks
    heads = []
    for task_name, head_name in zip(teacher.tasks, wanted, strict=True):
        head = _head_named(info, available, head_name, task_name, teacher.heads is not None)
        heads.append(_checked(info.name, dataclasses.replace(head, task=task_name),
                              tasks[task_name]))
    # what labels of it a label given in the workbench may name: "task/label"
    classes = tuple(output_name(head.task, label) for head in heads for label in head.labels)
    return dataclasses.replace(info, kind=KIND, heads=tuple(heads), classes=classes)


def checkpoint_heads(info: TeacherInfo) -> dict[str | None, Head]:
    """A teacher's heads by name: a multi-task model's from its task_heads, or a one-head
    classifier's one head (named None: it answers whichever task it is mapped to)."""
    if info.kind == KIND:
        model_config = json.loads((info.folder / "config.json").read_text(encoding="utf-8"))
        try:
            heads = heads_of_config(model_config, info.labels)
        except ValueError as error:
            raise TeacherError(f"teacher {info.name!r}: {info.folder} {error}") from None
        return {head.task: head for head in heads}
    if info.kind not in TASK_OF_KIND:
        raise TeacherError(f"teacher {info.name!r} is a {info.kind} model; a multi-task project's "
                           "tasks are single-label or multi-label text classification (token-level "
                           "tasks are not supported): remove it from the project")
    return {None: Head("", TASK_OF_KIND[info.kind], tuple(info.labels), 0, len(info.labels))}


def _head_named(info: TeacherInfo, available: dict, head_name: str, task: str,
                explicit: bool) -> Head:
    if None in available:  # one head: mapped to one task, under no name of its own
        if explicit:
            raise TeacherError(f"teacher {info.name!r} has one head (it is no multi-task model), "
                               "so heads = [...] does not apply: remove heads from its "
                               "[[teachers]] entry")
        return available[None]
    if head_name not in available:
        named = ", ".join(name for name in available)
        fix = ("name the head for it with heads = [...]" if not explicit
               else "fix the name in heads = [...]")
        raise TeacherError(f"teacher {info.name!r} has no head {head_name!r} for task {task!r} "
                           f"(its heads: {named}); {fix}")
    return available[head_name]


def _checked(teacher: str, head: Head, task: TaskConfig) -> Head:
    """A head may answer a task of its own kind, with labels the task has (when it lists them)."""
    if head.kind != task.kind:
        fix = ('set problem_type = "multi_label_classification" in its [[teachers]] entry if its '
               "head is a sigmoid one" if task.kind == "multi-label" else
               "map it to a multi-label task")
        raise TeacherError(f"teacher {teacher!r}: its head for task {task.name!r} is {head.kind} "
                           f"but the task is {task.kind}; {fix}")
    if task.kind == "single-label" and len(head.labels) < 2:
        raise TeacherError(f"teacher {teacher!r}: its head for task {task.name!r} has "
                           f"{len(head.labels)} label; a single-label head needs two or more")
    if task.labels is not None:
        unknown = [label for label in head.labels if label not in task.labels]
        if unknown:
            raise TeacherError(
                f"teacher {teacher!r}: its head for task {task.name!r} has {len(head.labels)} "
                f"labels, {', '.join(map(repr, unknown[:3]))} not among the task's "
                f"{len(task.labels)} ({', '.join(task.labels)}); add them to the task's labels, "
                "or rename the teacher's with labels = [...]")
    return head


def task_teachers(teachers: list[TeacherInfo], task: str) -> list[tuple[TeacherInfo, Head]]:
    """The teachers that answer `task`, each with its head for it, in project order."""
    return [(teacher, head) for teacher in teachers for head in teacher.heads
            if head.task == task]


def task_labels(task: TaskConfig, teachers: list[tuple[TeacherInfo, Head]]) -> list[str]:
    """The task's labels: as kiwb.toml lists them, or its teachers' union in teacher order."""
    if task.labels is not None:
        return list(task.labels)
    return list(dict.fromkeys(label for _, head in teachers for label in head.labels))


def union_heads(config: ProjectConfig, teachers: list[TeacherInfo]) -> tuple[Head, ...]:
    """The student's output slices: one per task, in kiwb.toml order, over the task's labels."""
    from kiwb.kinds.multitask.heads import laid_out

    return laid_out([(task.name, task.kind, task_labels(task, task_teachers(teachers, task.name)))
                     for task in config.tasks])


__all__ = ["KIND_OF_TASK", "checkpoint_heads", "inspect_task_teachers", "task_labels",
           "task_teachers", "union_heads"]
