"""Names of the integration methods and routings, importable without torch (the config, the
CLI and the UI list them)."""

from __future__ import annotations

# name -> one-line help; the order is the order shown to users.
ROUTINGS = {
    "confidence": "compare the teachers' confidences as they are (MUKI)",
    "rank": "each teacher's confidence read as its quantile over the pool",
    "class-rank": "each teacher's confidence read as its quantile among the pool texts it gives "
    "the same class (a class it is less sure of keeps its texts)",
    "mahalanobis": "each teacher's representation (its classifier head's input): minus the "
    "distance to its nearest class mean under one shared covariance, read as its quantile over "
    "the pool; no dropout needed",
    "knn": "each teacher's representation: mean cosine similarity to its 5 nearest reference "
    "texts, read as its quantile over the pool",
    "energy": "each teacher's logsumexp of its logits (minus the energy), read as its quantile "
    "over the pool",
    "joint": "one logistic model over every teacher's representation side by side, fitted on "
    "mahalanobis and knn's routing of the pool (and on any labeled texts)",
    "stacked": "few labels: one model of which teacher's labels hold a text, over rank "
    "routing plus every teacher's probabilities and margin, kept near rank with few labels",
}
FEW_LABEL_ROUTINGS = ("stacked",)
# Routings fitted on labeled texts where the project has them ([data.labeled], the labels
# given with `labels`): the few-label ones need them, joint adds them to its pool answers.
LABEL_READING_ROUTINGS = (*FEW_LABEL_ROUTINGS, "joint")
# Options that never won where they were measured, removed: what a kiwb.toml still naming one
# is told (kiwb.project.config_checks). BENCHMARKS.md has the figures.
REMOVED_ROUTINGS = {
    "joint-mixture": "it never routed better than rank or mahalanobis on a measured set; use "
    'routing = "rank" (or "mahalanobis")',
    "temperature": 'it never routed better than trust on a measured set; use routing = '
    '"stacked" with labels',
    # issue 61: never the best routing on a measured set (BENCHMARKS.md, "Choosing the routing")
    "mixture": 'it never routed better than rank, mahalanobis or joint on a measured set; use '
    'routing = "auto" (or "rank")',
    "quantile-mixture": 'at best it tied rank on a measured set; use routing = "auto" (or "rank")',
    "trust": 'it routed under stacked on every measured set, and fitted on conflict labels it '
    'sent every text to one teacher; use routing = "stacked" with labels',
}
# Label-free routings whose per-teacher score is their own, not a confidence: a distance in the
# teacher's representation (mahalanobis, knn; scoring keeps it) or its logits' energy, each
# read as the teacher's quantile over the pool (kiwb.core.representation_routing).
OWN_SCORE_ROUTINGS = ("mahalanobis", "knn", "energy", "joint")
READS_REPRESENTATION = ("mahalanobis", "knn", "joint")
# What scoring keeps of a teacher's dropout-off pass for them (kiwb.workers.representation).
REPRESENTATIONS = ("head", "mean", "cls", "none")
# The routing fitted when labels given to texts are used (the workbench's re-integration):
# it held on labels taken from the conflicts list, where trust collapsed (BENCHMARKS.md).
LABELS_ROUTING = "stacked"
DEFAULT_ROUTING = "rank"  # beat MUKI's confidence on debian-8 dev (77.7% vs 74.8%; BENCHMARKS.md)
# kiwb.toml's routing default: the teachers' kind's (kiwb/kinds: default_routing), since the
# best label-free routing differs by kind (rank for single-label teachers, confidence for NER).
AUTO_ROUTING = "auto"

# The ways of making training targets from the teachers' scores (METHOD.md), and the
# training methods: those plus `supervised` (the eval labels as targets: an upper bound).
INTEGRATION_METHODS = ("muki-hard", "muki-soft", "vanilla-kd", "uhc")
SUPERVISED = "supervised"
# Multi-label teachers decide each label over the teachers that have it (kiwb/kinds/multilabel):
# ANT's rule, the owners' vote or mean, or MUKI per label. Each kind lists the methods it takes.
MULTILABEL_METHODS = ("ant", "vote", "mean", "muki-hard", "muki-soft")
# Multi-task projects (kiwb/kinds/multitask): MUKI per task, or VENUS' mean of the logits.
MULTITASK_METHODS = ("muki-hard", "muki-soft", "mean")
KNOWN_METHODS = tuple(dict.fromkeys((*INTEGRATION_METHODS, *MULTILABEL_METHODS)))
TRAINING_METHODS = (*INTEGRATION_METHODS, SUPERVISED)
KNOWN_TRAINING_METHODS = (*KNOWN_METHODS, SUPERVISED)

# Embedding teachers (kiwb/kinds/embedding): how each teacher counts on each pair of texts in
# SimME's relational loss (the embedding kind's methods), and how an encoder pools its tokens.
PAIR_WEIGHTINGS = ("mc", "maskout", "equal")
POOLINGS = ("mean", "cls")

# Weight merging (`kiwb merge`, kiwb.core.merging): the backbone rules, and the defaults used
# when the project has no labeled eval set to choose on (said in the log and the run's record).
# Task arithmetic's 0.3 is FusionBench's and the task-arithmetic paper's usual choice; TIES's
# λ = 1 and k = 20% are the TIES paper's.
MERGE_METHODS = {
    "ties": "TIES: trim each teacher's change from the base to its top-k%, elect a sign per "
    "weight, average the changes that agree, scale by lambda",
    "task-arithmetic": "the base plus lambda times the sum of the teachers' changes from it",
    "average": "the plain mean of the teachers' weights (no base needed)",
}
DEFAULT_MERGE_METHOD = "ties"
DEFAULT_MERGE_SCALE = {"task-arithmetic": 0.3, "ties": 1.0}
DEFAULT_TIES_TOP_K = 20.0
# What is tried on a labeled eval set when lambda (and for TIES, k) is not given.
MERGE_SCALE_GRID = {"task-arithmetic": (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0, 1.25, 1.5),
                    "ties": (0.4, 0.6, 0.8, 1.0, 1.2, 1.5)}
TIES_TOP_K_GRID = (10.0, 20.0, 50.0, 100.0)
