"""Which changes stop a run from resuming: the labels given to texts do; a settings key added
by a later kiwb, at the value older runs had, does not."""

from __future__ import annotations

import pytest

from kiwb.errors import KiwbError
from kiwb.project.records import IntegrationSettings
from kiwb.workers.checkpoints import check_resumable, write_manifest


def manifest(**changes) -> dict:
    settings = IntegrationSettings(routing="stacked", labels=True).to_dict()
    return {"teachers": [], "labels": ["x", "y"], "method": settings, "data": "d",
            "labeled_data": None, "given_labels": "labels-1", "eval_data": None,
            "student": "s", "training": {}, **changes}


def test_a_run_from_before_labels_existed_still_resumes(tmp_path):
    older = IntegrationSettings().to_dict()
    del older["labels"]  # written before the key existed
    write_manifest(tmp_path, manifest(method=older, given_labels=None))
    check_resumable(tmp_path, manifest(method=IntegrationSettings().to_dict(), given_labels=None))


def test_changed_labels_stop_a_resume_and_say_why(tmp_path):
    write_manifest(tmp_path, manifest())
    check_resumable(tmp_path, manifest())
    with pytest.raises(KiwbError, match="the labels given to texts changed"):
        check_resumable(tmp_path, manifest(given_labels="labels-2"))
    with pytest.raises(KiwbError, match=r"labels: True -> False"):
        check_resumable(tmp_path, manifest(method=IntegrationSettings(routing="stacked").to_dict()))


def test_a_rescored_teacher_stops_a_resume_and_an_older_run_is_not_held_to_it(tmp_path):
    """`[scoring] dropout = "auto"` rescores a teacher without dropout: the run's targets would
    change under it. A manifest from before kiwb pinned the score sets resumes as before."""
    write_manifest(tmp_path, manifest(scores={"a": "key-1", "b": "key-2"}))
    check_resumable(tmp_path, manifest(scores={"a": "key-1", "b": "key-2"}))
    with pytest.raises(KiwbError, match="the teachers' scores changed"):
        check_resumable(tmp_path, manifest(scores={"a": "key-1", "b": "key-3"}))
    write_manifest(tmp_path, manifest())  # written before the key existed
    check_resumable(tmp_path, manifest(scores={"a": "key-1", "b": "key-3"}))


def test_a_run_with_a_setting_kiwb_removed_resumes_only_where_it_was_off(tmp_path):
    """logit_adjustment was removed (issue 61): a run that had it at 0 goes on as before; one
    trained with it on cannot go on without it, and is told which setting changed."""
    now = IntegrationSettings(routing="stacked", labels=True).to_dict()
    write_manifest(tmp_path, manifest(method={**now, "logit_adjustment": 0.0}))
    check_resumable(tmp_path, manifest())
    write_manifest(tmp_path, manifest(method={**now, "logit_adjustment": 1.0}))
    with pytest.raises(KiwbError, match=r"logit_adjustment: 1.0 -> 'unset'"):
        check_resumable(tmp_path, manifest())


def test_a_run_read_from_another_integration_does_not_resume(tmp_path):
    """A run pins the key of the stored integration its targets were read from; one pinned
    before kiwb read stored integrations is not held to it."""
    write_manifest(tmp_path, manifest(integration="key-1"))
    check_resumable(tmp_path, manifest(integration="key-1"))
    with pytest.raises(KiwbError, match="the integration its targets come from changed"):
        check_resumable(tmp_path, manifest(integration="key-2"))
    write_manifest(tmp_path, manifest())  # written before the key existed
    check_resumable(tmp_path, manifest(integration="key-2"))
