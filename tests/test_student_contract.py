"""Every kind's Student is what the Trainer asks of one (kiwb.workers.student_contract.Student):
each member there, each method taking the Protocol's parameters by name and in order."""

from __future__ import annotations

import inspect

import pytest

from kiwb.kinds.embedding.student import EmbeddingStudent
from kiwb.kinds.multilabel.student import MultiLabelStudent
from kiwb.kinds.multitask.student import MultiTaskStudent
from kiwb.kinds.token.student import TokenStudent
from kiwb.workers.student import SequenceStudent
from kiwb.workers.student_contract import Student
from kiwb.workers.training_data import TrainingData

STUDENTS = [SequenceStudent, TokenStudent, MultiLabelStudent, MultiTaskStudent, EmbeddingStudent]
MEMBERS = [name for name in Student.__protocol_attrs__] if hasattr(Student, "__protocol_attrs__") \
    else [name for name in vars(Student) if not name.startswith("_")]


def _parameters(function) -> list[str]:
    return [name for name in inspect.signature(function).parameters if name != "self"]


@pytest.mark.parametrize("student", STUDENTS, ids=lambda cls: cls.__name__)
def test_every_kinds_student_has_the_contracts_methods_with_its_parameters(student):
    for name in sorted(MEMBERS):
        assert hasattr(student, name), f"{student.__name__} lacks {name}"
        wanted = getattr(Student, name)
        if inspect.isfunction(wanted):
            assert _parameters(getattr(student, name)) == _parameters(wanted), \
                f"{student.__name__}.{name}"
    assert isinstance(student.kind, str)


def test_the_default_training_datas_student_keeps_the_contract():
    data = TrainingData([], [], None, None, None, None, None, None, None, {})
    assert isinstance(data.student, Student)
