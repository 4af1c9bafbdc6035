"""The multi-task kind's runtime (kiwb.kinds.runtime.KindRuntime): several tasks per text, each
scored, integrated and trained by its own pieces (the modules beside this one); its teachers
are read with the heads that answer its [[tasks]]."""

from __future__ import annotations

from kiwb.kinds.multitask import KIND
from kiwb.kinds.multitask.data import load_role_table
from kiwb.kinds.multitask.teachers import inspect_task_teachers
from kiwb.kinds.runtime import RuntimeDefaults


class MultiTaskRuntime(RuntimeDefaults):
    """Its data sets and checks are read at import (no torch: the CLI's data and label
    commands use them); each of its jobs' methods imports its torch work on first call."""

    kind = KIND
    load_table = staticmethod(load_role_table)
    inspect_teachers = staticmethod(inspect_task_teachers)

    def score_shard(self, task, model, tokenizer, rows, settings, device, **options):
        from kiwb.kinds.multitask.scoring import score_task_rows

        return score_task_rows(task, model, tokenizer, rows, settings, device, **options)

    def integrate(self, config, store, settings, tasks):
        from kiwb.kinds.multitask.integrate_job import run_task_integration

        return run_task_integration(config, store, settings, tasks)

    def prepare_training(self, config, store, request, tasks):
        from kiwb.kinds.multitask.training import prepare_multitask

        return prepare_multitask(config, store, request, tasks)

    def evaluate(self, checkpoint, table, device, batch_size, max_length):
        from kiwb.kinds.multitask.student import evaluate_classifier

        return evaluate_classifier(checkpoint, table, device, batch_size, max_length)

    def predict(self, folder, texts, top=3):
        from kiwb.kinds.multitask.predict import predicted_answers

        return predicted_answers(folder, texts, top)
