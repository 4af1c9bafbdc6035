"""How well a student reproduces its own training targets on pool texts it trained on.

A student that is worse than its teachers is so for one of two reasons, and each calls for a
different fix. Either training is at fault (too few steps, a rate too low, a loss that does
not pull the outputs to the targets), and the student does not even reproduce the targets on
the very texts it was taught; or integration is at fault, and the student learnt targets that
were wrong. The fit figure tells the two apart: it compares the student's answers on pool
texts with the answers its targets give, in the same terms as the kind's eval figure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the floor is read where torch is not loaded (the workbench's tests)
    from torch import Tensor

# A student reproducing its targets on fewer of the taught texts than this has not learnt
# them: training, not integration, is what to change. On the multi-label demo, students that
# never said four of its labels fitted 63-68% (300 steps), and students that said all but
# the one their targets seldom hold fitted 89-98% (BENCHMARKS.md, "Students that fit their
# targets").
FIT_FLOOR = 0.9
THRESHOLD = 0.5
# A sigmoid target this close to the threshold teaches no decision: a student at 0.48 has
# learnt a target of 0.52 about as well as one at 0.56 (its loss is near its least), yet the
# two fall on different sides. Such cells are left out of the multi-label fit. On the
# multi-task demo 7.5% of the tags task's cells are such coin flips of its one teacher, and
# counting them called "training at fault" a student that decides the others 92% alike.
AMBIGUITY = 0.1


def agreement(predicted: Tensor, taught: Tensor) -> float:
    """Single-label fit: the share of rows whose predicted class (n,) is the class they were
    taught (n,): their targets' top class, or their gold label."""
    if not len(predicted):
        return 0.0
    return float((predicted == taught).double().mean())


def per_teacher_agreement(logits: Tensor, targets: Tensor, coverage: Tensor) -> float:
    """UHC fit: a UHC student is taught each teacher's distribution over that teacher's own
    labels, not one distribution over the union. The share of (row, teacher) pairs whose
    student's top class among the teacher's labels (coverage (N, |Y|)) is the top class of the
    teacher's target (targets (n, N, |Y|)); logits (n, |Y|)."""
    import torch  # here: the workbench reads this module's floor without torch

    if not len(logits):
        return 0.0
    inside = logits.double().unsqueeze(1).masked_fill(~coverage.bool().unsqueeze(0), -torch.inf)
    return float((inside.argmax(-1) == targets.argmax(-1)).double().mean())


def micro_f1(decided: Tensor, truth: Tensor) -> float:
    """Micro F1 of (n, L) 0/1 decisions against (n, L) 0/1 truths; 1 when both are all no
    (nothing to find and nothing claimed)."""
    decided, truth = decided.bool(), truth.bool()
    true_positive = int((decided & truth).sum())
    wrong = int((decided ^ truth).sum())
    if true_positive == 0 and wrong == 0:
        return 1.0
    return 2 * true_positive / (2 * true_positive + wrong)


def thresholded_fit(probs: Tensor, targets: Tensor, threshold: float = THRESHOLD,
                    ambiguity: float = AMBIGUITY) -> float:
    """Multi-label fit: the micro F1 of the student's yes per (text, label) (probability over
    `threshold`) against the targets' yes (target over `threshold`), over the cells whose
    target decides: at least `ambiguity` away from the threshold (gold 0/1 targets always)."""
    decisive = (targets.float() - threshold).abs() >= ambiguity
    return micro_f1((probs > threshold)[decisive], (targets > threshold)[decisive])


def decisive_yes(targets: Tensor, threshold: float = THRESHOLD,
                 ambiguity: float = AMBIGUITY) -> Tensor:
    """(n, L) bool: the sigmoid targets that teach a yes, at least `ambiguity` over `threshold`
    (a gold 1 always). The learning check counts these alone when it asks whether a label the
    student never says was taught: a label whose yes targets are all coin flips (0.52) was
    not, and the fit leaves such cells out for the same reason."""
    return targets.float() >= threshold + ambiguity


def correlation(student: Tensor, targets: Tensor) -> float:
    """Embedding fit: the Pearson correlation of two (m,) sequences, such as the cosine
    similarities of m pairs of texts under the student and under its targets; 0 when either
    does not vary."""
    student, targets = student.double() - student.double().mean(), targets.double() - targets.double().mean()
    spread = student.norm() * targets.norm()
    return float((student * targets).sum() / spread) if float(spread) > 0 else 0.0
