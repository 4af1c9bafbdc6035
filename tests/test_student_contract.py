"""Every kind's Student is what the Trainer asks of one (kiwb.workers.student_contract.Student):
each member there, each method taking the Protocol's parameters by name and in order."""

from __future__ import annotations

import inspect

import pytest

from kiwb.kinds.embedding.student import EmbeddingStudent
from kiwb.kinds.multilabel.student import MultiLabelStudent
from kiwb.kinds.multitask.student import MultiTaskStudent
from kiwb.kinds.sequence.student import SequenceStudent
from kiwb.kinds.token.student import TokenStudent
from kiwb.workers.student_contract import Student
from kiwb.workers.training_data import TrainingData

STUDENTS = [SequenceStudent, TokenStudent, MultiLabelStudent, MultiTaskStudent, EmbeddingStudent]
# its attributes (annotated) and its methods, read the same way on every Python version
MEMBERS = [*Student.__annotations__,
           *(name for name, value in vars(Student).items()
             if inspect.isfunction(value) and not name.startswith("_"))]


def _parameters(function) -> list[str]:
    return [name for name in inspect.signature(function).parameters if name != "self"]


@pytest.mark.parametrize("student", STUDENTS, ids=lambda cls: cls.__name__)
def test_every_kinds_student_has_the_contracts_methods_with_its_parameters(student):
    assert {"kind", "supervised_loss", "distillation_loss", "logits"} <= set(MEMBERS)
    for name in sorted(MEMBERS):
        assert hasattr(student, name), f"{student.__name__} lacks {name}"
        wanted = vars(Student).get(name)
        if inspect.isfunction(wanted):
            assert _parameters(getattr(student, name)) == _parameters(wanted), \
                f"{student.__name__}.{name}"
    assert isinstance(student.kind, str)


def test_training_data_names_its_student():
    with pytest.raises(TypeError, match="student"):
        TrainingData([], [], None, None, None, None, None, None, None, {})
    data = TrainingData([], [], None, None, None, None, None, None, None, {},
                        student=SequenceStudent())
    assert isinstance(data.student, Student)
