"""Tiny real data for multi-task tests: each text is mostly one topic of tiny.TOPICS (its
`topic`, a single-label task), and sometimes mentions a second one; `tags` (a multi-label task)
lists every topic it mentions."""

from __future__ import annotations

import random

from tiny import FILLER, TOPICS


def make_multitask_texts(count: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    topics = list(TOPICS)
    rows = []
    for i in range(count):
        topic = topics[i % len(topics)]
        words = rng.choices(TOPICS[topic].split(), k=rng.randint(4, 7))
        tags = [topic]
        if i % 3 == 0:  # a few words of a second topic: a second tag, the same topic
            other = rng.choice([t for t in topics if t != topic])
            words += rng.choices(TOPICS[other].split(), k=2)
            tags = sorted([topic, other], key=topics.index)
        words += rng.choices(FILLER, k=rng.randint(1, 4))
        rng.shuffle(words)
        rows.append({"text": " ".join(words), "topic": topic, "tags": tags})
    return rows
