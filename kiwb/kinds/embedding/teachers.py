"""Reading an embedding project's teachers: each must be a sentence encoder (a bare encoder
model, not a classifier or tagger), with a pooling rule kiwb applies. Every refusal is one line
naming the teacher, the folder and the fix."""

from __future__ import annotations

from kiwb.errors import TeacherError
from kiwb.kinds import kind_of_checkpoint
from kiwb.kinds.embedding import EMBEDDING
from kiwb.kinds.embedding.encoders import read_pooling_rule
from kiwb.project.config import ProjectConfig, TeacherConfig
from kiwb.workers.teachers import TeacherInfo, read_model_config

# [[teachers]] keys that name what a classifier or tagger knows: an encoder has none.
_CLASSIFIER_KEYS = ("labels", "types", "tag_scheme", "problem_type", "tasks", "heads")


def inspect_encoders(config: ProjectConfig) -> list[TeacherInfo]:
    """Every teacher of an embedding project, with its pooling and width."""
    return [inspect_encoder(config, teacher) for teacher in config.teachers]


def inspect_encoder(config: ProjectConfig, teacher: TeacherConfig) -> TeacherInfo:
    name = teacher.name
    folder, model_config = read_model_config(name, config.resolve(teacher.path),
                                             teacher.trust_remote_code)
    set_keys = [key for key in _CLASSIFIER_KEYS if getattr(teacher, key) is not None]
    if set_keys:
        raise TeacherError(f"teacher {name!r}: {set_keys[0]} does not apply to a sentence "
                           f"encoder (it names what a classifier knows); remove it from its "
                           "[[teachers]] entry")
    architectures = list(getattr(model_config, "architectures", None) or [])
    heads = [architecture for architecture in architectures
             if not architecture.endswith(EMBEDDING.architecture_suffix)]
    if heads:
        found = kind_of_checkpoint({"architectures": architectures,
                                    "problem_type": getattr(model_config, "problem_type", None)})
        what = f"a {found[0].title} model" if found is not None else "a model with a head"
        raise TeacherError(
            f"teacher {name!r}: {folder} is {what} ({heads[0]}); an embedding project "
            "([embedding] in kiwb.toml) merges sentence encoders: point path at one (a "
            "sentence-transformers folder, or a bare encoder with pooling set), or remove "
            "[embedding] to integrate classifiers")
    try:
        rule = read_pooling_rule(folder, teacher.pooling)
    except ValueError as error:
        raise TeacherError(f"teacher {name!r}: {folder} {error}") from None
    width = getattr(model_config, "hidden_size", None)
    return TeacherInfo(name, folder, (), architectures[0] if architectures else "",
                       model_config.model_type, teacher.trust_remote_code, EMBEDDING.name,
                       pooling=rule.pooling, width=width, reads_up_to=rule.max_length)
