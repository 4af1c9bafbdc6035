"""The sequence kind's runtime (kiwb.kinds.runtime.KindRuntime): its texts are scored, read,
integrated (integration.py), trained (training.py, student.py), evaluated and asked by the
shared classifier code paths that the other kinds build on."""

from __future__ import annotations

from kiwb.kinds.runtime import RuntimeDefaults
from kiwb.kinds.sequence import KIND
from kiwb.kinds.sequence.data import load_role_table


class SequenceRuntime(RuntimeDefaults):
    """Its data sets and checks are read at import (no torch: the CLI's data and label
    commands use them); each of its jobs' methods imports its torch work on first call."""

    kind = KIND
    load_table = staticmethod(load_role_table)

    def score_shard(self, task, model, tokenizer, rows, settings, device, **options):
        from kiwb.kinds.sequence.scoring import score_task_rows

        return score_task_rows(task, model, tokenizer, rows, settings, device, **options)

    def integrate(self, config, store, settings, tasks):
        from kiwb.kinds.sequence.integration import integrate_texts

        return integrate_texts(config, store, settings, tasks)

    def prepare_training(self, config, store, request, tasks):
        from kiwb.kinds.sequence.training import prepare_texts

        return prepare_texts(config, store, request, tasks)

    def evaluate(self, checkpoint, table, device, batch_size, max_length):
        from kiwb.kinds.sequence.student import evaluate_classifier

        return evaluate_classifier(checkpoint, table, device, batch_size, max_length)

    def predict(self, folder, texts, top=3):
        from kiwb.kinds.sequence.student import predicted_labels

        return predicted_labels(folder, texts, top)
