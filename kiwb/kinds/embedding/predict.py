"""`kiwb predict` with a sentence encoder: each given text's nearest neighbours among the
others, with their cosines; of two texts, their similarity."""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape

from kiwb.console import one_line


def nearest_neighbours(folder: Path, texts: list[str], top: int = 3) -> list[str]:
    """The embedding kind's predict: one line per text (Rich markup)."""
    import torch
    from transformers import AutoTokenizer

    from kiwb.kinds.embedding.encoders import read_pooling_rule
    from kiwb.kinds.embedding.scoring import encode_texts
    from kiwb.kinds.embedding.student import EmbeddingStudent, recorded_pooling

    rule = read_pooling_rule(folder, recorded_pooling(folder))
    model = EmbeddingStudent(()).load_checkpoint(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    # as far as an export reads (its sentence_bert_config.json), as SentenceTransformer would
    unit = encode_texts(model, tokenizer, texts, rule.pooling, rule.max_length or 512, 32,
                        torch.device("cpu"))
    if len(texts) == 2:
        return [f"similarity [bold]{float(unit[0] @ unit[1]):.3f}[/bold]\t{escape(one_line(texts[0])[:40])} "
                f"⟷ {escape(one_line(texts[1])[:40])}"]
    similarity = unit @ unit.T
    similarity.fill_diagonal_(-torch.inf)
    lines = []
    for row, text in enumerate(texts):
        if len(texts) < 2:
            lines.append(f"{escape(one_line(text)[:60])}\t(no other text to compare with: give two or more)")
            continue
        values, indices = similarity[row].topk(min(top, len(texts) - 1))
        shown = "  ".join(f"{float(v):.3f} {escape(one_line(texts[int(i)])[:30])}"
                          for v, i in zip(values, indices, strict=True))
        lines.append(f"[bold]{escape(one_line(text)[:60])}[/bold]\t{shown}")
    return lines
