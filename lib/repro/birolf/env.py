"""The bilinear bandit environment with latent features, and BiRoLF's orthogonal-complement augmentation.

Chapter 02 (BiRoLF, ICML 2026). Generator ("case 1" of the authors' code, card *Setting*):

    X* ∈ R^{d_x*×M}, Y* ∈ R^{d_y*×N} i.i.d. N(0, 1);  observed X = X*[:d_x], Y = Y*[:d_y];
    Θ* ∈ R^{d_x*×d_y*} i.i.d. Uniform[−1, 1];          R̄ = X*ᵀ Θ* Y*, rescaled so that max|R̄| = 1;
    pulling (i, j) returns R̄_ij + ε, ε ~ N(0, σ²).

Augmentation (card *Method* step 1): B_x is an orthonormal basis of null(X) ⊂ R^M, taken from the SVD of
X, and X̃ = [Xᵀ | B_x] ∈ R^{M×M}; the same for Ỹ. Because B_xᵀXᵀ = 0,

    X̃ᵀX̃ = blockdiag(X Xᵀ, I_{M−d_x})                                                   (Gram)

and because X̃ is square and invertible (X has full row rank a.s.), *every* M×N matrix, in particular R̄,
is X̃ Φ Ỹᵀ for exactly one Φ:  Φ* = X̃⁻¹ R̄ Ỹ⁻ᵀ  (the representation identity the tests check).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["BilinearInstance", "orthogonal_complement", "augment", "make_bilinear_instance",
           "represent", "noise_stream", "gram_blocks"]


def orthogonal_complement(X: np.ndarray) -> np.ndarray:
    """Orthonormal basis B (M × (M − rank X)) of null(X) for X ∈ R^{d×M}, from the full SVD of X."""
    X = np.asarray(X, dtype=float)
    d, M = X.shape
    _, s, vt = np.linalg.svd(X, full_matrices=True)
    rank = int(np.sum(s > max(d, M) * np.finfo(float).eps * (s[0] if s.size else 0.0)))
    return vt[rank:].T.copy()


def augment(X: np.ndarray) -> tuple[np.ndarray, int]:
    """X̃ = [Xᵀ | B_x] ∈ R^{M×M} for observed X ∈ R^{d×M} with d < M; returns (X̃, d).

    Row i of X̃ is the augmented feature x̃_i of user i: its first d entries are the observed features,
    the remaining M − d its coordinates in the orthogonal complement of the observed row space.
    """
    X = np.asarray(X, dtype=float)
    d, M = X.shape
    if d >= M:
        raise ValueError(f"augment needs fewer observed features than arms (d={d}, M={M})")
    B = orthogonal_complement(X)
    if B.shape[1] != M - d:
        raise ValueError(f"observed features are rank-deficient (rank {M - B.shape[1]} < d={d})")
    return np.ascontiguousarray(np.hstack([X.T, B])), d


def gram_blocks(X_aug: np.ndarray, d: int) -> np.ndarray:
    """The observed block G_o = X Xᵀ (d × d) of the Gram X̃ᵀX̃ = blockdiag(G_o, I)."""
    Xo = X_aug[:, :d]
    return Xo.T @ Xo


def represent(R: np.ndarray, X_aug: np.ndarray, Y_aug: np.ndarray) -> np.ndarray:
    """Φ with X̃ Φ Ỹᵀ = R, i.e. Φ = X̃⁻¹ R Ỹ⁻ᵀ (solved, not inverted)."""
    left = np.linalg.solve(X_aug, R)                 # X̃⁻¹ R
    return np.linalg.solve(Y_aug, left.T).T          # (Ỹ⁻¹ (X̃⁻¹R)ᵀ)ᵀ = X̃⁻¹ R Ỹ⁻ᵀ


@dataclass(frozen=True)
class BilinearInstance:
    """One environment: true and observed features, the parameter, the mean rewards, the augmentation."""

    X_star: np.ndarray   # (d_x*, M) true user features
    Y_star: np.ndarray   # (d_y*, N) true item features
    X: np.ndarray        # (d_x, M) observed = first d_x rows of X_star
    Y: np.ndarray        # (d_y, N)
    Theta: np.ndarray    # (d_x*, d_y*) before the rescaling of R̄
    R_bar: np.ndarray    # (M, N) mean rewards, max |R̄| = 1
    X_aug: np.ndarray    # (M, M) X̃ = [Xᵀ | B_x]
    Y_aug: np.ndarray    # (N, N) Ỹ = [Yᵀ | B_y]
    noise_std: float

    @property
    def M(self) -> int:
        return self.R_bar.shape[0]

    @property
    def N(self) -> int:
        return self.R_bar.shape[1]

    @property
    def d_x(self) -> int:
        return self.X.shape[0]

    @property
    def d_y(self) -> int:
        return self.Y.shape[0]

    @property
    def best(self) -> float:
        return float(self.R_bar.max())

    @property
    def gaps(self) -> np.ndarray:
        """max R̄ − R̄_ij: the per-round pseudo-regret of pulling (i, j)."""
        return self.best - self.R_bar

    def phi_star(self) -> np.ndarray:
        """Φ* = X̃⁻¹ R̄ Ỹ⁻ᵀ, the effective parameter of the augmented model."""
        return represent(self.R_bar, self.X_aug, self.Y_aug)

    def pull(self, i: int, j: int, rng: np.random.Generator) -> float:
        """A noisy reward R̄_ij + ε."""
        return float(self.R_bar[i, j] + self.noise_std * rng.standard_normal())


def make_bilinear_instance(M: int, N: int, dxs: int, dys: int, dx: int, dy: int, rng: np.random.Generator,
                           noise_std: float = 0.1) -> BilinearInstance:
    """The authors' "case 1" generator (see the module docstring), seeded by ``rng``."""
    if not (1 <= dx <= dxs and 1 <= dy <= dys):
        raise ValueError(f"need 1 <= d_x <= d_x* and 1 <= d_y <= d_y*; got ({dx}, {dxs}), ({dy}, {dys})")
    X_star = rng.standard_normal((dxs, M))
    Y_star = rng.standard_normal((dys, N))
    Theta = rng.uniform(-1.0, 1.0, size=(dxs, dys))
    R = X_star.T @ Theta @ Y_star
    R = R / np.max(np.abs(R))
    X, Y = X_star[:dx].copy(), Y_star[:dy].copy()
    X_aug, _ = augment(X)
    Y_aug, _ = augment(Y)
    return BilinearInstance(X_star, Y_star, X, Y, Theta, R, X_aug, Y_aug, float(noise_std))


def noise_stream(T: int, noise_std: float, rng: np.random.Generator) -> np.ndarray:
    """The T noise draws ε_1..ε_T of one trial. Every agent of a trial sees the same ε_t in round t
    (common random numbers), so differences in regret come from the decisions, not from the noise."""
    return noise_std * rng.standard_normal(T)
