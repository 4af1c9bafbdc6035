"""The metadata at the top of an export's model card, as the Hugging Face Hub reads it:
library_name, pipeline_tag, tags, base_model, datasets and the `model-index` of evaluation
results, so the Hub shows the figures. Written with huggingface_hub's ModelCardData, the
Hub's own schema, rather than by hand."""

from __future__ import annotations

from pathlib import Path

from kiwb.kinds import kind_named
from kiwb.project.config_schema import hub_dataset, is_hub_id

TAGS = ("kiwb", "knowledge-integration", "knowledge-distillation")
# The Hub's metric ids for the headline figures that have one; the others keep kiwb's name.
METRIC_TYPES = {"accuracy": "accuracy", "entity F1": "f1", "micro F1": "f1"}


def card_metadata(manifest: dict, *, library_name: str = "transformers",
                  tags: tuple[str, ...] = (), root: Path | None = None) -> str:
    """The YAML (without its --- fences) of an export manifest's model card; `root`: the
    project folder a relative student base is read from (a local folder is no Hub model)."""
    from huggingface_hub import ModelCardData

    kind = kind_named(manifest.get("kind"))
    base = manifest.get("student_base")
    source = manifest.get("eval_source") or {}
    dataset = hub_dataset(source["path"]) if source.get("path") else None
    results = eval_results(manifest, kind.checkpoints.pipeline_tag, kind.words.headline)
    data = ModelCardData(
        model_name=f"kiwb-{manifest['run']}", library_name=library_name,
        pipeline_tag=kind.checkpoints.pipeline_tag, tags=[*TAGS, *tags],
        # a local folder is no Hub model: the Hub refuses a base_model it cannot find
        base_model=base if isinstance(base, str) and is_hub_id(base, root or Path.cwd()) else None,
        datasets=[dataset] if dataset else None, eval_results=results or None)
    return data.to_yaml()


def eval_results(manifest: dict, task: str, headline: str) -> list:
    """The export's figures on its evaluation set as the Hub's EvalResults: the kind's
    headline figure and, where measured, macro-F1."""
    from huggingface_hub import EvalResult

    metrics = manifest.get("evaluation") or {}
    source = manifest.get("eval_source") or {}
    if not metrics or metrics.get("accuracy") is None or not source.get("path"):
        return []
    dataset = hub_dataset(source["path"])
    where = {"task_type": task, "dataset_type": dataset or Path(source["path"]).name,
             "dataset_name": dataset or f"{Path(source['path']).name} (the project's eval set)",
             "dataset_split": source.get("split"), "dataset_config": source.get("subset")}
    found = [EvalResult(metric_type=METRIC_TYPES.get(headline, headline.replace(" ", "_")),
                        metric_name=headline, metric_value=round(metrics["accuracy"], 4),
                        **where)]
    if metrics.get("macro_f1") is not None:
        found.append(EvalResult(metric_type="f1", metric_name="macro-F1", metric_config="macro",
                                metric_value=round(metrics["macro_f1"], 4), **where))
    return found
