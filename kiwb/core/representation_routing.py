"""Routing from each teacher's own representation: is a text of the kind the teacher was
trained on, read from the vector its classifier head reads (Podolskiy et al., AAAI 2021;
Zhou et al., EMNLP 2021), not from its outputs.

Every score here is read, as `rank` reads a confidence, as the teacher's own quantile over the
pool, so teachers of different widths, depths and temperatures compare on one scale.

- `mahalanobis`: class means (the teacher's classes) with one shared covariance shrunk toward
  its diagonal; score = minus the squared distance to the nearest class mean.
- `knn`: mean cosine similarity to the k nearest reference texts.
- `energy`: logsumexp of the dropout-off logits (no representation needed; a cheap baseline).

The reference a teacher's means (or neighbours) come from is, label-free, the pool texts it is
surest of within each class it predicts ("seeded"), then, `refits` times, the pool texts the
routing gave it; or the texts it was trained on when the user has them ("seen"), kept as they
are. The settings below were chosen on dev data (BENCHMARKS.md, "Routing on debian-8").
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from kiwb.core.quantiles import empirical_cdf


class RoutedTexts(Protocol):
    """What these routings read of a teacher's scores (a kiwb.core.routing.TeacherFeatures)."""

    det_logits: Tensor             # (n, C) dropout-off logits
    representation: Tensor | None  # (n, d) the input of its classifier head

# Chosen on five dev sets (debian-8, the demo, three to five teachers on ten Debian sections):
# the best mean routing accuracy of a grid of 208 settings (BENCHMARKS.md, "Routing from the
# teachers' representations"), among those that seed on a teacher's surest texts only. Seeding
# on all of them was 1.7 points higher on that mean, but where a teacher claims foreign texts
# with one of its classes (an over-confident teacher) that class's mean moves onto them and
# the routing falls to chance (tests/test_representation_routing.py). A strong shrinkage
# toward the diagonal matters where a teacher's classes are read from a few hundred pool
# texts: 1% routed 53.5% of the five-teacher dev texts right, 60% 63.5%, at no cost elsewhere.
SEED_SHARE = 0.6   # per predicted class, the share of its pool texts (the surest) seeding it
SHRINKAGE = 0.6    # weight of the covariance's diagonal in the shrunk covariance
# knn reads single reference texts, not class means: a foreign text among them is the nearest
# neighbour of every text like it, so its reference is the surest 30% (the tiny over-confident
# teachers of tests/test_representation_cli.py: 95% routed right, 60% with the surest 60%).
KNN_SEED_SHARE = 0.3
# A teacher's own training texts are thousands of texts with their true labels: their
# covariance holds, and 1% shrinkage routed best on debian-8 dev (87.0% against 84.0% at 60%).
SEEN_SHRINKAGE = 0.01
NEIGHBOURS = 5     # k of the knn routing
REFITS = 2         # refits on the pool texts the routing gave each teacher
RELATIVE = True    # mahalanobis: relative to one Gaussian over the whole pool (Ren et al.)
# A teacher given fewer pool texts than this keeps its previous reference at a refit: a handful
# of texts say little of its classes.
MIN_REFIT_TEXTS = 8
# A pool with fewer different texts than this is refused: its class means, neighbours and
# quantiles rest on a handful of texts (a pool of 3, or of one text repeated, routed 38-54%
# of the demo's eval texts right, no better than chance).
MIN_POOL_TEXTS = 32
_CHUNK = 4096      # rows per block when distances are computed (bounded memory on large pools)
_RIDGE = 1e-6      # of the mean variance, added to the diagonal: keeps a constant dimension invertible


@dataclass(frozen=True)
class Reference:
    """Texts a teacher's class means or neighbours are fitted on: their representations and
    each one's class among the teacher's labels (given labels, or its own predictions)."""

    representation: Tensor  # (m, d)
    classes: Tensor         # (m,) long, an index into the teacher's labels
    source: str             # "seeded", "seen" or "refitted"


@dataclass(frozen=True)
class ClassGaussians:
    """Class means with one shared covariance, kept as its Cholesky factor."""

    means: Tensor        # (C', d) float64, one row per class the reference holds
    cholesky: Tensor     # (d, d) float64 lower triangle of the shrunk covariance

    def squared_distances(self, points: Tensor) -> Tensor:
        """(n, C') squared Mahalanobis distance of each point to each class mean."""
        whitened_means = self._whiten(self.means)                          # (C', d)
        found = []
        for start in range(0, len(points), _CHUNK):
            whitened = self._whiten(points[start:start + _CHUNK].double())  # (b, d)
            found.append(torch.cdist(whitened, whitened_means).square())
        return torch.cat(found) if found else points.new_zeros((0, len(self.means)), dtype=torch.float64)

    def _whiten(self, rows: Tensor) -> Tensor:
        # L^-1 x: the squared Euclidean distance of whitened points is the Mahalanobis one.
        return torch.linalg.solve_triangular(self.cholesky, rows.T, upper=False).T


def fit_class_gaussians(points: Tensor, classes: Tensor, shrinkage: float = SHRINKAGE) -> ClassGaussians:
    """Means per class present in `classes` and their pooled within-class covariance, shrunk
    toward its diagonal: (1 - s) * S + s * diag(S)."""
    present = torch.unique(classes)
    if len(points) < 2:
        raise ValueError(f"class means need at least 2 reference texts, got {len(points)}")
    width, device = points.shape[1], points.device
    means, scatter = [], torch.zeros(width, width, dtype=torch.float64, device=device)
    for label in present:  # one class at a time in float64: a float16 pool stays float16
        mine = points[classes == label].double()
        means.append(mine.mean(0))
        centred = mine - means[-1]
        scatter += centred.T @ centred
    covariance = scatter / len(points)
    diagonal = torch.diagonal(covariance).clone()
    shrunk = (1 - shrinkage) * covariance + shrinkage * torch.diag(diagonal)
    ridge = _RIDGE * max(float(diagonal.mean()), 1e-12)
    shrunk += ridge * torch.eye(width, dtype=torch.float64, device=device)
    return ClassGaussians(torch.stack(means), torch.linalg.cholesky(shrunk))  # means (C', d)


def nearest_similarity(queries: Tensor, neighbours: Tensor, k: int = NEIGHBOURS) -> Tensor:
    """(n,) mean cosine similarity of each query to its k most similar rows of `neighbours`
    (unit rows). A neighbour identical to the query (the query itself, where the reference is
    drawn from the same texts) is skipped, so a reference text is not its own evidence."""
    k = min(k, max(1, len(neighbours) - 1))
    # rows per block: a block's similarities stay near 2**25 floats (128 MB) however many
    # reference texts there are
    rows = max(1, min(_CHUNK, 2 ** 25 // max(1, len(neighbours))))
    found = []
    for start in range(0, len(queries), rows):
        block = torch.nn.functional.normalize(queries[start:start + rows].float(), dim=1)
        similarity = block @ neighbours.T                                     # (b, m)
        top = similarity.topk(min(k + 1, neighbours.shape[0]), dim=1).values  # (b, k+1)
        itself = top[:, 0] > 1 - 1e-5
        # drop the first column where it is the query itself, else the last: k either way
        kept = torch.where(itself.unsqueeze(1), top[:, 1:], top[:, :-1]) if top.shape[1] > k else top
        found.append(kept.double().mean(1))
    return torch.cat(found) if found else queries.new_zeros(0, dtype=torch.float64)


# ---- routers ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MahalanobisRouter:
    """Minus the squared distance to the nearest class mean, as a quantile over the pool.
    With a `background` (one Gaussian over every pool text), the distance is relative to it
    (Ren et al., 2021): what is far from everything the teacher sees counts less."""

    gaussians: ClassGaussians
    reference: Tensor  # the pool's raw scores, sorted
    source: str        # where the class means came from: seeded, seen, refitted
    texts: int         # how many reference texts they were fitted on
    background: ClassGaussians | None = None
    share: float | None = None

    @staticmethod
    def raw(gaussians: ClassGaussians, features: RoutedTexts,
            background: ClassGaussians | None = None) -> Tensor:
        points = _representation(features)
        nearest = gaussians.squared_distances(points).min(dim=1).values
        if background is not None:
            nearest = nearest - background.squared_distances(points)[:, 0]
        return -nearest

    def scores(self, features: RoutedTexts) -> Tensor:
        return empirical_cdf(self.reference, self.raw(self.gaussians, features, self.background))


@dataclass(frozen=True)
class KnnRouter:
    """Mean cosine similarity to the k nearest reference texts, as a quantile over the pool."""

    neighbours: Tensor  # (m, d) unit rows
    k: int
    reference: Tensor   # the pool's raw scores, sorted
    source: str
    share: float | None = None

    @property
    def texts(self) -> int:
        return len(self.neighbours)

    @staticmethod
    def raw(neighbours: Tensor, k: int, features: RoutedTexts) -> Tensor:
        return nearest_similarity(_representation(features), neighbours, k)

    def scores(self, features: RoutedTexts) -> Tensor:
        return empirical_cdf(self.reference, self.raw(self.neighbours, self.k, features))


@dataclass(frozen=True)
class EnergyRouter:
    """logsumexp of the dropout-off logits (minus the energy), as a quantile over the pool."""

    reference: Tensor
    share: float | None = None

    @staticmethod
    def raw(features: RoutedTexts) -> Tensor:
        return torch.logsumexp(features.det_logits.double(), dim=1)

    def scores(self, features: RoutedTexts) -> Tensor:
        return empirical_cdf(self.reference, self.raw(features))


def _representation(features: RoutedTexts) -> Tensor:
    if features.representation is None:
        raise ValueError("this routing reads the teacher's representation, which its scores lack")
    return features.representation


# ---- fitting ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RepresentationSettings:
    """The choices a representation routing is fitted with (the module's defaults)."""

    seed_share: float = SEED_SHARE  # mahalanobis
    knn_seed_share: float = KNN_SEED_SHARE
    shrinkage: float = SHRINKAGE
    seen_shrinkage: float = SEEN_SHRINKAGE  # for a reference of the teacher's seen texts
    neighbours: int = NEIGHBOURS
    refits: int = REFITS
    relative: bool = RELATIVE  # mahalanobis: the distance less that to the pool's own Gaussian


DEFAULTS = RepresentationSettings()


def seeded_reference(features: RoutedTexts, share: float = SEED_SHARE) -> Reference:
    """Per class the teacher predicts on the pool, the `share` of those texts it is surest of
    (by the margin of its two top dropout-off logits), at least one."""
    said = features.det_logits.argmax(dim=1)
    # The logit margin, not the confidence: a sharp teacher's confidence rounds to 1 on many
    # texts in float32, and the order among those ties would be arbitrary.
    top_two = features.det_logits.double().topk(2, dim=1).values
    sureness = top_two[:, 0] - top_two[:, 1]
    chosen = []
    for label in torch.unique(said):
        rows = (said == label).nonzero().squeeze(1)
        count = max(1, math.ceil(share * len(rows)))
        chosen.append(rows[sureness[rows].argsort(descending=True)[:count]])
    rows = torch.cat(chosen).sort().values
    return Reference(_representation(features)[rows], said[rows], "seeded")


def fit_router(name: str, pool: RoutedTexts, reference: Reference | None,
               settings: RepresentationSettings = DEFAULTS):
    """One teacher's router of routing `name`, its raw scores ranked over the pool."""
    if name == "energy":
        return EnergyRouter(EnergyRouter.raw(pool).sort().values)
    if reference is None or len(reference.classes) < 2:
        count = 0 if reference is None else len(reference.classes)
        raise ValueError(f"{count} reference text(s) to fit on, and 2 or more are needed")
    if name == "mahalanobis":
        shrinkage = settings.seen_shrinkage if reference.source == "seen" else settings.shrinkage
        gaussians = fit_class_gaussians(reference.representation, reference.classes, shrinkage)
        background = None
        if settings.relative:
            everything = _representation(pool)
            background = fit_class_gaussians(everything, torch.zeros(len(everything), dtype=torch.long),
                                             shrinkage)
        raw = MahalanobisRouter.raw(gaussians, pool, background)
        return MahalanobisRouter(gaussians, raw.sort().values, reference.source,
                                 len(reference.classes), background)
    if name == "knn":
        neighbours = torch.nn.functional.normalize(reference.representation.float(), dim=1)
        raw = KnnRouter.raw(neighbours, settings.neighbours, pool)
        return KnnRouter(neighbours, settings.neighbours, raw.sort().values, reference.source)
    raise ValueError(f"unknown representation routing {name!r}")


def pool_problem(pool: Sequence[RoutedTexts]) -> str | None:
    """Why these pool texts are too few to fit a representation routing on, or None."""
    for features in pool:
        distinct = len(torch.unique(_representation(features), dim=0))
        if distinct < MIN_POOL_TEXTS:
            return (f"the pool holds {distinct} different text(s); the routings that read the "
                    f"teachers' representations need {MIN_POOL_TEXTS} or more")
    return None


def fit_representation_routers(name: str, pool: Sequence[RoutedTexts],
                               seen: Sequence[Reference | None] | None = None,
                               settings: RepresentationSettings = DEFAULTS,
                               teacher_names: Sequence[str] | None = None) -> tuple:
    """Every teacher's router: fitted on its seen texts where given, else seeded on the pool;
    then `settings.refits` times refitted on the pool texts the routing gave each teacher."""
    seen = list(seen) if seen is not None else [None] * len(pool)
    names = list(teacher_names or [f"teacher {i + 1}" for i in range(len(pool))])
    if len(seen) != len(pool):
        raise ValueError(f"{len(seen)} seen references for {len(pool)} teachers")
    problem = pool_problem(pool) if name != "energy" else None
    if problem:
        raise ValueError(f"{problem}; add unlabeled texts, or route by rank")
    if name == "energy":
        return tuple(fit_router(name, features, None, settings) for features in pool)
    share = settings.knn_seed_share if name == "knn" else settings.seed_share
    references = [given if given is not None else seeded_reference(features, share)
                  for features, given in zip(pool, seen, strict=True)]
    routers = []
    for teacher, features, reference in zip(names, pool, references, strict=True):
        try:
            routers.append(fit_router(name, features, reference, settings))
        except ValueError as error:
            where = "its seen texts" if reference.source == "seen" else "the pool texts it is surest of"
            raise ValueError(f"teacher {teacher!r}: {error} ({where}); give it more") from None
    for _ in range(settings.refits if any(r.source != "seen" for r in references) else 0):
        routed = torch.stack([router.scores(features) for router, features
                              in zip(routers, pool, strict=True)], dim=1).argmax(dim=1)
        for number, features in enumerate(pool):
            rows = (routed == number).nonzero().squeeze(1)
            # A teacher's own training texts stay its reference: refitted on the pool texts
            # routed to it, it routed worse on debian-8 dev (86.0% -> 84.8%).
            if references[number].source == "seen" or len(rows) < MIN_REFIT_TEXTS:
                continue
            reference = Reference(_representation(features)[rows],
                                  features.det_logits[rows].argmax(dim=1), "refitted")
            source = references[number].source
            refitted = fit_router(name, features, reference, settings)
            # the routers say where the first means came from: refitting starts from them
            routers[number] = dataclasses.replace(refitted, source=f"{source}, refitted")
    return tuple(routers)
