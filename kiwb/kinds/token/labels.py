"""The labels a user gives a token project's conflicts: each names one span of a sentence
(marked with ⟦ ⟧, as the conflicts list and `kiwb labels export` write it). The token kind's
runtime checks them (kiwb.kinds.token.worker)."""

from __future__ import annotations

from kiwb.errors import KiwbError


def check_labels(file, decisions, config) -> None:
    """A token project's labels name a span of a sentence (⟦ ⟧ marks it, as the conflicts
    list writes it): refuse one whose marks are broken or whose span is not a span of any
    text of the project's data, naming it."""
    from kiwb.kinds.token.units import read_marked

    sentences = sentence_lengths(config)
    for decision in decisions:
        marked = read_marked(decision.text)
        shown = decision.text if len(decision.text) <= 60 else decision.text[:57] + "..."
        if marked is None:
            raise KiwbError(f"{file}: {shown!r} marks no span: a label of an NER project names "
                            "one span of a sentence between ⟦ and ⟧, as kiwb labels export "
                            "writes it")
        sentence, start, end = marked
        if sentence not in sentences or end > sentences[sentence]:
            raise KiwbError(f"{file}: the span of {shown!r} no longer matches a text of the "
                            "project's data (the sentence changed, or its words are split "
                            "otherwise); label it again in the Conflicts pane or fix the text")


def sentence_lengths(config) -> dict[str, int]:
    """Every sentence of the project's data sets, its words joined by spaces (as a marked
    span's sentence reads), and its number of words."""
    from kiwb.kinds.token.data import load_role_table
    from kiwb.project.config_schema import DATASET_ROLES

    specs = [(role, spec) for role in DATASET_ROLES if (spec := getattr(config.data, role))]
    return {" ".join(words): len(words) for role, spec in specs
            for words in load_role_table(config.resolve(spec.path, allow_hub_id=False), spec,
                                         role, config).words}
