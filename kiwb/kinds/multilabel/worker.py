"""The multi-label kind's runtime (kiwb.kinds.runtime.KindRuntime): sigmoid classifiers scored,
integrated, trained and evaluated per label, by the modules beside this one; gold data is
checked against the teachers' labels before scoring."""

from __future__ import annotations

from kiwb.kinds.multilabel import KIND
from kiwb.kinds.multilabel.data import check_tables, load_role_table
from kiwb.kinds.runtime import RuntimeDefaults


class MultiLabelRuntime(RuntimeDefaults):
    """Its data sets and checks are read at import (no torch: the CLI's data and label
    commands use them); each of its jobs' methods imports its torch work on first call."""

    kind = KIND
    load_table = staticmethod(load_role_table)
    check_data = staticmethod(check_tables)

    def score_shard(self, task, model, tokenizer, rows, settings, device, **options):
        from kiwb.kinds.multilabel.scoring import score_task_rows

        return score_task_rows(task, model, tokenizer, rows, settings, device, **options)

    def integrate(self, config, store, settings, tasks):
        from kiwb.kinds.multilabel.integrate_job import run_label_integration

        return run_label_integration(config, store, settings, tasks)

    def prepare_training(self, config, store, request, tasks):
        from kiwb.kinds.multilabel.training import prepare_multilabel

        return prepare_multilabel(config, store, request, tasks)

    def evaluate(self, checkpoint, table, device, batch_size, max_length):
        from kiwb.kinds.multilabel.student import evaluate_classifier

        return evaluate_classifier(checkpoint, table, device, batch_size, max_length)

    def predict(self, folder, texts, top=3):
        from kiwb.kinds.multilabel.student import predicted_labels

        return predicted_labels(folder, texts, top)
