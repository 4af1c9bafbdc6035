"""The token kind's runtime (kiwb.kinds.runtime.KindRuntime): NER taggers scored, integrated,
trained and evaluated per word and span, by the modules beside this one."""

from __future__ import annotations

from kiwb.kinds.runtime import RuntimeDefaults
from kiwb.kinds.token import KIND
from kiwb.kinds.token.data import load_role_table
from kiwb.kinds.token.integrate_job import run_token_integration
from kiwb.kinds.token.labels import check_labels as check_label_spans
from kiwb.kinds.token.scoring import score_task_rows
from kiwb.kinds.token.student import evaluate_tagger, predicted_entities
from kiwb.kinds.token.training import prepare_token


class TokenRuntime(RuntimeDefaults):
    kind = KIND
    score_shard = staticmethod(score_task_rows)
    load_table = staticmethod(load_role_table)
    integrate = staticmethod(run_token_integration)
    prepare_training = staticmethod(prepare_token)
    evaluate = staticmethod(evaluate_tagger)
    predict = staticmethod(predicted_entities)

    def check_labels(self, file, decisions, config) -> bool:
        check_label_spans(file, decisions, config)
        return True
