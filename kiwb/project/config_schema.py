"""The kiwb.toml schema: typed settings dataclasses, each key with its one-line help and its
typed rules (`Rules`), and what a loaded project is (`ProjectConfig`)."""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from kiwb.core.choices import (
    AUTO_ROUTING,
    INTEGRATION_METHODS,
    KNOWN_METHODS,
    PAIR_WEIGHTINGS,
    POOLINGS,
    REMOVED_ROUTINGS,
    REPRESENTATIONS,
    ROUTINGS,
    SUPERVISED,
)
from kiwb.core.training_defaults import DEFAULT_EPOCHS, DEFAULT_MIN_STEPS
from kiwb.errors import ConfigError
from kiwb.project.devices import DEVICE_FORMS, DEVICE_PATTERN
from kiwb.project.setting_knobs import (
    SHOWN,
    Flag,
    Shown,
    either,
    for_muki,
    other_kinds_methods,
    routing_help,
    unless_supervised,
)

CONFIG_NAME = "kiwb.toml"
# Keys kiwb no longer has, by section -> why and what to do, said in one line to a kiwb.toml
# that still switches one on (BENCHMARKS.md has the figures); one left off, as kiwb init wrote
# every key, is read past.
REMOVED_KEYS = {
    "integration": {
        "prior_correction": "was removed: it never beat the default on a measured set "
        "(debian-8 dev, the demo); delete the line (class_weighting is what helped rare "
        "classes)",
        "logit_adjustment": "was removed: it never beat the default on a measured set "
        "(debian-8's rare classes: dev macro-F1 63.7 against 64.0, test 5.1 under); delete the "
        "line (class_weighting is what helped rare classes)",
    },
}

_DEVICE = {"pattern": DEVICE_PATTERN, "expected": DEVICE_FORMS}
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+", re.ASCII)
TRACKERS = ("tensorboard", "wandb", "mlflow")  # [training] report_to: HF report_to's names


@dataclass(frozen=True)
class Rules:
    """What a setting accepts, and how its help and errors show it. Typed, so a misspelt rule
    fails when the schema is imported instead of being dropped."""

    choices: tuple[str, ...] | None = None
    pattern: str | None = None  # a regular expression the whole value must match
    expected: str | None = None  # the pattern in words, for its error
    min: float | None = None
    gt: float | None = None
    max: float | None = None
    lt: float | None = None
    min_items: int = 0
    unique: bool = False
    path: Literal["data", "model"] | None = None  # checked on disk by the environment check
    keywords: tuple[str, ...] = ()  # words accepted instead of a number ("auto")
    example: Any = None  # shown for optional keys and in errors
    fix: str | None = None  # what an error about a list says to do
    internal: bool = False  # not a kiwb.toml key (the project's folder and file)
    # values kiwb no longer has -> what to use instead (said in one line to a kiwb.toml naming one)
    removed: dict[str, str] | None = None


def _setting(
    text: str,
    default: Any = dataclasses.MISSING,
    *,
    factory: Any = dataclasses.MISSING,
    shown: Shown | None = None,
    **rules: Any,
) -> Any:
    """A field whose metadata holds its one-line help, its validation rules and (`shown`) where
    it shows beside kiwb.toml."""
    metadata = {"help": text, "rules": Rules(**rules)}
    if shown is not None:
        metadata[SHOWN] = shown
    return field(default=default, default_factory=factory, metadata=metadata)


def declared_setting(cls: type, name: str) -> dataclasses.Field:
    """The field of the settings dataclass `cls` (a kiwb.toml table) named `name`."""
    return next(each for each in dataclasses.fields(cls) if each.name == name)


def rules_of(setting: dataclasses.Field) -> Rules:
    """The validation rules of a settings field."""
    return setting.metadata.get("rules") or Rules()


@dataclass(frozen=True)
class TeacherConfig:
    """One fine-tuned teacher classifier."""

    name: str = _setting(
        "Short unique name of this teacher, shown in tables and plots.",
        pattern=r"[A-Za-z0-9_.-]+",
        expected='only letters, digits, "_", "." and "-"',
        example="teacher-a",
    )
    path: str = _setting(
        'Local Hugging Face checkpoint folder, or a hub id like "org/model".',
        path="model",
        example="models/teacher-a",
    )
    labels: tuple[str, ...] | None = _setting(
        "Label names in the checkpoint's label-id order; replaces its config.id2label.",
        None,
        min_items=2,
        unique=True,
        example=("World", "Sports"),
        fix="list every label of the checkpoint in label-id order, "
        "or remove labels to use its config.id2label",
    )
    types: tuple[str, ...] | None = _setting(
        "A token (NER) teacher's entity types, renaming those its tags name, in order of "
        "first appearance in its config.id2label.",
        None,
        min_items=1,
        unique=True,
        example=("PER", "LOC"),
        fix="list every entity type of the teacher's tags in order of first appearance, "
        "or remove types to use its config.id2label",
    )
    tag_scheme: str | None = _setting(
        "How a token teacher's tags mark entities: bio (IOB2), iob1, bioes (also BILOU) or bare "
        "type names; read from the tag names when not set (IOB1 looks like BIO by name).",
        None,
        choices=("bio", "iob1", "bioes", "bare"),
        example="iob1",
    )
    problem_type: str | None = _setting(
        "What the teacher's head is, where its config.json names no problem_type or names it "
        "wrongly: single_label_classification (softmax) or multi_label_classification "
        "(sigmoid).",
        None,
        choices=("single_label_classification", "multi_label_classification"),
        example="single_label_classification",
    )
    trust_remote_code: bool = _setting(
        "Run modeling code shipped with the checkpoint (only for checkpoints you trust).", False
    )
    seen: str | None = _setting(
        "A data file of texts this teacher was trained on (csv, jsonl, json, parquet or a "
        "save_to_disk folder): the representation routings (mahalanobis, knn) fit its class "
        "means on them instead of on the pool texts it is surest of.",
        None,
        path="data",
        example="data/teacher-a-train.jsonl",
    )
    seen_text_column: str | None = _setting(
        'Column of the seen file holding the text; unset: "text".', None, example="sentence")
    seen_label_column: str | None = _setting(
        "Column of the seen file holding each text's label (one of this teacher's); unset: "
        'the column "label" where the file has one, else the teacher\'s own predictions.',
        None,
        example="label",
    )
    tasks: tuple[str, ...] | None = _setting(
        "Multi-task projects: the [[tasks]] this teacher answers, by name (one for a classifier "
        "with one head; a kiwb multi-task model may answer several).",
        None,
        min_items=1,
        unique=True,
        example=("section",),
        fix='name the [[tasks]] entries this teacher answers, e.g. tasks = ["section"]',
    )
    pooling: str | None = _setting(
        "Embedding projects: how this sentence encoder pools its token states into one "
        "embedding (mean or cls); unset, its sentence-transformers modules.json says.",
        None,
        choices=POOLINGS,
        example="mean",
    )
    heads: tuple[str, ...] | None = _setting(
        "Multi-task projects: the names of this teacher's heads (its task_heads in config.json) "
        "that answer those tasks, in the same order; unset: the heads are named as the tasks.",
        None,
        min_items=1,
        unique=True,
        example=("topic",),
        fix="list one head name per task in tasks, in the same order",
    )


@dataclass(frozen=True)
class DatasetConfig:
    """A table of texts read from one file or saved dataset."""

    path: str = _setting(
        "A csv, jsonl, json or parquet file, a folder saved by datasets' save_to_disk, or a "
        'Hugging Face Hub data set as "hf://datasets/ORG/NAME" (read with datasets.load_dataset, '
        "cached as datasets caches, offline under HF_HUB_OFFLINE=1 once cached).",
        path="data",
        example="data/texts.csv",
    )
    text_column: str = _setting("Column holding the text.", "text")
    label_column: str | None = _setting(
        "Column holding the gold label name (multi-label teachers: the text's labels, a list, "
        "or one string split by label_separator).", None, example="label"
    )
    label_separator: str | None = _setting(
        "Multi-label teachers: the separator of the labels in one label_column string (a CSV "
        "cell such as \"sports;politics\"); unset, each row holds a list.", None, example=";"
    )
    tokens_column: str | None = _setting(
        "NER teachers: column holding each text's words (a list); unset, the text column is "
        "split into words by kiwb's pre-tokenizer.", None, example="tokens"
    )
    tags_column: str | None = _setting(
        "NER teachers: column holding each word's gold tag (a list as long as the words; BIO, "
        "IOB1 or BIOES).", None, example="tags"
    )
    pair_column: str | None = _setting(
        "Embedding projects' eval set: column holding each text's partner (its long "
        "description, say); the student must find it among every partner (retrieval).",
        None, example="description"
    )
    split: str | None = _setting(
        "Split to read when path is a saved DatasetDict or a Hub data set with several splits.",
        None, example="train"
    )
    subset: str | None = _setting(
        "Hub data sets: the subset (datasets' config name) to read, where it has several.",
        None, example="default"
    )
    limit: int | None = _setting("Use only the first N rows.", None, min=1, example=1000)
    tasks: tuple[str, ...] | None = _setting(
        "Multi-task projects: the tasks whose gold labels this data set holds (a column each); "
        "unset: every task.",
        None,
        min_items=1,
        unique=True,
        example=("section",),
        fix="list the [[tasks]] whose label columns this data set has",
    )

    def source(self) -> dict:
        """Where the data set comes from, as kiwb.toml names it (a run's manifest keeps its
        eval set's for the model card's model-index)."""
        return {"path": self.path, "split": self.split, "subset": self.subset}


@dataclass(frozen=True)
class DataConfig:
    """The texts a project works on."""

    unlabeled: DatasetConfig | None = _setting(
        "Unlabeled texts: the teachers score them and the student learns from them.",
        None,
        example={"path": "data/unlabeled.csv"},
    )
    eval: DatasetConfig | None = _setting(
        "Labeled texts, used only to evaluate the student and the teachers (needs label_column).",
        None,
        example={"path": "data/eval.csv", "label_column": "label"},
    )
    labeled: DatasetConfig | None = _setting(
        "A few labeled texts (not the eval set) for few-label routing (stacked); they "
        "also train the student as one-hot targets (needs label_column).",
        None,
        example={"path": "data/labeled.csv", "label_column": "label"},
    )


# The data sets a project may name, in the order they are read (its [data.ROLE] tables)
DATASET_ROLES = tuple(setting.name for setting in fields(DataConfig))


@dataclass(frozen=True)
class ScoringConfig:
    """How the teachers score the unlabeled texts with Monte-Carlo dropout."""

    mc_passes: int | str = _setting(
        'Dropout-on forward passes per text and teacher (K), or "auto": 4 each, then 4 more '
        "at a time only for texts whose routing is not yet settled, up to max_mc_passes.",
        16, min=1, keywords=("auto",))
    max_mc_passes: int = _setting(
        'With mc_passes = "auto": the most passes a text gets from a teacher.', 16, min=2)
    settled_z: float = _setting(
        'With mc_passes = "auto": how sure a routing must be to stop sampling a text (the '
        "leading teacher's score this many standard errors down still beats the others' as "
        "many up); larger spends more passes. 2.5 was chosen on debian-8 dev.", 2.5, gt=0)
    batch_size: int = _setting("Texts per forward batch.", 32, min=1)
    max_length: int = _setting("Longest input in tokens; longer texts are truncated.", 128, min=8)
    device: str = _setting("Where to run: auto, cpu, cuda, cuda:N or mps.", "auto", **_DEVICE)
    dtype: str = _setting(
        "Numeric type; float16 and bfloat16 mean autocast on CUDA (bfloat16 scores in float32 "
        "on a GPU that only emulates it).",
        "float32",
        choices=("float32", "float16", "bfloat16"),
    )
    strategy: str = _setting(
        "How the K passes run: loop (one after another), replicate (as one batch) or auto "
        "(replicate on CUDA, loop elsewhere).",
        "auto",
        choices=("auto", "loop", "replicate"),
    )
    shard_size: int = _setting("Texts per resumable shard of scores.", 2048, min=1)
    representation: str = _setting(
        "What is kept of each teacher's dropout-off pass for the representation routings: head "
        "(the input of its classifier head: the pooled [CLS], a decoder's last token), mean (the "
        "mean of its last hidden states), cls (the first token's last hidden state, before any "
        "pooler) or none.",
        "head",
        choices=REPRESENTATIONS,
    )
    seed: int = _setting("Random seed of the dropout masks.", 0, min=0)
    dropout: float | str = _setting(
        'The dropout the MC passes draw with: "auto" (each teacher\'s own rates; a teacher '
        "whose config.json sets every rate to 0, as ModernBERT, Qwen and Llama classifiers are "
        "published, gets 0.1 in each, which kiwb chose on debian-8's dev set), \"model\" (its "
        "own rates always: a teacher without dropout then answers its K passes as its plain one), "
        "or a rate in [0, 1) set for every dropout rate each teacher's config.json names, when "
        "it is loaded to score. A rate kiwb sets rescores.",
        "auto", min=0, lt=1, keywords=("auto", "model"))


@dataclass(frozen=True)
class IntegrationConfig:
    """How the teachers' predictions merge into one target over the union of their labels."""

    # Each key is declared here once, with where it shows beside kiwb.toml (`shown=`: its flag,
    # its part of a run's default name, its off value, its form label; setting_knobs): a new
    # setting is a field here and the code that uses it. The order is the run names' order.

    method: str = _setting(
        "muki-hard (most confident teacher), muki-soft (confidence-weighted), vanilla-kd or uhc; "
        "multi-label teachers: ant, vote, mean, muki-hard or muki-soft, decided per label.",
        "muki-hard",
        choices=KNOWN_METHODS,
        shown=Shown(Flag("--method", either(INTEGRATION_METHODS) + other_kinds_methods()),
                    name_part=lambda value, _settings, _routing: value,
                    form="method", forms=("train", "integrate")),
    )
    tau: float = _setting(
        "Temperature of the muki-soft weights softmax(c / tau) under confidence routing (other "
        "routings weigh by their estimates); lower is sharper.", 0.2, gt=0,
        shown=Shown(Flag("--tau", "MUKI-Soft temperature", type=float),
                    # tau only acts on raw confidences
                    name_part=lambda value, settings, _routing: f"-tau{value:g}" if (
                        settings["method"] == "muki-soft" and settings["routing"] == "confidence")
                    else "",
                    form="tau"),
    )
    routing: str = _setting(
        "How teachers are compared per text: auto (single-label teachers: every label-free "
        "routing measured on the labeled texts, [data.eval] among them, and the best taken, or "
        "without labels the label-free choice; NER taggers: confidence; the integration names "
        "the routing chosen), "
        + ", ".join(ROUTINGS)
        + " (see the documentation's Integration and routing page); stacked needs "
        "labeled texts: "
        "[data.labeled] or labels = true.",
        AUTO_ROUTING,
        choices=(AUTO_ROUTING, *ROUTINGS),
        removed=REMOVED_ROUTINGS,
        shown=Shown(Flag("--routing", routing_help(), choices=(AUTO_ROUTING, *ROUTINGS),
                         metavar="NAME"),
                    # named when it is not the teachers' kind's default
                    name_part=lambda value, settings, default: f"-{value}" if (
                        settings["method"] != SUPERVISED and value != default) else "",
                    form="routing", forms=("train", "integrate")),
    )
    use_mc: bool = _setting(
        "Use Monte-Carlo dropout confidence; false uses one dropout-off pass.", True,
        shown=Shown(Flag("--no-mc", "ablation: route by one plain (deterministic) pass's "
                         "confidence", type=bool, negative=True),
                    name_part=for_muki(lambda value: "" if value else "-no-mc"),
                    form="MC dropout", form_line="route by MC confidence"),
    )
    reweight: bool = _setting(
        "Weight each text by the confidence margin of its two most confident teachers.", True,
        shown=Shown(Flag("--no-reweight", "ablation: every text counts the same (no margin "
                         "weights)", type=bool, negative=True),
                    name_part=for_muki(lambda value: "" if value else "-no-reweight"),
                    form="re-weighting", form_line="weight texts by margin"),
    )
    transfer: bool = _setting(
        "Multi-label teachers: before integrating, revise each teacher's other labels where "
        "the owners of a shared label disagree, through the label dependencies its own "
        "predictions show on the pool (ANT's transfer).", False,
        shown=Shown(Flag("--transfer", "multi-label teachers: revise each teacher's labels "
                         "through its label dependencies first (ANT)", type=bool),
                    name_part=unless_supervised(lambda value: "-transfer" if value else ""),
                    off=False, stored_when_off=False, kinds=("multi-label",)),
    )
    labels: bool = _setting(
        "Use the labels given to texts in the workbench's Conflicts pane or by kiwb labels "
        "import: labeled texts train as one-hot targets, texts marked none are left out, and "
        "the few-label routing (stacked) is fitted on them.", False,
        # --given-labels, not --labels: kiwb teach's --labels names the labels a teacher learns
        shown=Shown(Flag("--given-labels", "use the labels given in the workbench or by kiwb "
                         "labels import: one-hot targets, none left out, and a few-label "
                         "routing (stacked) fitted on them (default: [integration] labels)",
                         type=bool, aliases=("--labels",)),
                    name_part=unless_supervised(lambda value: "-labels" if value else ""),
                    off=False, form="given labels", form_line="use those given in Conflicts (6)",
                    forms=("train", "integrate")),
    )
    class_weighting: float = _setting(
        "Divide each text's weight by its target class's share to this power (0: off, 1: fully "
        "balanced).", 0.0, min=0, max=1,
        shown=Shown(Flag("--class-weighting", "divide each text's weight by its target class's "
                         "share to this power, 0 to 1", type=float, metavar="POWER"),
                    name_part=unless_supervised(lambda value: f"-cw{value:g}" if value else ""),
                    off=0.0),
    )
    conflict_threshold: float = _setting(
        "Margin below which a text is listed as a conflict between teachers.", 0.1, min=0, max=1,
        shown=Shown(Flag("--threshold", "margin under which a text counts as conflicting",
                         type=float), jobs=("integrate",)),
    )


@dataclass(frozen=True)
class TrainingConfig:
    """How the student is trained on the integrated targets."""

    # A key `kiwb train` overrides is declared with its flag and form label here (`shown=`,
    # setting_knobs.Shown), as [integration]'s are: the flag, its check, the train form's field
    # and the resume check are made from it.

    student: str | None = _setting(
        "Base checkpoint of the student: a local folder or a hub id.",
        None,
        path="model",
        example="google-bert/bert-base-uncased",
        shown=Shown(Flag("--student", "override [training] student (base checkpoint)"),
                    jobs=("train",), form="student base", form_line="folder or hub id"),
    )
    epochs: float = _setting(
        "Passes over the unlabeled texts.", DEFAULT_EPOCHS, gt=0,
        shown=Shown(Flag("--epochs", "override [training] epochs (a run still takes min_steps "
                         "steps or more)", type=float), jobs=("train",), form="epochs"),
    )
    min_steps: int = _setting(
        "Train at least this many optimizer steps: a small pool gets more epochs.",
        DEFAULT_MIN_STEPS, min=0,
        shown=Shown(Flag("--min-steps", "override [training] min_steps (0: exactly --epochs)",
                         type=int, metavar="N"), jobs=("train",), form="min steps"),
    )
    learning_rate: float | str = _setting(
        'Peak AdamW learning rate, or "auto": 2e-5 x (768 / the student\'s hidden size)^2, '
        "kept within 1e-5 and 3e-3 (BERT-base 2e-5, MiniLM-L6 8e-5).",
        "auto",
        gt=0,
        keywords=("auto",),
    )
    batch_size: int = _setting("Texts per training step.", 32, min=1)
    warmup_ratio: float = _setting(
        "Share of the steps spent warming up the learning rate.", 0.1, min=0, lt=1
    )
    weight_decay: float = _setting("AdamW weight decay.", 0.01, min=0)
    eval_every: int = _setting("Evaluate on the eval set every this many steps.", 100, min=1)
    max_length: int = _setting("Longest input in tokens; longer texts are truncated.", 128, min=8)
    seed: int = _setting("Random seed of initialisation and shuffling.", 0, min=0)
    device: str = _setting(
        "Where to train: auto, cpu, cuda, cuda:N or mps.", "auto", **_DEVICE,
        shown=Shown(Flag("--device", f"override [training] device ({DEVICE_FORMS})"),
                    jobs=("train",), form="device"),
    )
    mixed_precision: str = _setting(
        "Mixed precision on CUDA: auto (bf16 where the GPU has it natively, else no), no, fp16 "
        "or bf16 (fp16 on a GPU that only emulates bf16); elsewhere training is float32.",
        "auto",
        choices=("auto", "no", "fp16", "bf16"),
    )
    rank_timeout_s: float = _setting(
        "Several ranks (--devices, torchrun): how long rank 0 waits for the other ranks, and "
        "they for each other's gradients, before the job ends as lost (a hung or dead rank); "
        "NCCL's own default is 30 minutes.",
        300, gt=0,
    )
    report_to: tuple[str, ...] = _setting(
        "Experiment trackers each run reports its losses, eval figures per step, fit, settings "
        "and final figures to, from rank 0 (the names of HF TrainingArguments' report_to): "
        "tensorboard (into the run's folder), wandb, mlflow; each is an extra: pip install "
        "'kiwb[wandb]'.",
        (), choices=TRACKERS, unique=True, example=("tensorboard",),
    )
    feature_weight: float | None = _setting(
        "Multi-task projects: weight of the feature loss (VENUS), which fits an adapter per "
        "teacher from the student's pooled feature to that teacher's; 0: heads only; unset: 0.5 "
        "(chosen on a Debian benchmark's dev splits, BENCHMARKS.md).",
        None,
        min=0,
        example=0.5,
        shown=Shown(Flag("--feature-weight", "multi-task projects: override [training] "
                         "feature_weight (0: heads only)", type=float), jobs=("train",),
                    kinds=("multi-task",)),
    )

    def manifest(self) -> dict:
        """These settings as a run's manifest pins them (not the device nor the ranks' timeout:
        a run may move); a multi-task setting left unset is left out, so other runs'
        manifests stay as they were."""
        values = {k: v for k, v in dataclasses.asdict(self).items()  # where and how, not what
                  if k not in ("device", "rank_timeout_s", "report_to")}
        if values["feature_weight"] is None:
            del values["feature_weight"]
        return values


# A task's kind (a multi-task project's [[tasks]] kind): how its slice of a head answers.
SINGLE_LABEL_TASK, MULTI_LABEL_TASK = "single-label", "multi-label"
TASK_KINDS = (SINGLE_LABEL_TASK, MULTI_LABEL_TASK)


@dataclass(frozen=True)
class TaskConfig:
    """One question a multi-task project's student answers about each text."""

    name: str = _setting(
        "Short unique name of the task, shown in tables and the exported task map.",
        pattern=r"[A-Za-z0-9_.-]+",
        expected='only letters, digits, "_", "." and "-"',
        example="section",
    )
    kind: str = _setting(
        "single-label (one label per text, softmax) or multi-label (a yes or no per label).",
        "single-label",
        choices=TASK_KINDS,
    )
    labels: tuple[str, ...] | None = _setting(
        "The task's labels; unset: the union of the labels its teachers know.",
        None,
        min_items=1,
        unique=True,
        example=("games", "net"),
        fix="list the task's labels once each, or remove labels to use its teachers' union",
    )
    column: str | None = _setting(
        "Column of the task's gold labels in the labeled data sets; unset: the task's name.",
        None,
        example="section",
    )
    label_separator: str | None = _setting(
        "Multi-label tasks: the separator of the labels in one column string; unset, each row "
        "holds a list.", None, example=";"
    )

    @property
    def gold_column(self) -> str:
        return self.column or self.name


@dataclass(frozen=True)
class EmbeddingConfig:
    """Embedding projects (an [embedding] table makes one): sentence encoders merged into one."""

    weighting: str = _setting(
        "How each teacher counts on each pair of texts: mc (the pair shared among the teachers "
        "covering both texts by how steady both stay under each one's dropout), maskout "
        "(every teacher on the pairs of texts it covers) or equal (every teacher, every pair).",
        "mc",
        choices=PAIR_WEIGHTINGS,
    )
    direct_weight: float = _setting(
        "Weight of the direct term: the student's embedding projected into each teacher's space "
        "and matched to the teacher's own there; 0 turns it off.", 0.0, min=0
    )
    pooling: str = _setting("How the student pools its token states: mean or cls.", "mean",
                            choices=POOLINGS)
    min_kept_share: float = _setting(
        "A teacher covers a text (its pairs count for it) only when at least this share of the "
        "text's tokens fits in its max_length (the rest is truncated away).", 0.5, min=0, max=1
    )
    min_known_share: float = _setting(
        "A teacher covers a text only when at least this share of the text's tokens is in its "
        "vocabulary (not its unknown token).", 0.5, min=0, max=1
    )
    conflict_pairs: int = _setting(
        "How many pairs the teachers disagree on most are listed as conflicts.", 500, min=0
    )


@dataclass(frozen=True)
class ProjectConfig:
    """A loaded kiwb.toml together with where it lives."""

    root: Path = _setting("The project folder.", internal=True)
    file: Path = _setting("The kiwb.toml file.", internal=True)
    name: str = _setting("Name of the project.", example="my-project")
    teachers: tuple[TeacherConfig, ...] = _setting(
        "One [[teachers]] entry per teacher; kiwb integrates two or more.",
        (),
        example=(
            {"name": "world-sports", "path": "models/world-sports", "labels": ("World", "Sports")},
            {"name": "business-scitech", "path": "org/business-scitech-classifier"},
        ),
    )
    tasks: tuple[TaskConfig, ...] = _setting(
        "Multi-task projects: one [[tasks]] entry per question the student answers; each "
        "teacher names the tasks it answers (teachers' tasks).",
        (),
        example=({"name": "section", "kind": "single-label"},
                 {"name": "interface", "kind": "multi-label"}),
    )
    embedding: EmbeddingConfig | None = _setting(
        EmbeddingConfig.__doc__, None, example={"weighting": "mc"})
    data: DataConfig = _setting(DataConfig.__doc__, factory=DataConfig)
    scoring: ScoringConfig = _setting(ScoringConfig.__doc__, factory=ScoringConfig)
    integration: IntegrationConfig = _setting(IntegrationConfig.__doc__, factory=IntegrationConfig)
    training: TrainingConfig = _setting(TrainingConfig.__doc__, factory=TrainingConfig)

    def with_defaults_of(self, kind) -> ProjectConfig:
        """This config as the teachers' kind (a kiwb.kinds TeacherKind) reads it: "auto"
        settings made the kind's ([integration] routing: rank for single-label teachers,
        confidence for taggers), and the method the kind takes from its own table, where it has
        one (embedding: [embedding] weighting)."""
        integration = self.integration
        if integration.routing == AUTO_ROUTING:
            integration = dataclasses.replace(integration, routing=kind.jobs.default_routing)
        method = kind.jobs.configured_method(self)
        if method != integration.method:
            integration = dataclasses.replace(integration, method=method)
        return self if integration is self.integration else dataclasses.replace(
            self, integration=integration)

    def teacher(self, name: str) -> TeacherConfig:
        """The teacher called `name`."""
        for teacher in self.teachers:
            if teacher.name == name:
                return teacher
        known = ", ".join(teacher.name for teacher in self.teachers) or "none yet"
        raise ConfigError(f'{self.file}: no teacher is named "{name}"; use one of: {known}')

    def resolve(self, path_str: str, *, allow_hub_id: bool = True) -> str:
        """The absolute local path `path_str` means (from root, "~" expanded), or a hub id
        (a checkpoint's, with allow_hub_id; a data set's "hf://datasets/..." always) as is."""
        if hub_dataset(path_str) is not None or (allow_hub_id and is_hub_id(path_str, self.root)):
            return path_str
        return _local_path(path_str, self.root)

    def require_scoring_inputs(self) -> None:
        """Raise ConfigError unless there are two or more teachers (a multi-task or embedding
        project: one or more) and unlabeled texts."""
        count = len(self.teachers)
        # one teacher per task is multi-task's case; one encoder distilled alone, an embedding
        # project's reference (what merging adds over distilling each teacher)
        if count < 2 and not ((self.tasks or self.embedding is not None) and count):
            has, fix = (
                ("no teachers", "add [[teachers]] entries")
                if count == 0
                else ("1 teacher", "add another [[teachers]] entry")
            )
            raise ConfigError(f"{self.file} has {has}; kiwb integrates two or more: {fix}")
        if self.data.unlabeled is None:
            raise ConfigError(
                f'{self.file} has no [data.unlabeled] section; add one with path = "..." '
                "naming the texts to score"
            )


HUB_DATA = "hf://datasets/"  # how a [data.*] path names a Hugging Face Hub data set


def hub_dataset(path_str: str) -> str | None:
    """The Hub data set id a [data.*] path names ("hf://datasets/ORG/NAME"), else None."""
    return path_str[len(HUB_DATA):] if path_str.startswith(HUB_DATA) else None


def is_hub_id(path_str: str, root: Path) -> bool:
    """Whether a model path means a Hugging Face hub id rather than a local folder."""
    if not HUB_ID.fullmatch(path_str) or ".." in path_str.split("/"):
        return False  # this also rules out "/", "./", "../", "~" and two or more "/"
    return not os.path.exists(_local_path(path_str, root))


def checkpoint_folder(config: ProjectConfig, path: str) -> Path | None:
    """A teacher's local folder, or a hub id's cached snapshot; None when it is not here."""
    if not is_hub_id(path, config.root):
        return Path(config.resolve(path, allow_hub_id=False))
    try:
        from huggingface_hub import snapshot_download  # light: no torch, no transformers

        return Path(snapshot_download(path, local_files_only=True))
    except Exception:  # not cached, or no huggingface_hub: both mean "not here"
        return None


def teacher_model_configs(config: ProjectConfig) -> list[tuple[TeacherConfig, dict]]:
    """Each teacher with its config.json, read cheaply (no model library); a teacher whose
    config cannot be read here is left out (inspecting it says what is wrong)."""
    import json

    found = []
    for teacher in config.teachers:
        folder = checkpoint_folder(config, teacher.path)
        try:
            found.append((teacher, json.loads((folder / "config.json").read_text(
                encoding="utf-8"))))
        except (TypeError, OSError, ValueError):  # TypeError: no folder (a hub id not here)
            continue
    return found


def _local_path(path_str: str, root: Path) -> str:
    return os.path.normpath(os.path.join(root, os.path.expanduser(path_str)))
