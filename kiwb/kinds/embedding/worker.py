"""The embedding kind's runtime (kiwb.kinds.runtime.KindRuntime): sentence encoders scored and
merged pair by pair (the modules beside this one), read with their pooling, and exported as a
sentence-transformers folder."""

from __future__ import annotations

from kiwb.kinds.embedding import KIND
from kiwb.kinds.embedding.data import load_role_table
from kiwb.kinds.embedding.teachers import inspect_encoders
from kiwb.kinds.runtime import RuntimeDefaults


class EmbeddingRuntime(RuntimeDefaults):
    """Its data sets and checks are read at import (no torch: the CLI's data and label
    commands use them); each of its jobs' methods imports its torch work on first call."""

    kind = KIND
    load_table = staticmethod(load_role_table)
    inspect_teachers = staticmethod(inspect_encoders)

    def score_shard(self, task, model, tokenizer, rows, settings, device, **options):
        from kiwb.kinds.embedding.scoring import score_task_rows

        return score_task_rows(task, model, tokenizer, rows, settings, device, **options)

    def integrate(self, config, store, settings, tasks):
        from kiwb.kinds.embedding.integrate_job import run_embedding_integration

        return run_embedding_integration(config, store, settings, tasks)

    def prepare_training(self, config, store, request, tasks):
        from kiwb.kinds.embedding.training import prepare_embedding

        return prepare_embedding(config, store, request, tasks)

    def evaluate(self, checkpoint, table, device, batch_size, max_length):
        from kiwb.kinds.embedding.student import evaluate_encoder

        return evaluate_encoder(checkpoint, table, device, batch_size, max_length)

    def predict(self, folder, texts, top=3):
        from kiwb.kinds.embedding.predict import nearest_neighbours

        return nearest_neighbours(folder, texts, top)

    def export(self, project_root, run, destination, source, manifest, progress):
        from kiwb.kinds.embedding.export import export_encoder

        return export_encoder(project_root, run, destination, source, manifest, progress)
