"""The token kind: NER teachers integrated per word and span (MUKI §3.5)."""

from __future__ import annotations

from collections.abc import Sequence

from kiwb.kinds.base import (
    CheckpointReading,
    JobBehaviour,
    ResultWording,
    TeacherKind,
    TeacherKnowledge,
)
from kiwb.kinds.token.tags import read_tag_set, union_tags
from kiwb.kinds.token.units import cluster_detail, cluster_teachers


class TokenCheckpoints(CheckpointReading):
    """How NER checkpoints are recognised and read."""

    architecture_suffix = "ForTokenClassification"
    auto_model = "AutoModelForTokenClassification"
    pipeline_tag = "token-classification"
    override_key = "types"
    reads_words = True

    def read_teacher(self, outputs: Sequence[str], override: Sequence[str] | None = None,
                     scheme: str | None = None) -> TeacherKnowledge:
        """Tags read in their scheme; `override` renames the entity types (kiwb.toml labels)."""
        tags = read_tag_set(outputs, scheme=scheme, types=override)
        return TeacherKnowledge(outputs=tags.tags, classes=tags.types, scheme=tags.scheme)

    def union(self, classes: Sequence[Sequence[str]]) -> list[str]:
        """BIO2 tags: O, then B- and I- of every entity type, in teacher then type order."""
        return union_tags([entity_type for types in classes for entity_type in types])


class TokenWords(ResultWording):
    """How tables, logs, the workbench and the card speak of NER teachers."""

    title = "token classification (named entities)"
    unit = "span"
    units = "clusters"  # conflict clusters: overlapping spans of the teachers
    headline = "entity F1"
    routing_unit = "gold entities"
    short_title = "NER"
    card = {
        "summary": "A named-entity tagger over the union of its teachers' entity types (BIO2 "
                   "tags),",
        "unit": "span of words", "labels": "Tags",
        "pipeline": 'tag = pipeline("token-classification", model="PATH/TO/THIS/FOLDER", '
                    'aggregation_strategy="simple")',
        "call": 'print(tag("Alice flew to Paris."))'}
    classes_title = "entity types"
    per_class_columns = ("type", "F1")
    overall_row = "entity F1"
    histogram_title = ("Teacher confidence over its entity tags, on the words it tags as an "
                       "entity: MC dropout | plain confidence")

    def knowledge_line(self, classes, scheme) -> str:
        return f"{self.title} · entity types: {', '.join(classes)} · tags read as {scheme}"

    def conflict_row(self, text, details, teachers) -> str:
        """A cluster: its kind, the marked sentence, each teacher's tags and confidence."""
        return f"{details['kind']} · {text} · {cluster_teachers(details, teachers)}"

    def conflict_detail(self, details, teachers) -> list[tuple[str, str]]:
        return cluster_detail(details, teachers)


class TokenJobs(JobBehaviour):
    """What the shared jobs may do with NER teachers."""

    unused_settings = {"class_weighting": "it re-weights one target per text, and a tagger's "
                       "targets are per word"}
    # Confidence sent 94.3% of gold entities to a teacher that knows their type on ner-en dev,
    # rank 75.9% (BENCHMARKS.md "ner-en"): span confidences are comparable across taggers.
    default_routing = "confidence"
    labels_routing = "confidence"  # labeled spans become targets; the routing stays label-free
    adaptive_passes = False  # its routing settles per span, not per text


# Tags per word, from a *ForTokenClassification head; a teacher knows some entity types.
KIND = TeacherKind("token", TokenCheckpoints(), TokenWords(), TokenJobs())
