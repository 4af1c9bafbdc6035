"""Has a trained classifier learned? Checks that flag a collapsed student or teacher.

Pure Python on counts and shares (no torch), so the workbench reads the same verdicts the
workers write. A classifier trained too briefly or at too low a learning rate falls back on
predicting one or two frequent classes: its accuracy can look plausible while whole classes
are never predicted. These checks name those classes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace

from kiwb.core.verdict import Verdict

# A class "the teachers get right": the reference (the untrained Ensemble) gets at least this
# share of its eval texts right, so a student at 0% there has lost what it was taught.
REFERENCE_KNOWS = 0.5
# Fewer eval texts of a class than this say too little to call it collapsed: none right of 5
# texts the reference gets right half the time or more happens by chance at most 1 in 32
# (of 3, the number a "collapsed" verdict once rested on, 1 in 8).
MIN_CLASS_TEXTS = 5
# A verdict waits until the student has had this share of its step budget: at the first
# evaluations a student still falls on one or two frequent classes, and a "collapsed" said at
# step 50 of a run that ends at 96% is noise. The kept checkpoint is judged whenever it is.
JUDGE_FROM_SHARE = 0.25
# Accuracy this far below the reference's, or more, is weak; less is evaluation noise.
REFERENCE_TOLERANCE = 0.01
# Without gold labels: a class holding at least this share of the targets (or 1/(4|Y|), when
# that is smaller) must be predicted for some pool texts.
TARGET_SHARE_FLOOR = 0.02
# Total variation distance between predicted and target class shares beyond which the
# predictions are "far" from what the student was taught.
FAR_FROM_TARGET_SHARES = 0.3
STUDENT_HINT = ("try more steps ([training] min_steps or --epochs) or a higher learning rate "
                "([training] learning_rate)")
# When the targets themselves seldom hold the collapsed classes, training harder cannot help.
TARGETS_HINT = ("the training targets pick {labels} for {share} of the texts, so more steps "
                "will not help: the teachers or the routing seldom give {them} (try another "
                "--routing or method), or the pool holds few texts of {them}")
TEACHER_HINT = ("teach it again with more steps (--min-steps or --epochs) or a higher "
                "--learning-rate")
WEAK_HINT = (STUDENT_HINT + "; with Vanilla KD or UHC the targets themselves may be at fault: "
             "try muki-hard")
# The methods kiwb keeps to compare against (METHOD.md's baselines): a weak student of one is
# what the comparison shows, not a run to tune.
BASELINE_METHODS = {"vanilla-kd": "Vanilla KD", "uhc": "UHC"}
BASELINE_HINT = ("{name} is a baseline kiwb keeps for comparison, expected to trail: train "
                 "muki-hard (kiwb's default) for a student to use")

OK, BELOW_REFERENCE, COLLAPSED, FAR_FROM_TARGETS = "ok", "below-reference", "collapsed", "far-from-targets"
TOO_EARLY = "too-early"  # an evaluation before JUDGE_FROM_SHARE of the budget: no verdict yet
# Why a flagged student is as it is. With labeled eval texts, read from the class funnel
# (kiwb.core.class_funnel): the step that loses each flagged class, before the student (the
# targets are wrong) or at it (training is). Otherwise from the student's fit to its own
# training targets (kiwb.core.target_fit): it has not learnt them, or it has and they were
# wrong. A supervised run's targets are labels a person gave: fitting them and still missing
# eval means too few of them, or labels that disagree with the eval set's.
TRAINING_AT_FAULT, TARGETS_AT_FAULT, LABELS_AT_FAULT = "training", "targets", "labels"
CAUSE_TEXT = {
    TRAINING_AT_FAULT: ("it does not fit its targets ({fit} on the pool texts it trained on), "
                        "so training is at fault"),
    TARGETS_AT_FAULT: ("it fits its targets ({fit} on the pool texts it trained on{when}), so "
                       "the targets are wrong, not the training"),
    LABELS_AT_FAULT: ("it fits its training labels ({fit}{when}), so more steps will not help: "
                      "those labels are too few, or disagree with the eval set's"),
}
LABELS_HINT = ("label more texts, compare the pool's labels with the eval set's, or try a "
               "larger --student")
FUNNEL_STEP_WORDS = {"owner": "no owning teacher says it", "routing": "the routing",
                     "targets": "the targets"}
TARGETS_WRONG_HINT = ("more steps will not help: look at where the targets come from (the class "
                      "funnel and routing in kiwb integrate's summary and the Uncertainty pane) "
                      "and try another --routing or method{routing}")


@dataclass(frozen=True)
class LearningCheck(Verdict):
    """A verdict on one evaluation: `status` is ok, below-reference or collapsed."""

    status: str
    collapsed: tuple[str, ...] = ()
    problem: str = ""   # what is wrong, in words; empty when status is ok
    hint: str = ""      # what to try
    fit: float | None = None  # the student's fit to its training targets, where measured
    cause: str = ""     # a flagged student's: TRAINING_AT_FAULT or TARGETS_AT_FAULT
    fit_reached: float | None = None  # the best fit of the run so far, where above `fit`
    reason: str = ""    # the cause in words where the class funnel gave it (with_funnel)

    @property
    def learned(self) -> bool:
        return self.status != COLLAPSED

    @property
    def flagged(self) -> bool:
        return self.status not in (OK, TOO_EARLY)

    def too_early(self) -> LearningCheck:
        """This evaluation's figures without a verdict: the student has not had its window."""
        return LearningCheck(TOO_EARLY, fit=self.fit)

    def line(self, subject: str = "the student") -> str:
        """One line for a log or a table: empty when nothing is wrong."""
        if not self.flagged:
            return ""
        verdict = "has collapsed classes" if self.status == COLLAPSED else "is weak"
        return f"Warning: {subject} {verdict}: {self.problem}{self.cause_text()}; {self.hint}"

    def cause_text(self) -> str:
        """'; it does not fit its targets (…)' or '; it fits its targets (…)', or the funnel's
        reason: empty when unknown."""
        if self.reason:
            return "; " + self.reason
        if self.cause not in CAUSE_TEXT or self.fit is None:
            return ""
        if self.fit_reached is not None:  # the kept checkpoint is an earlier, looser one
            return "; " + CAUSE_TEXT[self.cause].format(
                fit=f"{_percent(self.fit_reached)} at best",
                when=f"; {_percent(self.fit)} at this evaluation")
        return "; " + CAUSE_TEXT[self.cause].format(fit=_percent(self.fit), when="")

    def to_dict(self) -> dict:
        return {**asdict(self), "collapsed": list(self.collapsed)}

    @classmethod
    def from_dict(cls, data: Mapping | None) -> LearningCheck | None:
        if not data:
            return None
        return cls(data.get("status", OK), tuple(data.get("collapsed") or ()),
                   data.get("problem", ""), data.get("hint", ""), data.get("fit"),
                   data.get("cause", ""), data.get("fit_reached"), data.get("reason", ""))


def check_of(record: Mapping | None) -> LearningCheck | None:
    """The check a record (an evaluation, a best checkpoint, a job's ending) carries, if any."""
    return LearningCheck.from_dict((record or {}).get("check"))


def judged(step: int, total_steps: int) -> bool:
    """Whether an evaluation at `step` gives a verdict: from JUDGE_FROM_SHARE of the budget."""
    return step >= min(total_steps, math.ceil(JUDGE_FROM_SHARE * total_steps))


def for_method(check: LearningCheck, method: str) -> LearningCheck:
    """A flagged baseline's hint says it is a baseline; other methods' hints stand."""
    if not check.flagged or method not in BASELINE_METHODS:
        return check
    return replace(check, hint=BASELINE_HINT.format(name=BASELINE_METHODS[method]))


def with_funnel(check: LearningCheck, lost_at: Mapping[str, str | None]) -> LearningCheck:
    """A collapsed check's cause from the class funnel on the eval texts (after with_fit):
    `lost_at` maps a class to the first funnel step before the student that loses it (owner,
    routing, targets) or None. Classes lost before the student were never in its targets: more
    steps cannot bring them back, whatever the fit says. Classes that reach the targets are
    lost in training, even by a student that fits its targets overall (a small class is a
    small part of the fit). The funnel is the same at every evaluation, so is this cause."""
    known = [label for label in check.collapsed if label in lost_at]
    if check.status != COLLAPSED or not known:
        return check
    before = {label: lost_at[label] for label in known if lost_at[label] in FUNNEL_STEP_WORDS}
    if not before:
        if check.cause == TRAINING_AT_FAULT:  # the fit says so too, in figures
            return check
        return replace(check, cause=TRAINING_AT_FAULT, fit_reached=None, hint=STUDENT_HINT,
                       reason=f"the class funnel carries {_names(known)} into the targets, so "
                       f"training loses {_them(known)}")
    steps: dict[str, list[str]] = {}
    for label, step in before.items():
        steps.setdefault(step, []).append(label)
    lost = "; ".join(f"{_names(labels)} at {FUNNEL_STEP_WORDS[step]}" if step != "owner"
                     else f"{_names(labels)}: {FUNNEL_STEP_WORDS[step]}"
                     for step, labels in steps.items())
    after = [label for label in known if label not in before]
    rest = (f"; {_names(after)} {'reaches' if len(after) == 1 else 'reach'} the targets, so "
            f"training loses {_them(after)}" if after else "")
    return replace(check, cause=TARGETS_AT_FAULT, fit_reached=None,
                   hint=TARGETS_WRONG_HINT.format(routing=""),
                   reason=f"the class funnel on the eval texts loses {lost}, before training{rest}")


def with_fit(check: LearningCheck, fit: float | None, floor: float,
             routing_accuracy: float | None = None, reached: float | None = None,
             supervised: bool = False) -> LearningCheck:
    """The check with the student's fit to its own training targets, and for a flagged one,
    its cause: while the run's best fit so far (`reached`, at least `fit`) is below `floor`
    the student has not learnt its targets (training is at fault, the check's hint stands); once
    it is at or above it the student has learnt them, so they were wrong (the hint turns to the
    integration: routing, method, the funnel). The best checkpoint of a student taught wrong
    targets is an early, loose one, which is why the run's best fit decides."""
    if fit is None:
        return check
    if not check.flagged or check.reason:  # the funnel's cause stands
        return replace(check, fit=fit)
    best = fit if reached is None else max(fit, reached)
    if best < floor:
        return replace(check, fit=fit, cause=TRAINING_AT_FAULT)
    if supervised:
        return replace(check, fit=fit, cause=LABELS_AT_FAULT, fit_reached=best if best > fit else None,
                       hint=LABELS_HINT)
    routing = ("" if routing_accuracy is None else
               f" (routing sends {_percent(routing_accuracy)} of the eval texts to a teacher "
               "that knows their class)")
    return replace(check, fit=fit, cause=TARGETS_AT_FAULT,
                   fit_reached=best if best > fit else None,
                   hint=TARGETS_WRONG_HINT.format(routing=routing))


def check_on_eval(
    labels: Sequence[str],
    confusion: Sequence[Sequence[int]],
    reference_per_class: Mapping[str, float | None] | None = None,
    reference_accuracy: float | None = None,
    reference_name: str = "the Ensemble",
    hint: str = STUDENT_HINT,
    target_shares: Sequence[float] | None = None,
) -> LearningCheck:
    """Compare a classifier's eval confusion (row = gold, column = predicted) with a reference.

    Collapsed classes: classes with eval texts that are never predicted, and classes the
    reference gets right (>= REFERENCE_KNOWS) where the classifier gets none. Without a
    collapsed class, accuracy below the reference's is flagged as weak. `target_shares`
    (each class's share of the training targets) turn the hint to the method when every
    collapsed class is rare in the targets.
    """
    gold = [sum(row) for row in confusion]
    predicted = [sum(column) for column in zip(*confusion, strict=True)] if confusion else []
    correct = [confusion[i][i] for i in range(len(labels))]
    reference_per_class = reference_per_class or {}
    enough = [gold[i] >= MIN_CLASS_TEXTS for i in range(len(labels))]
    never = [label for i, label in enumerate(labels) if enough[i] and not predicted[i]]
    lost = [label for i, label in enumerate(labels)
            if enough[i] and predicted[i] and not correct[i]
            and (reference_per_class.get(label) or 0.0) >= REFERENCE_KNOWS]
    accuracy = sum(correct) / max(1, sum(gold))
    versus = (f"{_percent(accuracy)} on eval vs {_percent(reference_accuracy)} for "
              f"{reference_name}" if reference_accuracy is not None else
              f"{_percent(accuracy)} on eval")
    if never or lost:
        parts = []
        if never:
            parts.append(f"never predicts {_names(never)}")
        if lost:
            parts.append(f"0% on {_names(lost)}, which {reference_name} gets right")
        shown = sum(1 for i in range(len(labels)) if gold[i])
        if target_shares is not None:
            floor = _share_floor(len(labels))
            rare = [label for label in never + lost if target_shares[labels.index(label)] < floor]
            if len(rare) == len(never + lost):
                share = max(target_shares[labels.index(label)] for label in rare)
                hint = TARGETS_HINT.format(labels=_names(rare), share=f"only {100 * share:.1f}%"
                                           if share else "none", them="it" if len(rare) == 1 else "them")
        return LearningCheck(COLLAPSED, tuple(never + lost),
                             f"{'; '.join(parts)} ({len(never) + len(lost)} of {shown} classes; "
                             f"{versus})", hint)
    return versus_reference(accuracy, reference_accuracy, reference_name,
                            WEAK_HINT if hint == STUDENT_HINT else hint)


def versus_reference(figure: float, reference: float | None, reference_name: str,
                     hint: str = STUDENT_HINT, metric: str = "") -> LearningCheck:
    """Every kind's "beats the untrained reference of its kind" in the same words: below it by
    more than REFERENCE_TOLERANCE is weak. `metric` names a headline that is not accuracy."""
    if reference is None or figure >= reference - REFERENCE_TOLERANCE:
        return LearningCheck(OK)
    named = f" {metric}" if metric else ""
    return LearningCheck(BELOW_REFERENCE, (), f"below {reference_name} ({_percent(figure)}{named} "
                         f"on eval vs {_percent(reference)} for {reference_name})", hint)


def check_on_pool(labels: Sequence[str], predicted_counts: Sequence[int],
                  target_shares: Sequence[float], hint: str = STUDENT_HINT) -> LearningCheck:
    """Without gold labels: compare the class shares the classifier predicts on pool texts
    with the class shares of the targets it was trained on.

    Collapsed classes: classes the targets give a real share (>= min(TARGET_SHARE_FLOOR,
    1/(4|Y|))) that are never predicted. Without one, a total variation distance above
    FAR_FROM_TARGETS is flagged as weak.
    """
    total = max(1, sum(predicted_counts))
    predicted_shares = [count / total for count in predicted_counts]
    floor = _share_floor(len(labels))
    never = [label for label, count, share in zip(labels, predicted_counts, target_shares, strict=True)
             if not count and share >= floor]
    distance = 0.5 * sum(abs(p - t) for p, t in zip(predicted_shares, target_shares, strict=True))
    figures = f"predicted class shares differ from the targets' by {distance:.2f} (total variation)"
    if never:
        return LearningCheck(COLLAPSED, tuple(never),
                             f"never predicts {_names(never)} on {total:,} pool texts; {figures}", hint)
    if distance > FAR_FROM_TARGET_SHARES:
        return LearningCheck(FAR_FROM_TARGETS, (), figures, hint)
    return LearningCheck(OK)


def _share_floor(num_labels: int) -> float:
    return min(TARGET_SHARE_FLOOR, 1 / (4 * max(1, num_labels)))


def _names(labels: Sequence[str], shown: int = 6) -> str:
    listed = ", ".join(labels[:shown])
    return listed + (f" and {len(labels) - shown} more" if len(labels) > shown else "")


def _them(labels: Sequence[str]) -> str:
    return "it" if len(labels) == 1 else "them"


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"
