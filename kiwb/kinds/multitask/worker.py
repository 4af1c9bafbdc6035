"""The multi-task kind's runtime (kiwb.kinds.runtime.KindRuntime): several tasks per text, each
scored, integrated and trained by its own pieces (the modules beside this one); its teachers
are read with the heads that answer its [[tasks]]."""

from __future__ import annotations

from kiwb.kinds.multitask import MULTI_TASK
from kiwb.kinds.multitask.data import load_role_table
from kiwb.kinds.multitask.integrate_job import run_task_integration
from kiwb.kinds.multitask.predict import predicted_answers
from kiwb.kinds.multitask.scoring import score_task_rows
from kiwb.kinds.multitask.student import evaluate_classifier
from kiwb.kinds.multitask.teachers import inspect_task_teachers
from kiwb.kinds.multitask.training import prepare_multitask
from kiwb.kinds.runtime import RuntimeDefaults


class MultiTaskRuntime(RuntimeDefaults):
    kind = MULTI_TASK
    score_shard = staticmethod(score_task_rows)
    load_table = staticmethod(load_role_table)
    integrate = staticmethod(run_task_integration)
    prepare_training = staticmethod(prepare_multitask)
    evaluate = staticmethod(evaluate_classifier)
    predict = staticmethod(predicted_answers)
    inspect_teachers = staticmethod(inspect_task_teachers)
