"""The seams: where the shared jobs hand a kind its part of the work, with their signatures.

A kind names its functions (`TeacherKind.seams`: seam name -> "module:function"), so that its
description stays torch-free and the shared worker modules need no branch per kind
(kiwb.kinds.run_seam calls them). This table is what every kind's functions must take: the
parameters by name and in order, and whether a seam may take more options (`**options`). A
test (tests/test_kind_seams.py) imports every kind's functions and checks them against it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Seam:
    """One seam: its parameters (in order), what it returns, and what it is for."""

    name: str
    parameters: tuple[str, ...]
    returns: str
    purpose: str
    required: bool = True        # every kind provides it (else only the kinds that need it)
    options: bool = False        # it takes **options beyond its parameters
    defaults: tuple[str, ...] = ()  # parameters a caller may leave out


SEAMS: dict[str, Seam] = {seam.name: seam for seam in (
    Seam("score_shard", ("task", "model", "tokenizer", "rows", "settings", "device"),
         "dict[str, np.ndarray]", "the score arrays of one shard (kiwb.workers.score stores them)",
         options=True),
    Seam("load_table", ("path", "spec", "role", "config"), "TextTable",
         "one data set of the project, as this kind reads it (config: the project's)",
         defaults=("config",)),
    Seam("integrate", ("config", "store", "settings", "tasks"), "IntegrationRecord",
         "targets, conflicts and figures from the stored scores, recorded in the store"),
    Seam("prepare_training", ("config", "store", "request", "tasks"), "TrainingData",
         "a run's targets and eval set, and its student (the Protocol "
         "kiwb.workers.student_contract.Student says what the Trainer asks of one)"),
    Seam("evaluate", ("checkpoint", "table", "device", "batch_size", "max_length"), "dict",
         'a trained student\'s figures, the headline one under "accuracy"'),
    Seam("predict", ("folder", "texts", "top"), "list[str]",
         "one line per text for `kiwb predict`", defaults=("top",)),
    Seam("check_data", ("config", "tables", "teachers"), "None",
         "refuse, before scoring, gold data the teachers cannot read (one line)",
         required=False),
    Seam("inspect_teachers", ("config",), "list[TeacherInfo]",
         "read and check every teacher of the project, one line for a bad one (a kind "
         "declared by a kiwb.toml table)", required=False),
    Seam("export", ("project_root", "run", "destination", "source", "manifest", "progress"),
         "Path", "write the export folder itself (embedding: a sentence-transformers one)",
         required=False),
    Seam("report_tables", ("integration",), "list[rich Table]",
         "kiwb integrate's tables, where the shared ones (routing, wins) do not apply; "
         "torch-free", required=False),
    Seam("checkpoint_facts", ("model_config", "folder", "teacher"),
         "tuple[tuple[str, ...], str | None]",
         "for a kind that reads checkpoints its own way (embedding: bare encoders), what the "
         "Teachers pane shows in place of labels and what stops the teacher; torch-free",
         required=False),
    Seam("check_labels", ("file", "decisions", "config"), "None",
         "refuse, before anything is stored, labels from `kiwb labels import` that this kind's "
         "conflicts cannot be (one line naming the file and the label); a kind that checks "
         "its labels so has none that match nothing of the project's data", required=False),
)}
