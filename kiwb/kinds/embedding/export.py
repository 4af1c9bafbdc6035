"""`kiwb export` for an embedding student: a folder that sentence-transformers loads as it is
(`SentenceTransformer(path)`: modules.json, a Pooling and a Normalize module) and that is also a
plain transformers encoder (`AutoModel.from_pretrained(path)`, then the pooling its README
names, then unit length). The per-teacher projections of the direct term are left out."""

from __future__ import annotations

import json
from pathlib import Path

from kiwb import __version__
from kiwb.kinds.embedding import KIND, POOLING_KEY
from kiwb.project.atomic import atomic_directory
from kiwb.project.run_folder import MANIFEST_NAME, evaluation_of
from kiwb.workers.hub_card import card_metadata

MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
]


def export_encoder(project_root: Path, run: str, destination: Path, source: Path,
                   manifest: dict, progress: dict) -> Path:
    """The embedding kind's export: the chosen checkpoint `source` as a sentence encoder."""
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(source)
    tokenizer = AutoTokenizer.from_pretrained(source)
    pooling = getattr(model.config, POOLING_KEY, None) or "mean"
    max_length = int((manifest.get("training") or {}).get("max_length") or 128)
    export_manifest = {
        "kiwb_version": __version__, "kind": KIND.name, "run": run,
        "checkpoint": source.name, "step": progress["step"], "pooling": pooling,
        "width": int(model.config.hidden_size), "teachers": manifest.get("teachers"),
        "method": manifest.get("method"), "embedding": manifest.get("embedding"),
        "training": manifest.get("training"), "student_base": manifest.get("student"),
        "data": manifest.get("data"), "eval_data": manifest.get("eval_data"),
        "evaluation": evaluation_of(project_root, run, progress),
        "eval_source": manifest.get("eval_source"),  # the card's model-index names it
    }
    with atomic_directory(destination) as staging:
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        write_sentence_transformers_files(staging, pooling, int(model.config.hidden_size),
                                          max_length)
        (staging / MANIFEST_NAME).write_text(json.dumps(export_manifest, indent=2), encoding="utf-8")
        (staging / "README.md").write_text(encoder_card(export_manifest, project_root),
                                           encoding="utf-8")
    return destination


def write_sentence_transformers_files(folder: Path, pooling: str, width: int,
                                      max_length: int) -> None:
    """modules.json and the module configs sentence-transformers reads beside an encoder."""
    (folder / "modules.json").write_text(json.dumps(MODULES, indent=2), encoding="utf-8")
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": width, "pooling_mode_cls_token": pooling == "cls",
        "pooling_mode_mean_tokens": pooling == "mean", "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False, "pooling_mode_weightedmean_tokens": False,
        "pooling_mode_lasttoken": False, "include_prompt": True}, indent=2), encoding="utf-8")
    (folder / "2_Normalize").mkdir(exist_ok=True)
    (folder / "sentence_bert_config.json").write_text(json.dumps(
        {"max_seq_length": max_length, "do_lower_case": False}, indent=2), encoding="utf-8")
    (folder / "config_sentence_transformers.json").write_text(json.dumps(
        {"prompts": {}, "default_prompt_name": None, "similarity_fn_name": "cosine"}, indent=2),
        encoding="utf-8")


def encoder_card(manifest: dict, root: Path | None = None) -> str:
    """The export's README.md: teachers, how it was made, its probe figures, how to use it."""
    pooling = manifest["pooling"]
    pooled = ("the mean of the token states over the attention mask" if pooling == "mean"
              else "the first token's state")
    metadata = card_metadata(manifest, library_name="sentence-transformers",
                             tags=("sentence-transformers",), root=root)
    lines = ["---", metadata.rstrip("\n"), "---", "",
             f"# Sentence encoder from kiwb run `{manifest['run']}`", "",
             f"{KIND.words.card['summary']} trained without labels by "
             "[kiwb](https://pypi.org/project/kiwb/): every pair of texts is placed as the "
             "teachers place it, each teacher counting on the texts it covers"
             + (", by how steady it stays on them under Monte-Carlo dropout."
                if (manifest.get("method") or {}).get("method") == "mc" else "."), "",
             f"Width {manifest['width']}, {pooling} pooling ({pooled}), unit length.", "",
             "## Teachers", "", "| teacher | width | pooling | content hash |", "|---|---|---|---|"]
    for teacher in manifest.get("teachers") or []:
        lines.append(f"| {teacher['name']} | {teacher.get('width')} | {teacher.get('pooling')} | "
                     f"`{teacher['hash'][:16]}` |")
    method = manifest.get("method") or {}
    lines += ["", "## How it was made", "",
              f"- pair weighting: `{method.get('method')}`",
              *(f"- {key.replace('_', ' ')}: `{value}`"
                for key, value in (manifest.get("embedding") or {}).items())]
    lines += ["", "## Evaluation", ""]
    probes = ((manifest.get("evaluation") or {}).get("details") or {}).get("probes")
    if probes:
        lines += [f"On the evaluation set at step {manifest['step']}:", "",
                  *(f"- {name.replace('_', ' ')}: {100 * value:.2f}%" for name, value in
                    probes.items())]
    else:
        lines.append("No evaluation set was configured, or this checkpoint was saved between "
                     "evaluations.")
    lines += ["", "## Use", "", "```python", *KIND.words.card["use"].split("\n"), "```", "",
              "Without sentence-transformers:", "", "```python",
              "import torch", "from transformers import AutoModel, AutoTokenizer", "",
              'path = "PATH/TO/THIS/FOLDER"',
              "tokenizer, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path)",
              'batch = tokenizer(["your text here"], padding=True, truncation=True, '
              'return_tensors="pt")',
              "with torch.no_grad():", "    states = model(**batch).last_hidden_state",
              *(["mask = batch[\"attention_mask\"].unsqueeze(-1).float()",
                 "embedding = (states * mask).sum(1) / mask.sum(1)"] if pooling == "mean"
                else ["embedding = states[:, 0]"]),
              "embedding = torch.nn.functional.normalize(embedding, dim=-1)", "```", ""]
    return "\n".join(lines)
