"""Weighted Gaussian fits and log densities: the two steps of every EM in routing."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

REGULARISATION = 1e-2  # added to each covariance: features are standardised, so this is small


@dataclass(frozen=True)
class Gaussians:
    """K Gaussians with full covariances over F features."""

    means: Tensor        # (K, F)
    covariances: Tensor  # (K, F, F)

    @classmethod
    def fit(cls, points: Tensor, responsibilities: Tensor) -> Gaussians:
        """Weighted means and covariances of (n, F) points, one Gaussian per column of the
        (n, K) responsibilities (each column needs some weight: a sliver keeps it defined)."""
        totals = responsibilities.sum(dim=0).clamp_min(1e-3)                    # (K,)
        means = (responsibilities.T @ points) / totals.unsqueeze(1)             # (K, F)
        centred = points.unsqueeze(0) - means.unsqueeze(1)                      # (K, n, F)
        weighted = centred * responsibilities.T.unsqueeze(2)                    # (K, n, F)
        eye = torch.eye(points.shape[1], dtype=points.dtype)
        covariances = (weighted.transpose(1, 2) @ centred / totals.view(-1, 1, 1)
                       + REGULARISATION * eye)                                  # (K, F, F)
        return cls(means, covariances)

    def log_densities(self, points: Tensor) -> Tensor:
        """log N(x | mean_k, cov_k) of (n, F) points, shape (n, K)."""
        chol = torch.linalg.cholesky(self.covariances)                          # (K, F, F)
        centred = points.unsqueeze(0) - self.means.unsqueeze(1)                 # (K, n, F)
        solved = torch.linalg.solve_triangular(chol, centred.transpose(1, 2), upper=False)
        mahalanobis = (solved ** 2).sum(dim=1)                                  # (K, n)
        log_det = 2 * torch.log(torch.diagonal(chol, dim1=1, dim2=2)).sum(dim=1)  # (K,)
        features = points.shape[1]
        return (-0.5 * (mahalanobis + log_det.unsqueeze(1)
                        + features * math.log(2 * math.pi))).T
