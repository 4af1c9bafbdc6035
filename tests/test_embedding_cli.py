"""The embedding kind end to end through the real CLI, on two tiny real sentence encoders of
different widths and tokenizers: a 32-wide BERT laid out as sentence-transformers writes one,
and a 48-wide RoBERTa read with pooling set in kiwb.toml. Score, integrate (coverage, the
teachers' probes, conflicting pairs), train with each pair weighting, evaluate, export (loaded
by sentence-transformers and as a plain AutoModel, the same embeddings), predict."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_helpers import run_kiwb
from tiny import tiny_bert_config, wordpiece_tokenizer, write_jsonl
from tiny_embedding import build_encoder, probe_rows

pytestmark = pytest.mark.slow

TRAINING = """
[training]
student = "{student}"
epochs = 2
min_steps = 0
learning_rate = 0.003
batch_size = 16
eval_every = 6
"""


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    import torch
    from transformers import BertModel

    root = tmp_path_factory.mktemp("embedding")
    build_encoder(root / "general", "bert", seed=1, sentence_transformers=True)
    build_encoder(root / "domain", "roberta", seed=2, sentence_transformers=False)
    torch.manual_seed(0)
    tokenizer = wordpiece_tokenizer(None)
    BertModel(tiny_bert_config(("x", "y"), len(tokenizer))).save_pretrained(root / "base")
    tokenizer.save_pretrained(root / "base")
    write_jsonl(root / "pool.jsonl", [{"text": r["text"]} for r in probe_rows(64, seed=31)])
    write_jsonl(root / "eval.jsonl", probe_rows(32, seed=32))
    return root


def write_embedding_project(project: Path, root: Path, *, embedding: str = "[embedding]",
                            teachers: str | None = None, eval_columns: str = (
                                'label_column = "label"\npair_column = "partner"')) -> Path:
    project.mkdir(parents=True, exist_ok=True)
    teachers = teachers if teachers is not None else (
        f'[[teachers]]\nname = "general"\npath = "{root / "general"}"\n'
        f'[[teachers]]\nname = "domain"\npath = "{root / "domain"}"\npooling = "cls"\n')
    (project / "kiwb.toml").write_text("\n".join([
        'name = "embed"', teachers, embedding,
        f'[data.unlabeled]\npath = "{root / "pool.jsonl"}"',
        f'[data.eval]\npath = "{root / "eval.jsonl"}"\n{eval_columns}',
        "[scoring]\nmc_passes = 4\nshard_size = 32\nmax_length = 64",
        TRAINING.format(student=root / "base")]) + "\n", encoding="utf-8")
    return project


@pytest.fixture(scope="module")
def scored(root, tmp_path_factory) -> Path:
    project = write_embedding_project(tmp_path_factory.mktemp("project") / "embed", root)
    run_kiwb("score", project, "--foreground", cwd=project)
    return project


def test_integration_reads_two_widths_and_probes_each_teacher(scored):
    found = run_kiwb("integrate", scored, "--json", cwd=scored)
    summary = json.loads(found.stdout)
    assert summary["teachers_kind"] == "embedding" and summary["teachers"] == ["general", "domain"]
    details = summary["details"]
    own = {each["name"]: each["own"] for each in summary["per_teacher"]}
    assert {name: found["width"] for name, found in own.items()} == {"general": 32, "domain": 48}
    # short texts, known words
    assert {name: found["coverage"] for name, found in own.items()} == {"general": 1.0, "domain": 1.0}
    # printed in details too, as before (deprecated)
    assert details["widths"] == {"general": 32, "domain": 48}
    assert sum(summary["wins"].values()) == summary["num_texts"] == 64
    rows = details["eval"]["rows"]
    assert set(rows) == {"general", "domain", "concatenation", "average"}
    for figures in rows.values():
        assert set(figures) == {"knn_accuracy", "recall@1", "recall@10", "mrr"}
        assert 0.0 <= figures["recall@1"] <= figures["recall@10"] <= 1.0
    assert 0 < summary["conflicts"] <= 500 and details["pairs"] == summary["conflicts"]


def test_a_routing_setting_is_refused_in_one_line_not_ignored(scored):
    """Sentence encoders' pairs are weighed by their method, never routed: a routing knob set
    away from its default is refused before a job starts, where it once did nothing."""
    from test_bad_input import assert_refused

    for flags, named in ((["--no-mc"], "use_mc = false"), (["--tau", "0.5"], "tau = 0.5"),
                         (["--class-weighting", "0.5"], "class_weighting = 0.5")):
        assert_refused(run_kiwb("integrate", scored, *flags, cwd=scored, check=False),
                       f"[integration] {named} does not apply to sentence embedding teachers",
                       "leave it at its default")
    assert_refused(run_kiwb("train", scored, "--no-mc", cwd=scored, check=False),
                   "use_mc = false does not apply")


@pytest.mark.parametrize("weighting", ["mc", "maskout", "equal"])
def test_a_student_trains_with_each_pair_weighting(scored, weighting):
    run = f"student-{weighting}"
    found = run_kiwb("train", scored, "--method", weighting, "--run", run, "--foreground",
                     cwd=scored)
    assert f"Training run {run} ({weighting})" in found.stderr
    # the closing line names each probe as the step lines do, not a "probe score"
    best = next(line for line in found.stderr.splitlines() if line.startswith("Best eval"))
    assert re.fullmatch(r"Best eval .*kNN accuracy \d+\.\d%.*MRR \d+\.\d%.* at step \d+", best)
    assert "probe score" not in best
    assert ": eval kNN accuracy " in found.stderr and ", MRR " in found.stderr  # each probe named
    evaluated = json.loads(run_kiwb("evaluate", scored, "--run", run, "--json", cwd=scored).stdout)
    assert set(evaluated["details"]["probes"]) == {"knn_accuracy", "recall@1", "recall@10", "mrr"}


def test_the_export_loads_in_sentence_transformers_and_as_a_plain_encoder(scored, tmp_path):
    import torch
    from transformers import AutoModel, AutoTokenizer

    run_kiwb("train", scored, "--method", "maskout", "--run", "exported", "--foreground",
             cwd=scored)
    out = tmp_path / "export"
    run_kiwb("export", scored, "--run", "exported", "--to", out, cwd=scored)
    texts = ["the team won the match", "a new song on the radio"]
    # the documented snippet for a plain transformers encoder: mean pooling, then unit length
    tokenizer, model = AutoTokenizer.from_pretrained(out), AutoModel.from_pretrained(out)
    batch = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
    with torch.no_grad():
        states = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    plain = torch.nn.functional.normalize((states * mask).sum(1) / mask.sum(1), dim=-1)
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "embedding = (states * mask).sum(1) / mask.sum(1)" in card
    from sentence_transformers import SentenceTransformer

    encoded = SentenceTransformer(str(out), device="cpu").encode(texts, convert_to_tensor=True)
    assert encoded.shape == (2, 32)
    assert torch.allclose(encoded.cpu(), plain, atol=1e-5)
    predicted = run_kiwb("predict", out, *texts, cwd=scored).stdout
    expected = float(plain[0] @ plain[1])
    assert f"similarity {expected:.3f}" in predicted


def _bert_classifier(folder: Path) -> Path:
    """A tiny BERT text classifier (a head, not an encoder)."""
    from tiny import build_teacher

    return build_teacher(folder, "bert", ("sports", "politics"), trained=False, seed=5)


@pytest.mark.parametrize("case", ["no-pooling-rule", "classifier", "probe-columns"])
def test_bad_input_is_one_line_and_nothing_is_scored(root, tmp_path, case):
    from test_bad_input import assert_refused, score_files

    general = f'[[teachers]]\nname = "general"\npath = "{root / "general"}"\n'
    if case == "no-pooling-rule":  # the bare RoBERTa without pooling = "..."
        teachers = general + f'[[teachers]]\nname = "domain"\npath = "{root / "domain"}"\n'
        fragments = ("teacher 'domain'", "encoder without a pooling rule", 'pooling = "mean"')
        project = write_embedding_project(tmp_path / case, root, teachers=teachers)
    elif case == "classifier":
        classifier = _bert_classifier(tmp_path / "classifier")
        teachers = general + f'[[teachers]]\nname = "topics"\npath = "{classifier}"\n'
        fragments = ("teacher 'topics'", "single-label text classification model",
                     "BertForSequenceClassification", "merges sentence encoders")
        project = write_embedding_project(tmp_path / case, root, teachers=teachers)
    else:  # an eval set with neither labels nor partners
        fragments = ("eval.jsonl", "[data.eval] of an embedding project", "label_column",
                     "pair_column")
        project = write_embedding_project(tmp_path / case, root, eval_columns="")
    assert_refused(run_kiwb("score", project, cwd=project, check=False), *fragments)
    assert score_files(project) == []


def test_a_judged_pair_takes_the_wrong_teacher_off_its_texts(scored, tmp_path):
    # The first conflicting pair, judged "similar" by kiwb labels import, as the Conflicts
    # pane would store it: with --given-labels the integration takes the teacher that parts the two
    # off both texts, and a run trains on that.
    first = json.loads(run_kiwb("integrate", scored, "--json", cwd=scored).stdout)
    from kiwb.project.store import Store

    with Store(Path(scored) / "store.sqlite") as store:
        text = store.connection.execute(
            "SELECT text FROM instances WHERE integration = ? ORDER BY margin, row LIMIT 1",
            (first["key"],)).fetchone()[0]
    labels = tmp_path / "labels.jsonl"
    write_jsonl(labels, [{"text": text, "label": "similar"}])
    run_kiwb("labels", "import", scored, labels, cwd=scored)
    judged = json.loads(run_kiwb("integrate", scored, "--labels", "--json", cwd=scored).stdout)
    assert judged["details"]["judgements"] == {"pairs": 1, "places_taken": 2}
    assert judged["key"] != first["key"]
    run_kiwb("train", scored, "--labels", "--run", "judged", "--foreground", cwd=scored)
    manifest = json.loads((Path(scored) / "runs" / "judged" / "manifest.json").read_text())
    assert manifest["given_labels"] is not None
    # the run pins the integration its inputs make: the judged one kiwb integrate recorded
    assert manifest["integration"] == judged["key"]


def test_the_direct_term_trains_its_projections_and_leaves_them_out_of_the_export(root, tmp_path):
    from safetensors.torch import load_file

    project = write_embedding_project(tmp_path / "direct", root,
                                      embedding="[embedding]\ndirect_weight = 0.5")
    run_kiwb("score", project, "--foreground", cwd=project)
    run_kiwb("train", project, "--run", "direct", "--foreground", cwd=project)
    checkpoint = sorted((project / "runs" / "direct" / "checkpoints").glob("step-*"))[-1]
    kept = {name for file in checkpoint.glob("*.safetensors") for name in load_file(file)}
    # one projection per teacher, to its own width: 32 (general) and 48 (domain)
    assert {"kiwb_feature_adapters.0.weight", "kiwb_feature_adapters.1.weight"} <= kept
    shapes = {name: tuple(value.shape) for file in checkpoint.glob("*.safetensors")
              for name, value in load_file(file).items() if name.startswith("kiwb_feature")}
    assert shapes["kiwb_feature_adapters.0.weight"] == (32, 32)
    assert shapes["kiwb_feature_adapters.1.weight"] == (48, 32)
    out = tmp_path / "export"
    run_kiwb("export", project, "--run", "direct", "--to", out, cwd=project)
    exported = {name for file in out.glob("*.safetensors") for name in load_file(file)}
    assert exported and not any(name.startswith("kiwb_feature") for name in exported)
    three = ["the team won the match", "a new song on the radio", "the coach and the team"]
    lines = run_kiwb("predict", out, *three, "--top", "1", cwd=project).stdout.splitlines()
    assert len(lines) == 3 and all(line.count(" ") > 3 for line in lines)
