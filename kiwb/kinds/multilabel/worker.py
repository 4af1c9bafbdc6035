"""The multi-label kind's runtime (kiwb.kinds.runtime.KindRuntime): sigmoid classifiers scored,
integrated, trained and evaluated per label, by the modules beside this one; gold data is
checked against the teachers' labels before scoring."""

from __future__ import annotations

from kiwb.kinds.multilabel import MULTI_LABEL
from kiwb.kinds.multilabel.data import check_tables, load_role_table
from kiwb.kinds.multilabel.integrate_job import run_label_integration
from kiwb.kinds.multilabel.scoring import score_task_rows
from kiwb.kinds.multilabel.student import evaluate_classifier, predicted_labels
from kiwb.kinds.multilabel.training import prepare_multilabel
from kiwb.kinds.runtime import RuntimeDefaults


class MultiLabelRuntime(RuntimeDefaults):
    kind = MULTI_LABEL
    score_shard = staticmethod(score_task_rows)
    load_table = staticmethod(load_role_table)
    integrate = staticmethod(run_label_integration)
    prepare_training = staticmethod(prepare_multilabel)
    evaluate = staticmethod(evaluate_classifier)
    predict = staticmethod(predicted_labels)
    check_data = staticmethod(check_tables)
