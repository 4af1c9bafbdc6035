"""`routing = "auto"` for single-label teachers: the routing this project's teachers route
best with, chosen when it integrates (kiwb.core.routing_choice has the rule and its figures).

With enough labeled texts (the eval set's, [data.labeled]'s and, with `labels`, those given to
pool texts), every label-free routing is fitted on the pool as usual and measured on them; the
best is taken and its cross-validated figure reported. Without, the label-free choice. Either
way the integration records the table it chose from (RoutingChoice), and training, which
integrates again, makes the same choice from the same scores.
"""

from __future__ import annotations

from dataclasses import replace

from kiwb.core import routing as routes
from kiwb.core import routing_choice as choice_rule
from kiwb.core.choices import AUTO_ROUTING, READS_REPRESENTATION
from kiwb.core.representation_routing import pool_problem
from kiwb.errors import DataError
from kiwb.project.records import IntegrationSettings, RoutingChoice
from kiwb.project.store import Store


def is_auto(settings: IntegrationSettings) -> bool:
    return settings.routing == AUTO_ROUTING


def representations_complete(store: Store, tasks: list) -> bool:
    """Whether every task's teacher representation is stored whole (a project scored before
    kiwb kept them, or with [scoring] representation = "none", has none)."""
    return bool(tasks) and all(
        task.representation is not None
        and len(store.done_shards(task.representation.key)) == task.representation.num_shards
        for task in tasks)


def reads_representation(settings: IntegrationSettings, store: Store, tasks: list) -> bool:
    """Whether the integration loads the teachers' representations: its routing reads them,
    or it chooses its routing and they are there to be measured."""
    if is_auto(settings):
        return representations_complete(store, tasks)
    return settings.routing in READS_REPRESENTATION


def labeled_for_choice(parts: list[tuple[str, object | None]]):
    """The labeled scores to choose on, joined (eval first), and which sets they came from in
    words; (None, "") when none has labels. `parts`: (name, TeacherScores or None)."""
    found, names = None, []
    for name, scores in parts:
        if scores is None or not scores.true_labels:
            continue
        found = scores if found is None else found.joined(scores)
        names.append(name)
    return found, " + ".join(names)


def choose_routing(settings: IntegrationSettings, pool, labeled, where: str, seen=None,
                   representations: bool = True) -> tuple[IntegrationSettings, RoutingChoice]:
    """The settings with "auto" replaced by the routing chosen (and the signal it reads), and
    the record of the choice. `pool` and `labeled`: TeacherScores (kiwb.kinds.sequence.
    integration), `labeled` None without labels; `representations`: whether their
    representations were loaded (else the routings reading them are left out, and said so)."""
    pool_features = pool.features()
    too_few = pool_problem(pool_features) if representations else None
    options = choice_rule.candidates(mc=settings.use_mc,
                                     representations=representations and too_few is None)
    # on a tie the earliest wins: the label-free choice first, so labels that cannot tell
    # routings apart leave it as it would be without them
    label_free, why = choice_rule.label_free_choice(options)
    options = [label_free] + [option for option in options if option != label_free]
    left_out = None
    if not representations and settings.use_mc:
        left_out = (f"{', '.join(READS_REPRESENTATION)}: the scores hold no teacher "
                    "representations (kiwb score --representations adds them)")
    elif too_few and settings.use_mc:
        left_out = f"{', '.join(READS_REPRESENTATION)}: {too_few}"
    enough = labeled is not None and len(labeled.true_labels) >= choice_rule.MIN_LABELED_TEXTS
    if enough:
        fitted = [_fit(option, pool, pool_features, seen) for option in options]
        right = choice_rule.right_matrix(
            [labeled.routing_scores(each) for each in fitted], labeled.true_label_ids(),
            labeled.coverage)
        outcome = choice_rule.choose_on_labels(right)
        picked = options[outcome.chosen]
        record = RoutingChoice(
            chosen=picked.name, routing=picked.routing, use_mc=picked.use_mc, basis="labels",
            why=(f"routed best of {len(options)} label-free routings on {outcome.texts:,} "
                 f"labeled texts ({where}): {outcome.accuracies[outcome.chosen]:.1%}, "
                 f"{outcome.cross_validated:.1%} cross-validated"),
            labeled_texts=outcome.texts, where=where,
            table={option.name: accuracy for option, accuracy
                   in zip(options, outcome.accuracies, strict=True)},
            cross_validated=outcome.cross_validated, left_out=left_out)
    else:
        picked = label_free
        if labeled is not None:
            why += (f" ({len(labeled.true_labels)} labeled texts: {choice_rule.MIN_LABELED_TEXTS} "
                    "or more are needed to choose on them)")
        record = RoutingChoice(chosen=picked.name, routing=picked.routing, use_mc=picked.use_mc,
                               basis="label-free", why=why,
                               labeled_texts=0 if labeled is None else len(labeled.true_labels),
                               left_out=left_out)
    return replace(settings, routing=picked.routing, use_mc=picked.use_mc), record


def _fit(option: choice_rule.Candidate, pool, features, seen) -> routes.FittedRouting:
    try:
        return routes.fit_routing(option.routing, features, use_mc=option.use_mc,
                                  teacher_names=pool.teachers,
                                  seen=seen if option.routing in READS_REPRESENTATION else None)
    except ValueError as error:
        raise DataError(f"routing auto, measuring {option.name}: {error}") from None


def labeled_rows(scores, gold) -> object | None:
    """The pool texts given a label (`gold`, kiwb.kinds.sequence.integration.GoldLabels), as
    labeled scores; None without any."""
    if gold is None or not len(gold.rows):
        return None
    return scores.rows(gold.rows, [scores.labels[i] for i in gold.label_ids.tolist()])


def pick_routing(settings: IntegrationSettings, scores, eval_scores, labeled_file, gold, seen,
                 representations: bool):
    """The settings an integration fits its routing with, and the choice (None unless the
    settings say "auto"): the one place integrate and train both resolve "auto"."""
    if not is_auto(settings):
        return settings, None
    labeled, where = labeled_for_choice([
        ("eval", eval_scores), ("[data.labeled]", labeled_file),
        ("given labels", labeled_rows(scores, gold))])
    return choose_routing(settings, scores, labeled, where, seen, representations)
