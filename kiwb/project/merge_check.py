"""What `kiwb merge` refuses before a job is recorded, read from the teachers' config.json
(torch-free, so the CLI and the workbench refuse in one line and write nothing): a kind that
cannot merge, fewer than two teachers, teachers of different architectures or sizes, and no
base for the rules that need one. The worker checks every tensor's shape again
(kiwb.workers.merge): a config can hide a difference.
"""

from __future__ import annotations

import json

from kiwb.errors import ConfigError
from kiwb.kinds import TeacherKind
from kiwb.project.config import teacher_model_configs
from kiwb.project.paths import ProjectPaths
from kiwb.shell import command

# The config.json keys that decide a transformer encoder's tensor shapes.
SHAPE_KEYS = ("model_type", "vocab_size", "hidden_size", "dim", "d_model", "num_hidden_layers",
              "n_layers", "num_attention_heads", "intermediate_size", "hidden_dim",
              "max_position_embeddings", "type_vocab_size", "embedding_size")


def check_mergeable(config, spec, kind: TeacherKind) -> None:
    """One line naming the first reason these teachers (of `kind`) cannot be merged as `spec`
    asks."""
    refusal = kind.jobs.merge_refusal
    if refusal:
        raise ConfigError(f"{config.file}: {refusal}")
    if len(config.teachers) < 2:
        raise ConfigError(f"{config.file}: merging needs two or more teachers; add them as "
                          "[[teachers]] entries")
    if ProjectPaths(config.root).run_dir(spec.job_run()).exists() and not spec.force:
        raise ConfigError(f"run {spec.job_run()!r} already exists; choose another --run or add "
                          "--force to replace it")
    if spec.method != "average" and not (spec.base or config.training.student):
        raise ConfigError(f"--method {spec.method} adds the teachers' changes to the base they "
                          f"were fine-tuned from: pass --base FOLDER or set [training] student "
                          f"in {config.file}")
    # a teacher whose config.json is not here is the job's to name (it inspects every one)
    shapes = [(teacher.name, model_config)
              for teacher, model_config in teacher_model_configs(config)]
    for name, model_config in shapes[1:]:
        first_name, first = shapes[0]
        ours, theirs = _architecture(first), _architecture(model_config)
        if ours != theirs:
            raise ConfigError(f"cannot merge teacher {name!r} ({theirs}) with {first_name!r} "
                              f"({ours}): weight merging needs one architecture; distill them "
                              f"instead ({command('train', config.root)})")
        for key in SHAPE_KEYS:
            if first.get(key) != model_config.get(key):
                raise ConfigError(f"cannot merge teacher {name!r} with {first_name!r}: {key} is "
                                  f"{model_config.get(key)} against {first.get(key)} in their "
                                  "config.json; weight merging needs models of one size (distill "
                                  f"them instead: {command('train', config.root)})")


def _architecture(model_config: dict) -> str:
    return ", ".join(model_config.get("architectures") or []) or str(model_config.get("model_type"))


def check_merge_start(config, run: str) -> None:
    """`--init-from-merge RUN` names a merge run of this project that has its checkpoint."""
    run_dir = ProjectPaths(config.root).run_dir(run)
    try:
        manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = None
    if manifest is None or not (run_dir / "checkpoints").is_dir():
        raise ConfigError(f"--init-from-merge {run}: the project has no run {run!r}; make it "
                          f"with: {command('merge', config.root, '--run', run)}")
    if "merge" not in manifest:
        raise ConfigError(f"--init-from-merge {run}: run {run!r} is a trained run, not a merge; "
                          f"give a run that {command('merge', config.root)} made")
