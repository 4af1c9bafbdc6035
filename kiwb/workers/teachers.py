"""Finding, checking and loading teacher checkpoints, each with its own tokenizer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kiwb.errors import KiwbError, TeacherError
from kiwb.kinds import DEFAULT_KIND, KINDS, TeacherKind, kind_of_checkpoint, unmatched_checkpoint
from kiwb.project.fingerprint import checkpoint_hash
from kiwb.project.padding import unpaddable_problem
from kiwb.project.store import Store
from kiwb.project.teach_report import untrained_teacher_problem


@dataclass(frozen=True)
class TeacherInfo:
    """What kiwb knows about a teacher without loading its weights."""

    name: str
    folder: Path
    labels: tuple[str, ...]  # its head's outputs in id order: class labels, or NER tags
    architecture: str
    model_type: str
    trust_remote_code: bool
    kind: str = DEFAULT_KIND  # kiwb.kinds: sequence or token
    classes: tuple[str, ...] = ()  # what it knows: its labels, or its entity types
    scheme: str | None = None  # token: the tag scheme its tags are read in
    # multi-task: which of its outputs answer which of the project's tasks
    # (kiwb.kinds.multitask.heads.Head, one per task it answers)
    heads: tuple = ()
    # embedding: how the encoder pools its token states, its embedding's width, and the
    # length it was trained to read (sentence-transformers' max_seq_length), where known
    pooling: str | None = None
    width: int | None = None
    reads_up_to: int | None = None

    @property
    def known(self) -> tuple[str, ...]:
        """Its labels (sequence) or entity types (token): what the union is made of."""
        return self.classes or self.labels


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


def inspect_teacher(name: str, path: str, labels_override=None, trust_remote_code=False,
                    scheme: str | None = None, types_override=None,
                    problem_type: str | None = None) -> TeacherInfo:
    """Read a teacher's config and check that it is a usable classifier of a kind kiwb knows."""
    folder, config = read_model_config(name, path, trust_remote_code)
    kind, architecture = _teacher_kind(name, folder, config, problem_type)
    _check_overrides(name, kind, labels_override, types_override, scheme)
    outputs = [str(config.id2label[i]) for i in range(int(config.num_labels))]
    override = {"labels": labels_override, "types": types_override}[kind.checkpoints.override_key]
    try:
        knowledge = kind.checkpoints.read_teacher(outputs, override, scheme)
    except ValueError as error:
        raise TeacherError(f"teacher {name!r}: {folder} {error}") from None
    problem = untrained_teacher_problem(name, folder)
    if problem:
        raise TeacherError(problem)
    if kind.checkpoints.reads_words:
        _require_fast_tokenizer(name, folder, trust_remote_code)
    problem = unpaddable_problem(name, folder)
    if problem:
        raise TeacherError(problem)
    return TeacherInfo(name, folder, knowledge.outputs, architecture, config.model_type,
                       trust_remote_code, kind.name, knowledge.classes, knowledge.scheme)


def read_model_config(name: str, path: str, trust_remote_code: bool = False):
    """A teacher's local folder and its transformers config; one line when it has none, or
    ships model code that was not trusted."""
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
    return folder, config


def _check_overrides(name: str, kind: TeacherKind, labels, types, scheme) -> None:
    """A sequence teacher's labels are renamed with labels, a token teacher's entity types with
    types (and its tags read with tag_scheme): the other key is refused, naming the right one."""
    token = kind.checkpoints.override_key == "types"
    if token and labels is not None:
        raise TeacherError(f"teacher {name!r} is a {kind.title} model, so labels = [...] does not "
                           "apply: rename its entity types with types = [...] in its [[teachers]] "
                           "entry")
    if not token and (types is not None or scheme is not None):
        key = "types" if types is not None else "tag_scheme"
        raise TeacherError(f"teacher {name!r} is a {kind.title} model, so {key} (for NER "
                           "teachers) does not apply: rename its labels with labels = [...]")


def _require_fast_tokenizer(name: str, folder: Path, trust_remote_code: bool) -> None:
    """Words are read through a fast tokenizer's word alignment: refuse a slow one up front."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=trust_remote_code)
    except Exception as error:
        raise TeacherError(f"teacher {name!r}: cannot load its tokenizer from {folder}: "
                           f"{_first_line(error)}") from None
    if not getattr(tokenizer, "is_fast", False):
        raise TeacherError(
            f"teacher {name!r}: its tokenizer ({type(tokenizer).__name__}) is a slow (Python) "
            "one, and reading words needs a fast one's word alignment: give "
            f"{folder} a tokenizer.json (save_pretrained of a fast tokenizer writes it)")


def teacher_dropout(info: TeacherInfo, setting: float | str) -> float | str:
    """The dropout `info`'s MC passes draw with under `[scoring] dropout = setting`: "model"
    (its own rates) or the rate kiwb sets in its config (kiwb.project.dropout_rates)."""
    if setting == "model":
        return setting
    from kiwb.project.dropout_rates import scoring_dropout

    return scoring_dropout(setting, _model_config(info.folder))


def _model_config(folder: Path) -> dict:
    import json

    return json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))


def _dropout_overrides(info: TeacherInfo, setting: float | str) -> dict[str, float]:
    """The config values that set the rate `setting` asks of this teacher in every rate its
    config names (none where it keeps its own)."""
    if setting == "model":
        return {}
    from kiwb.project.dropout_rates import injected_dropout, scoring_dropout

    model_config = _model_config(info.folder)  # read once for both
    dropout = scoring_dropout(setting, model_config)
    return {} if dropout == "model" else injected_dropout(model_config, float(dropout))


def _teacher_kind(name: str, folder: Path, config,
                  problem_type: str | None = None) -> tuple[TeacherKind, str]:
    model_config = {**config.to_dict(),  # with any key that marks a kind (task_heads)
                    "architectures": list(getattr(config, "architectures", None) or []),
                    "problem_type": getattr(config, "problem_type", None)}
    found = kind_of_checkpoint(model_config, problem_type)
    if found is not None:
        return found
    raise TeacherError(f"teacher {name!r}: {folder} is "
                       f"{unmatched_checkpoint(model_config, problem_type)}")


def pinned_teachers(tasks, store: Store) -> list[dict]:
    """The teachers of score tasks as a run's manifest pins them: name, content hash, labels."""
    return [{"name": task.teacher.name, "hash": teacher_content_hash(task.teacher, store),
             "labels": list(task.teacher.labels)} for task in tasks]


def teacher_content_hash(info: TeacherInfo, store: Store | None = None) -> str:
    """The teacher's content hash (config, weights, tokenizer)."""
    return checkpoint_hash(info.folder, store)


def load_teacher(info: TeacherInfo, device: str, dropout: float | str = "model"):
    """Load a teacher's model (float32, eval mode, on `device`) and its own tokenizer;
    `dropout`: the [scoring] dropout setting ("auto", "model" or a rate; `teacher_dropout`
    says what it means for this teacher)."""
    from transformers import AutoTokenizer

    from kiwb.workers.runtime import load_classifier, ready_to_pad

    remote = info.trust_remote_code
    try:
        tokenizer = AutoTokenizer.from_pretrained(info.folder, trust_remote_code=remote)
        model, loading = load_classifier(info.folder, kind=info.kind, trust_remote_code=remote,
                                         output_loading_info=True,
                                         **_dropout_overrides(info, dropout))
    except Exception as error:
        raise TeacherError(f"teacher {info.name!r}: cannot load {info.folder}: {_first_line(error)}") from None
    kind = KINDS[info.kind]
    unused = kind.checkpoints.unused_weights  # a pooler it never reads
    missing = sorted(key for key in loading.get("missing_keys") or ()
                     if not key.startswith(unused))
    if missing:
        raise TeacherError(
            f"teacher {info.name!r}: {info.folder} lacks trained weights "
            f"({', '.join(missing[:4])}); a teacher must be {kind.checkpoints.trained_teacher}"
        )
    try:
        ready_to_pad(tokenizer, model, f"teacher {info.name!r}")
    except KiwbError as error:
        raise TeacherError(str(error)) from None
    return model.to(device).eval(), tokenizer


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
