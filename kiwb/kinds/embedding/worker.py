"""The embedding kind's runtime (kiwb.kinds.runtime.KindRuntime): sentence encoders scored and
merged pair by pair (the modules beside this one), read with their pooling, and exported as a
sentence-transformers folder."""

from __future__ import annotations

from kiwb.kinds.embedding import EMBEDDING
from kiwb.kinds.embedding.data import load_role_table
from kiwb.kinds.embedding.export import export_encoder
from kiwb.kinds.embedding.integrate_job import run_embedding_integration
from kiwb.kinds.embedding.predict import nearest_neighbours
from kiwb.kinds.embedding.scoring import score_task_rows
from kiwb.kinds.embedding.student import evaluate_encoder
from kiwb.kinds.embedding.teachers import inspect_encoders
from kiwb.kinds.embedding.training import prepare_embedding
from kiwb.kinds.runtime import RuntimeDefaults


class EmbeddingRuntime(RuntimeDefaults):
    kind = EMBEDDING
    score_shard = staticmethod(score_task_rows)
    load_table = staticmethod(load_role_table)
    integrate = staticmethod(run_embedding_integration)
    prepare_training = staticmethod(prepare_embedding)
    evaluate = staticmethod(evaluate_encoder)
    predict = staticmethod(nearest_neighbours)
    inspect_teachers = staticmethod(inspect_encoders)
    export = staticmethod(export_encoder)
