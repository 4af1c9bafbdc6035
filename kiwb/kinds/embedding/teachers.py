"""Reading an embedding project's teachers: each must be a sentence encoder (a bare encoder
model, not a classifier or tagger), with a pooling rule kiwb applies. Every refusal is one line
naming the teacher, the folder and the fix."""

from __future__ import annotations

from kiwb.errors import TeacherError
from kiwb.kinds import head_kind
from kiwb.kinds.embedding import KIND
from kiwb.kinds.embedding.encoders import classifier_keys, encoder_refusal, read_pooling_rule
from kiwb.project.config import ProjectConfig, TeacherConfig
from kiwb.workers.teachers import TeacherInfo, read_model_config


def inspect_encoders(config: ProjectConfig) -> list[TeacherInfo]:
    """Every teacher of an embedding project, with its pooling and width."""
    return [inspect_encoder(config, teacher) for teacher in config.teachers]


def inspect_encoder(config: ProjectConfig, teacher: TeacherConfig) -> TeacherInfo:
    name = teacher.name
    folder, model_config = read_model_config(name, config.resolve(teacher.path),
                                             teacher.trust_remote_code)
    architectures = list(getattr(model_config, "architectures", None) or [])
    refusal = encoder_refusal(architectures, classifier_keys(teacher),
                              head_kind(architectures, getattr(model_config, "problem_type", None)))
    try:
        if refusal is not None:
            raise ValueError(refusal)
        rule = read_pooling_rule(folder, teacher.pooling)
    except ValueError as error:
        raise TeacherError(f"teacher {name!r}: {folder} {error}") from None
    return TeacherInfo(name, folder, (), architectures[0] if architectures else "",
                       model_config.model_type, teacher.trust_remote_code, KIND.name,
                       pooling=rule.pooling, width=getattr(model_config, "hidden_size", None),
                       reads_up_to=rule.max_length)

