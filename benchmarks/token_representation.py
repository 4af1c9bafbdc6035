"""Can NER taggers be routed from their word representations? (issue 42, point 4), on ner-en.

    python benchmarks/token_representation.py            # ner_en.py's teachers (made when missing)

For each teacher (ner_en.py's: A knows LOC and MISC, B ORG and PER) one dropout-off forward per
sentence gives, per word (its first sub-token), the input of the tagger's classifier (the last
hidden state) and its tag. Class means are fitted per teacher as the sequence kind's
`mahalanobis` fits them, with kiwb's settings (SEED_SHARE, SHRINKAGE): the classes are the
entity types it predicts and O, seeded on the share of pool words it is surest of per class
(logit margin), one covariance shrunk toward its diagonal. A word's score, read as the teacher's quantile over the pool's words:
- "entity vs O": the squared distance to O's mean minus that to its nearest entity type's:
  how much more the word looks like an entity the teacher knows than like the rest;
- "nearest entity type": minus the squared distance to its nearest entity type's mean.
A gold entity of dev goes to the teacher with the highest mean score over its words; routing is
right when that teacher knows the entity's type. Beside them, on the same spans, from the
teacher's outputs: the probability it gives the word of being an entity of its types (1 - P(O)),
and its dropout-off confidence over its tags, as a quantile (rank) and as it is.
kiwb's own NER routing (MC confidence over clusters of predicted spans) is ner_en.py's figure.
Writes benchmarks/out/ner/token_representation.json and its BENCHMARKS.md section.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import debian8  # noqa: E402  (it puts this checkout's kiwb on sys.path)
import ner_en  # noqa: E402

POOL_SENTENCES = 2000
SCORES = ("entity vs O", "nearest entity type", "P(an entity of its types)", "confidence",
          "confidence (raw)")


def spans(tags: list[str]) -> list[tuple[int, int, str]]:
    """(start, stop, type) of each BIO2 entity."""
    found, start, kind = [], None, None
    for position, tag in enumerate([*tags, "O"]):
        if start is not None and not tag.startswith("I-"):
            found.append((start, position, kind))
            start = None
        if tag.startswith("B-") or (tag.startswith("I-") and start is None):
            start, kind = position, tag[2:]
    return found


def word_arrays(folder: Path, rows: list[dict]):
    """Per word of every row: the tagger's classifier input, its logits, and the row index."""
    import torch
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForTokenClassification.from_pretrained(folder).eval()
    hidden, logits, rows_of = [], [], []
    with torch.no_grad():
        for start in range(0, len(rows), 32):
            chunk = rows[start:start + 32]
            encoded = tokenizer([r["tokens"] for r in chunk], is_split_into_words=True,
                                truncation=True, max_length=128, padding=True, return_tensors="pt")
            output = model(**encoded, output_hidden_states=True)
            for row in range(len(chunk)):
                firsts, previous = {}, None
                for position, word in enumerate(encoded.word_ids(row)):
                    if word is not None and word != previous:
                        firsts[word] = position
                    previous = word
                for word in range(len(chunk[row]["tokens"])):
                    position = firsts.get(word)  # a word cut by truncation has none
                    if position is None:
                        hidden.append(torch.full((model.config.hidden_size,), float("nan")))
                        logits.append(torch.full((model.config.num_labels,), float("nan")))
                    else:
                        hidden.append(output.hidden_states[-1][row, position])
                        logits.append(output.logits[row, position])
                    rows_of.append(start + row)
    names = [model.config.id2label[i] for i in range(model.config.num_labels)]
    return torch.stack(hidden).double(), torch.stack(logits).double(), names


def classes_of(logits, names: list[str]):
    """Each word's predicted class: its tag's entity type, or O; and the class names."""
    import torch

    kinds = sorted({name[2:] for name in names if name != "O"})
    class_names = ["O", *kinds]
    index = [0 if name == "O" else 1 + kinds.index(name[2:]) for name in names]
    return torch.tensor(index)[logits.nan_to_num(-1e9).argmax(1)], class_names


def scores_by_teacher(pool: dict, evaluation: dict) -> dict:
    """Per teacher, per word of dev: each score as a quantile over the pool's words."""
    import torch

    from kiwb.core.quantiles import empirical_cdf
    from kiwb.core.representation_routing import SEED_SHARE, SHRINKAGE, fit_class_gaussians

    found = {}
    for teacher, (hidden, logits, names) in pool.items():
        classes, class_names = classes_of(logits, names)
        valid = ~hidden.isnan().any(1)
        top_two = logits.topk(2, dim=1).values
        margin = top_two[:, 0] - top_two[:, 1]
        chosen = []
        for label in torch.unique(classes[valid]):
            rows = (valid & (classes == label)).nonzero().squeeze(1)
            count = max(1, math.ceil(SEED_SHARE * len(rows)))
            chosen.append(rows[margin[rows].argsort(descending=True)[:count]])
        rows = torch.cat(chosen)
        gaussians = fit_class_gaussians(hidden[rows], classes[rows], SHRINKAGE)
        present = torch.unique(classes[rows]).tolist()  # the class of each mean, in order

        def raw(words_hidden, words_logits, gaussians=gaussians, present=present, names=names):
            distances = gaussians.squared_distances(words_hidden.nan_to_num(0.0))
            entity = [i for i, label in enumerate(present) if label != 0]
            nearest = distances[:, entity].min(1).values
            o_distance = distances[:, present.index(0)]
            probs = words_logits.softmax(1)
            confidence = 1 - (-(probs * probs.clamp_min(1e-12).log()).sum(1)) / math.log(probs.shape[1])
            outside = names.index("O")
            return {"entity vs O": o_distance - nearest, "nearest entity type": -nearest,
                    "confidence": confidence, "P(an entity of its types)": 1 - probs[:, outside]}

        reference = raw(hidden[valid], logits[valid])
        dev_hidden, dev_logits, _ = evaluation[teacher]
        mine = raw(dev_hidden, dev_logits)
        found[teacher] = {name: empirical_cdf(values.sort().values, mine[name]).float()
                          for name, values in reference.items()}
        found[teacher]["confidence (raw)"] = mine["confidence"].float()
        found[teacher]["tags an entity"] = dev_logits.nan_to_num(0.0).argmax(1) != names.index("O")
        found[teacher]["types"] = [name for name in class_names if name != "O"]
    return found


def route(rows: list[dict], scores: dict, types: dict[str, tuple]) -> dict:
    """Share of dev's gold entities routed to a teacher that knows their type, per score."""
    import torch

    offsets, at = [], 0
    for row in rows:
        offsets.append(at)
        at += len(row["tokens"])
    entities = [(offsets[i] + start, offsets[i] + stop, kind)
                for i, row in enumerate(rows) for start, stop, kind in spans(row["tags"])]
    teachers = list(types)
    # the entities some teacher tags (an entity tag on one of its words): those kiwb's own NER
    # routing, over clusters of the teachers' predicted spans, decides
    touched = [any(bool(scores[t]["tags an entity"][start:stop].any()) for t in teachers)
               for start, stop, _ in entities]
    found = {}
    for name in SCORES:
        right = []
        for start, stop, kind in entities:
            means = torch.stack([scores[t][name][start:stop].nan_to_num(0.0).mean() for t in teachers])
            right.append(kind in types[teachers[int(means.argmax())]])
        found[name] = sum(right) / len(entities)
        found[f"{name} (tagged)"] = sum(r for r, t in zip(right, touched, strict=True) if t) / max(1, sum(touched))
    found["entities"] = len(entities)
    found["tagged entities"] = sum(touched)
    return found


def kiwb_routing(teachers: dict, dev: Path, base: str) -> dict:
    """kiwb's own NER routing of the same teachers on dev (MC confidence over clusters of their
    predicted spans, K = 16): a project whose pool and eval set are dev, scored and integrated."""
    project = ner_en.write_project(ner_en.OUT / "routing-check", teachers, dev, dev, base,
                                   "confidence")
    debian8.kiwb("score", project, "--foreground", log=ner_en.OUT / "commands.log")
    done = debian8.kiwb("integrate", project, "--json", log=ner_en.OUT / "commands.log")
    summary = json.loads(done["stdout"])
    return {"routing": summary["eval"]["routing_accuracy"]["chosen"],
            "ensemble": summary["eval"]["ensemble_accuracy"]}


def main() -> None:
    base = debian8.minilm_path()
    data = ner_en.split_data()
    for name, kinds in ner_en.TEACHERS.items():
        ner_en.train_teacher(name, kinds, data, base)
    train = [json.loads(line) for line in data["train"].read_text().splitlines()]
    dev = [json.loads(line) for line in data["dev"].read_text().splitlines()]
    pool_rows = debian8.spread(train, POOL_SENTENCES)
    teachers = {name: ner_en.OUT / f"teacher_{name}" for name in ner_en.TEACHERS}
    cache = ner_en.OUT / "word_arrays.pt"  # the forwards take minutes; the scores seconds
    if cache.exists():
        import torch

        pool, evaluation = torch.load(cache, weights_only=True).values()
    else:
        import torch

        pool = {name: word_arrays(folder, pool_rows) for name, folder in teachers.items()}
        evaluation = {name: word_arrays(folder, dev) for name, folder in teachers.items()}
        torch.save({"pool": pool, "evaluation": evaluation}, cache)
    scores = scores_by_teacher(pool, evaluation)
    results = {"pool_sentences": len(pool_rows), "dev_sentences": len(dev),
               "routing": route(dev, scores, ner_en.TEACHERS)}
    results["kiwb_routing_dev"] = kiwb_routing(teachers, data["dev"], base)
    (ner_en.OUT / "token_representation.json").write_text(json.dumps(results, indent=2))
    from report import write_section

    write_section("token representation", "benchmarks/token_representation.py", render(results))
    print(render(results))


def render(results: dict) -> str:
    routing = results["routing"]
    lines = ["## NER taggers routed from their word representations (issue 42)", "",
             f"ner-en dev, {routing['entities']:,} gold entities of {results['dev_sentences']:,} "
             f"sentences; class means fitted on {results['pool_sentences']:,} train sentences' "
             "words (see the script's docstring). Share of gold entities whose best-scored "
             "teacher knows their type:", "",
             "| score per word (mean over the entity's words) | every gold entity (%) | "
             f"the {routing['tagged entities']:,} some teacher tags (%) |", "|---|---|---|"]
    for name in SCORES:
        lines.append(f"| {name} | {100 * routing[name]:.1f} | {100 * routing[f'{name} (tagged)']:.1f} |")
    kiwb_routing_dev = results.get("kiwb_routing_dev")
    if kiwb_routing_dev:
        lines += ["", "kiwb's own NER routing of the same teachers on dev (`confidence`: MC "
                  "dropout, K = 16, over clusters of the spans the teachers tag, routing right "
                  f"per gold entity a teacher's span touches): {100 * kiwb_routing_dev['routing']:.1f}%.",
                  "", "A word-level confidence is high where a tagger is sure of O, which is what "
                  "it says of the entities it does not know; hence its low figures. The "
                  "representation scores do no better than the tagger's own P(entity), and "
                  "both stay below kiwb's span-cluster routing, so the token kind keeps "
                  "`confidence` (the representation routings refuse taggers in one line)."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
