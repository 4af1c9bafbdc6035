"""The embedding kind: sentence encoders merged into one encoder that places every pair of
texts as the teachers do (SimME, thesis ch. 2), each teacher counting on the pairs of texts it
covers, by how steady it stays on them under dropout.

A project is an embedding project when its kiwb.toml has an [embedding] table; its teachers are
sentence encoders (a sentence-transformers folder, or a bare encoder with pooling set in its
[[teachers]] entry). What is the kind's own: reading an encoder's pooling (encoders.py),
checking the teachers (teachers.py), scoring (scoring.py: the embedding, its MC dispersion
(stability.py) and how much of each text the teacher reads), the probe data (data.py), the
integration (integrate_job.py: coverage, reliability, conflicting pairs (conflicts.py)), the
relational loss (relational.py), the student (student.py, training.py), the probes (probes.py)
and the export (export.py: a sentence-transformers folder).
"""

from __future__ import annotations

from collections.abc import Sequence

from kiwb.core.choices import PAIR_WEIGHTINGS
from kiwb.kinds.base import (
    CheckpointReading,
    JobBehaviour,
    ResultWording,
    TeacherKind,
    TeacherKnowledge,
    method_refusal,
)

POOLING_KEY = "kiwb_pooling"  # a kiwb embedding student's pooling, in its config.json
SIMILAR, NOT_SIMILAR = "similar", "not similar"  # what a user may say of a conflicting pair
# The probes' names as tables show them (kiwb.kinds.embedding.probes computes them).
PROBE_NAMES = {"knn_accuracy": "kNN accuracy", "recall@1": "recall@1", "recall@10": "recall@10",
               "mrr": "MRR"}
PAIR_JOINER = " ⟷ "  # between a conflicting pair's two texts: the text its label is kept under
# What a teacher's score shards hold per text (kiwb.kinds.embedding.scoring).
EMBEDDINGS = "embedding"     # (n, d) the teacher's embedding, dropout off, unit length
DISPERSION = "dispersion"    # (n,) 1 - mean cosine of the K dropout embeddings to their mean
STABILITY = "stability"      # (n,) 1 - dispersion
# (n,) -log10(dispersion) / 4 within [0, 1], what the live histograms count: dropout moves an
# encoder's embedding little (dispersions of 1e-4 to 1e-1), so [0, 1] needs a log scale
STEADINESS = "steadiness"
KEPT_SHARE = "kept_share"    # (n,) share of the text's tokens inside max_length
KNOWN_SHARE = "known_share"  # (n,) share of the text's tokens that are not the unknown token


class EmbeddingCheckpoints(CheckpointReading):
    """How embedding checkpoints are recognised and read."""

    architecture_suffix = "Model"
    auto_model = "AutoModel"
    pipeline_tag = "sentence-similarity"
    override_key = "pooling"
    declared_by = "embedding"
    # A kiwb student's config.json names its pooling: its checkpoints and exports are read as
    # encoders (kiwb predict, evaluate). A bare encoder is a teacher only in a project with an
    # [embedding] table, which reads its teachers itself.
    config_key = POOLING_KEY
    unused_weights = ("pooler.",)
    trained_teacher = "a trained sentence encoder"

    def checkpoint_facts(self, model_config, folder, teacher, head_kind):
        from kiwb.kinds.embedding.encoders import checkpoint_facts

        return checkpoint_facts(model_config, folder, teacher, head_kind)

    def read_teacher(self, outputs: Sequence[str], override: Sequence[str] | None = None,
                     scheme: str | None = None) -> TeacherKnowledge:
        """An encoder has no outputs to name: what it knows is its embedding space."""
        return TeacherKnowledge(outputs=(), classes=())

    def union(self, classes: Sequence[Sequence[str]]) -> list[str]:
        return []


class EmbeddingWords(ResultWording):
    """How tables, logs, the workbench and the card speak of embedding teachers."""

    title = "sentence embedding"
    unit = "pair"
    units = "texts"
    # kNN accuracy where the eval set has labels, else retrieval MRR (the checkpoint kept)
    headline = "probe score"
    second_figure = "retrieval MRR (or the probe score)"
    accuracy_columns = ("probe score", "MRR or score")
    routing_unit = "texts"
    short_title = "embedding"
    classes_title = "dimensions"
    histogram_title = ("Each teacher on the unlabeled texts: steadiness under MC dropout "
                       "(-log10 of the dispersion / 4; 1: the passes agree to 1e-4) | share of "
                       "each text it reads")
    histogram_names = ("steadiness", "share read")
    card = {
        "summary": "A sentence encoder merged from several teachers' embedding spaces (SimME's "
                   "relational distillation),",
        "unit": "pair of texts", "labels": "Teachers",
        "use": 'from sentence_transformers import SentenceTransformer\n'
               'model = SentenceTransformer("PATH/TO/THIS/FOLDER")\n'
               'print(model.encode(["your text here"]).shape)'}
    figure_names = PROBE_NAMES

    def report_tables(self, integration, shared_facts) -> list:
        from kiwb.kinds.embedding.report import integration_tables

        return integration_tables(integration, self.figure_names, shared_facts)

    def knowledge_line(self, classes, scheme) -> str:
        return f"sentence encoder · {', '.join(classes)}"

    def best_text(self, best) -> str:
        if (best.get("details") or {}).get("probes"):  # each probe by name, as the step lines
            return _probes_text(best)
        # "macro_f1" is retrieval MRR where the eval set has partner texts, else the probe
        # score itself (probe_report), which is then not said twice.
        mrr = best.get("macro_f1")
        said = f", retrieval MRR {100 * mrr:.2f}%" if mrr not in (None, best["accuracy"]) else ""
        return f"{self.headline} {100 * best['accuracy']:.2f}%{said}"

    def evaluation_text(self, metrics) -> str:
        """Every probe by name (the headline alone says nothing of which probe it is)."""
        return "eval " + _probes_text(metrics)

    def integrated_line(self, summary) -> str | None:
        details = summary.details or {}
        steadiest = ", ".join(f"{teacher} {count:,}" for teacher, count in summary.wins.items())
        covered = ", ".join(f"{facts.name} {100 * facts.own['coverage']:.0f}%"
                            for facts in summary.per_teacher
                            if facts.own and "coverage" in facts.own)
        return (f"Integrated {summary.num_texts:,} texts ({details.get('weighting')} pair "
                f"weighting): steadiest teacher per text {steadiest}; covered {covered}; "
                f"{summary.conflicts:,} conflicting pairs listed")

    def conflict_row(self, text, details, teachers) -> str:
        """A pair: both texts, and each teacher's cosine of them."""
        said = " · ".join(f"{name} {cosine:.2f}" for name, cosine in
                          zip(teachers, details["cosines"], strict=False) if cosine is not None)
        return f"{details['texts'][0]} ⟷ {details['texts'][1]} · {said}"

    def conflict_detail(self, details, teachers) -> list[tuple[str, str]]:
        lines = [("the other text of the pair:", "bold"), (details["texts"][1], ""),
                 ("each teacher's cosine of the two:", "bold")]
        for name, cosine in zip(teachers, details["cosines"], strict=False):
            lines.append((f"{name}: " + ("does not cover both texts" if cosine is None
                                          else f"{cosine:.3f}"), "dim" if cosine is None else ""))
        return lines


class EmbeddingJobs(JobBehaviour):
    """What the shared jobs may do with embedding teachers."""

    labels_routing = "rank"  # unused: labels given to pairs become pair targets
    adaptive_passes = False  # no routing settles per text
    stored_fields = (EMBEDDINGS, DISPERSION, STABILITY, KEPT_SHARE, KNOWN_SHARE)
    histogram_fields = (STEADINESS, KEPT_SHARE)
    routes = False
    methods = PAIR_WEIGHTINGS
    # its pairs are weighed by [integration] method (a pair weighting), never routed
    unused_settings = dict.fromkeys(
        ("tau", "reweight", "use_mc", "conflict_threshold", "class_weighting"),
        "sentence encoders' pairs are weighed by [integration] method (a pair weighting), "
        "not routed between teachers")
    supervised = False  # gold labels of pairs are judgements, fed back with --given-labels
    merge_refusal = ("kiwb merge does not merge an embedding project's encoders: their widths, "
                     "tokenizers and pooling differ in general and no head is shared to merge; "
                     "distill them instead (kiwb train)")

    def configured_method(self, config) -> str:
        return config.embedding.weighting if config.embedding is not None else PAIR_WEIGHTINGS[0]

    def check_method(self, title: str, method: str) -> None:
        if method not in self.methods:
            raise ValueError(method_refusal(method, title, self.methods,
                                            f"choose a pair weighting: {', '.join(self.methods)}"))

    def conflict_labels(self, details, labels) -> list[str]:
        return [SIMILAR, NOT_SIMILAR]


# Sentence encoders: one embedding per text, compared by cosine.
KIND = TeacherKind("embedding", EmbeddingCheckpoints(), EmbeddingWords(), EmbeddingJobs())


def _probes_text(metrics) -> str:
    """'kNN accuracy 95.2%, recall@1 …': every probe of an evaluation by name."""
    probes = (metrics.get("details") or {}).get("probes") or {}
    return ", ".join(f"{PROBE_NAMES.get(name, name)} {100 * value:.1f}%" for name, value in probes.items())
