"""A SpaCE-like synthetic grid with a smooth hidden confounder, interference and exact counterfactuals
(card, "Setting at book scale"; the paper's semi-synthetic SpaCE environments play this role there).

Unit s on an H×W grid has covariates X_s = (X1_s, X2_s), a hidden field U_s, a treatment
A_s ~ Bernoulli(σ(−0.2 + 1.5κU_s + 0.5X1_s + 0.5X2_s)) drawn independently given (U, X), and

    Y_s = τ_d A_s + τ_sp Ā_N(s) + 0.5 A_s X1_s + κ(U_s + 0.3 U_s²) + 0.5 X1_s + 0.3 X2_s + ε_s,

with Ā_N(s) the mean treatment of the 8 Moore neighbours and ε ~ N(0, 0.5²). All randomness (U, X, ε and
the uniforms that decide A) comes from one seed, so datasets that differ only in κ share their random
numbers (common random numbers, card "Controls and risks" on C6).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MOORE = [(di, dj) for di in (-1, 0, 1) for dj in (-1, 0, 1) if (di, dj) != (0, 0)]


def gaussian_field(h: int, w: int, lengthscale: float, rng: np.random.Generator) -> np.ndarray:
    """White noise smoothed (periodic FFT convolution) by a Gaussian kernel of sd ``lengthscale`` cells,
    then standardized to mean 0, sd 1."""
    noise = rng.standard_normal((h, w))
    fy, fx = np.fft.fftfreq(h)[:, None], np.fft.fftfreq(w)[None, :]
    # Fourier transform of a Gaussian kernel of sd ℓ: exp(−2π² ℓ² f²)
    kernel = np.exp(-2 * np.pi ** 2 * lengthscale ** 2 * (fy ** 2 + fx ** 2))
    field = np.fft.ifft2(np.fft.fft2(noise) * kernel).real
    return (field - field.mean()) / field.std()


def neighbour_mean(field: np.ndarray, radius: int = 1) -> np.ndarray:
    """Mean of ``field`` over the (2r+1)² − 1 cells around each cell (zero padding; only interior cells used)."""
    h, w = field.shape
    pad = np.pad(field, radius)
    total = np.zeros((h, w))
    for di in range(-radius, radius + 1):
        for dj in range(-radius, radius + 1):
            if (di, dj) != (0, 0):
                total += pad[radius + di:radius + di + h, radius + dj:radius + dj + w]
    return total / ((2 * radius + 1) ** 2 - 1)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


@dataclass
class SpatialData:
    """One simulated grid. Fields are [H, W]; ``X`` is [H, W, 2]; ``idx`` are the evaluated (interior) units
    as flat indices into the grid and ``coords`` their (row, col)."""

    A: np.ndarray
    X: np.ndarray
    Y: np.ndarray
    U: np.ndarray
    eps: np.ndarray
    propensity: np.ndarray
    idx: np.ndarray
    coords: np.ndarray
    kappa: float
    tau_d: float
    tau_sp: float
    heterogeneity: float
    direct_true: float
    spill_true: float

    @property
    def shape(self) -> tuple[int, int]:
        return self.A.shape

    def at(self, field: np.ndarray) -> np.ndarray:
        """A field's values at the evaluated units."""
        return field.reshape(field.shape[0] * field.shape[1], *field.shape[2:])[self.idx]

    @property
    def sd_y(self) -> float:
        """sd(Y) over the evaluated units: the unit of every standardized bias."""
        return float(self.at(self.Y).std())


def outcome_mean(A: np.ndarray, abar: np.ndarray, X: np.ndarray, U: np.ndarray, kappa: float, tau_d: float,
                 tau_sp: float, heterogeneity: float = 0.5) -> np.ndarray:
    """E[Y | A_s, Ā_N(s), X, U]: the structural equation without ε (works on any broadcastable arrays)."""
    x1, x2 = X[..., 0], X[..., 1]
    return (tau_d * A + tau_sp * abar + heterogeneity * A * x1 + kappa * (U + 0.3 * U ** 2)
            + 0.5 * x1 + 0.3 * x2)


def simulate(grid_size: int, kappa: float = 1.0, lengthscale: float = 2.0, tau_d: float = 1.0,
             tau_sp: float = 0.5, seed: int = 0, margin: int = 2, heterogeneity: float = 0.5,
             noise_sd: float = 0.5) -> SpatialData:
    """Simulate one grid (see the module docstring). ``margin`` cells at each border are not evaluated."""
    rng = np.random.default_rng([seed, 13])
    r_u, r_x1, r_x2, r_a, r_e = (np.random.default_rng(s) for s in rng.bit_generator.seed_seq.spawn(5))
    n = grid_size
    U = gaussian_field(n, n, lengthscale, r_u)
    X = np.stack([gaussian_field(n, n, 6.0, r_x1), r_x2.standard_normal((n, n))], axis=-1)
    uniforms = r_a.random((n, n))
    eps = noise_sd * r_e.standard_normal((n, n))
    prop = sigmoid(-0.2 + 1.5 * kappa * U + 0.5 * X[..., 0] + 0.5 * X[..., 1])
    A = (uniforms < prop).astype(float)
    abar = neighbour_mean(A, 1)
    Y = outcome_mean(A, abar, X, U, kappa, tau_d, tau_sp, heterogeneity) + eps
    rows, cols = np.meshgrid(np.arange(margin, n - margin), np.arange(margin, n - margin), indexing="ij")
    coords = np.stack([rows.ravel(), cols.ravel()], 1)
    idx = coords[:, 0] * n + coords[:, 1]
    x1_eval = X[..., 0].ravel()[idx]
    # truth over the evaluated units only (card, "Controls and risks": Truth)
    direct_true = float(tau_d + heterogeneity * x1_eval.mean())
    return SpatialData(A=A, X=X, Y=Y, U=U, eps=eps, propensity=prop, idx=idx, coords=coords, kappa=kappa,
                       tau_d=tau_d, tau_sp=tau_sp, heterogeneity=heterogeneity, direct_true=direct_true,
                       spill_true=float(tau_sp))


def potential_outcomes(data: SpatialData, center: float | None = None, nbrs: float | None = None) -> np.ndarray:
    """Y_s at the evaluated units with the unit's own treatment set to ``center`` and/or all 8 neighbours set
    to ``nbrs`` (None keeps the factual value); ε is kept, so the contrasts are exact."""
    A = data.at(data.A) if center is None else np.full(data.idx.size, float(center))
    abar = data.at(neighbour_mean(data.A, 1)) if nbrs is None else np.full(data.idx.size, float(nbrs))
    return (outcome_mean(A, abar, data.at(data.X), data.at(data.U), data.kappa, data.tau_d, data.tau_sp,
                         data.heterogeneity) + data.at(data.eps))
