"""An L2-regularised logistic regression on standardised features, fitted by Newton's method.

Small enough to need no library: the two count-based experts (the reader's lexical coverage,
:mod:`baleen_core.condensing.lexical`, and the evidence ranker,
:mod:`baleen_core.condensing.evidence_ranker`) each fit a handful of weights on a few thousand rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StandardisedLogistic:
    """Log-odds = ((x − mean) / scale) · weights + bias."""

    weights: tuple[float, ...]
    bias: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]

    def log_odds(self, raw: np.ndarray) -> np.ndarray:
        """Log-odds of each row of ``raw`` (rows × features, unstandardised)."""
        x = (np.asarray(raw, dtype=np.float64) - np.asarray(self.mean)) / np.asarray(self.scale)
        return x @ np.asarray(self.weights) + self.bias


def fit_logistic(raw: np.ndarray, y: np.ndarray, l2: float = 1.0, iterations: int = 50) -> StandardisedLogistic:
    """Weights for rows ``raw`` (rows × features) with labels ``y`` (0 / 1): features standardised
    on these rows (a feature constant here keeps weight 0), ``l2`` on the weights, not the bias."""
    raw = np.asarray(raw, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    mean, scale = raw.mean(0), raw.std(0)
    scale[scale == 0] = 1.0
    x = np.hstack([(raw - mean) / scale, np.ones((len(y), 1))])
    penalty = np.full(x.shape[1], l2)
    penalty[-1] = 0.0
    theta = np.zeros(x.shape[1])
    for _ in range(iterations):
        p = 1 / (1 + np.exp(-(x @ theta)))
        gradient = x.T @ (p - y) + penalty * theta
        hessian = (x * (p * (1 - p))[:, None]).T @ x + np.diag(penalty) + 1e-9 * np.eye(x.shape[1])
        step = np.linalg.solve(hessian, gradient)
        theta -= step
        if np.abs(step).max() < 1e-10:
            break
    return StandardisedLogistic(tuple(float(w) for w in theta[:-1]), float(theta[-1]), tuple(float(m) for m in mean), tuple(float(s) for s in scale))
