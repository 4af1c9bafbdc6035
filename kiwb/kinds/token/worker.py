"""The token kind's runtime (kiwb.kinds.runtime.KindRuntime): NER taggers scored, integrated,
trained and evaluated per word and span, by the modules beside this one."""

from __future__ import annotations

from kiwb.kinds.runtime import RuntimeDefaults
from kiwb.kinds.token import KIND
from kiwb.kinds.token.data import load_role_table
from kiwb.kinds.token.labels import check_labels as check_label_spans


class TokenRuntime(RuntimeDefaults):
    """Its data sets and checks are read at import (no torch: the CLI's data and label
    commands use them); each of its jobs' methods imports its torch work on first call."""

    kind = KIND
    load_table = staticmethod(load_role_table)

    def score_shard(self, task, model, tokenizer, rows, settings, device, **options):
        from kiwb.kinds.token.scoring import score_task_rows

        return score_task_rows(task, model, tokenizer, rows, settings, device, **options)

    def integrate(self, config, store, settings, tasks):
        from kiwb.kinds.token.integrate_job import run_token_integration

        return run_token_integration(config, store, settings, tasks)

    def prepare_training(self, config, store, request, tasks):
        from kiwb.kinds.token.training import prepare_token

        return prepare_token(config, store, request, tasks)

    def evaluate(self, checkpoint, table, device, batch_size, max_length):
        from kiwb.kinds.token.student import evaluate_tagger

        return evaluate_tagger(checkpoint, table, device, batch_size, max_length)

    def predict(self, folder, texts, top=3):
        from kiwb.kinds.token.student import predicted_entities

        return predicted_entities(folder, texts, top)

    def check_labels(self, file, decisions, config) -> bool:
        check_label_spans(file, decisions, config)
        return True
