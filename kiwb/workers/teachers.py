"""Finding, checking and loading teacher checkpoints, each with its own tokenizer."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kiwb.errors import TeacherError
from kiwb.project.fingerprint import checkpoint_hash
from kiwb.project.store import Store
from kiwb.project.teach_report import untrained_teacher_problem

_GENERIC_LABEL = re.compile(r"^LABEL_\d+$")


@dataclass(frozen=True)
class TeacherInfo:
    """What kiwb knows about a teacher without loading its weights."""

    name: str
    folder: Path
    labels: tuple[str, ...]
    architecture: str
    model_type: str
    trust_remote_code: bool


def resolve_checkpoint(name: str, path: str, *, role: str = "teacher") -> Path:
    """The local folder of a checkpoint: the path itself or a hub id's cached snapshot."""
    folder = Path(path).expanduser()
    if folder.is_dir():
        return folder
    if folder.exists():
        raise TeacherError(f"{role} {name!r}: {path} is a file; point path at the checkpoint folder")
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(path, local_files_only=True))
    except Exception:
        raise TeacherError(
            f"{role} {name!r}: {path} is neither a local folder nor a hub id cached on this "
            "machine; download it where there is internet and set path to the folder"
        ) from None


def inspect_teacher(name: str, path: str, labels_override=None, trust_remote_code=False) -> TeacherInfo:
    """Read a teacher's config and check that it is a usable multi-label classifier."""
    from transformers import AutoConfig

    folder = resolve_checkpoint(name, path)
    if not (folder / "config.json").is_file():
        raise TeacherError(
            f"teacher {name!r}: {folder} has no config.json, so it is not a Hugging Face "
            "checkpoint; point path at a folder written by save_pretrained"
        )
    try:
        config = AutoConfig.from_pretrained(folder, trust_remote_code=trust_remote_code)
    except Exception as error:
        if not trust_remote_code and "trust_remote_code" in str(error):
            raise TeacherError(
                f"teacher {name!r}: {folder} ships its own model code (auto_map in config.json), "
                "which kiwb never runs unless asked: if you trust that code, set "
                "trust_remote_code = true in this teacher's [[teachers]] entry in kiwb.toml"
            ) from None
        raise TeacherError(f"teacher {name!r}: cannot read {folder}/config.json: {error}") from None
    architecture = _classifier_architecture(name, folder, config)
    labels = _teacher_labels(name, folder, config, labels_override)
    problem = untrained_teacher_problem(name, folder)
    if problem:
        raise TeacherError(problem)
    return TeacherInfo(name, folder, labels, architecture, config.model_type, trust_remote_code)


def _classifier_architecture(name: str, folder: Path, config) -> str:
    architectures = list(getattr(config, "architectures", None) or [])
    for architecture in architectures:
        if architecture.endswith("ForSequenceClassification"):
            return architecture
    found = ", ".join(architectures) or "none recorded"
    raise TeacherError(
        f"teacher {name!r}: {folder} is not a sequence classifier (architectures: {found}); "
        "point path at a fine-tuned *ForSequenceClassification checkpoint (kiwb teach makes one)"
    )


def _teacher_labels(name: str, folder: Path, config, override) -> tuple[str, ...]:
    num_labels = int(config.num_labels)
    if num_labels < 2:  # before the label names, whose fixes cannot help a one-output model
        raise TeacherError(
            f"teacher {name!r}: {folder} has only {num_labels} label; a teacher needs two or "
            "more (its confidence is undefined with one): point path at a classifier of 2+ labels"
        )
    if override is not None:
        labels = tuple(override)
        if len(labels) != num_labels:
            raise TeacherError(
                f"teacher {name!r}: labels override lists {len(labels)} names but the "
                f"checkpoint has {num_labels} outputs; list exactly {num_labels}"
            )
    else:
        labels = tuple(str(config.id2label[i]) for i in range(num_labels))
        generic = [label for label in labels if _GENERIC_LABEL.match(label)]
        if generic:
            raise TeacherError(
                f"teacher {name!r}: {folder} names its labels generically ({', '.join(generic)}); "
                "give the real names with labels = [...] in its [[teachers]] entry"
            )
    if len(set(labels)) != len(labels):
        raise TeacherError(f"teacher {name!r}: repeats label names {labels}; make them unique")
    return labels


def teacher_content_hash(info: TeacherInfo, store: Store | None = None) -> str:
    """The teacher's content hash (config, weights, tokenizer)."""
    return checkpoint_hash(info.folder, store)


def load_teacher(info: TeacherInfo, device: str):
    """Load a teacher's model (float32, eval mode, on `device`) and its own tokenizer."""
    from transformers import AutoTokenizer

    from kiwb.workers.runtime import load_classifier

    remote = info.trust_remote_code
    try:
        tokenizer = AutoTokenizer.from_pretrained(info.folder, trust_remote_code=remote)
        model, loading = load_classifier(info.folder, trust_remote_code=remote, output_loading_info=True)
    except Exception as error:
        raise TeacherError(f"teacher {info.name!r}: cannot load {info.folder}: {_first_line(error)}") from None
    if loading.get("missing_keys"):
        missing = ", ".join(sorted(loading["missing_keys"])[:4])
        raise TeacherError(
            f"teacher {info.name!r}: {info.folder} lacks trained weights ({missing}); "
            "a teacher must be a fine-tuned classifier, not a bare encoder"
        )
    return model.to(device).eval(), tokenizer


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
