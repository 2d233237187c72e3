"""Baselines of chapter 13, each returning ``{"direct", "spill"}`` in the units of Y (card, "Baselines").

* ``ols``: Y ~ A_s + Ā_N + X + A_s·X1 — the true functional form, so only confounding biases it;
  ``extra`` columns turn it into the oracle OLS ([U, U²]) or the linear proxy (outer-ring mean treatment).
* ``spatial_ridge``: OLS plus a ridge-penalized smooth of the location on the k lowest Laplacian eigenvectors
  of the grid (RSR / spline style); ``spatial_plus``: Dupont, Wood & Augustin (2022), treatments first
  residualized on the same basis.
* ``s2sls_lag1``: the spatial-lag model Y = ρWY + βA + γWA + δX + ε by two-stage least squares with
  instruments [WX, W²X, W²A] (Kelejian & Prucha 1998); effects by plug-in contrasts of the reduced form.

Direct effect = β_A + β_{A·X1}·mean X1 over the evaluated units (the plug-in contrast of the linear model);
spillover = β_{Ā_N} (flipping all 8 neighbours moves Ā_N by 1).
"""
from __future__ import annotations

import numpy as np
from scipy import sparse

from .data import SpatialData, neighbour_mean
from .patches import extract_patches


def design(data: SpatialData, a: np.ndarray | None = None, abar: np.ndarray | None = None) -> tuple[np.ndarray, list[str]]:
    """[1, A, Ā_N, X1, X2, A·X1] at the evaluated units (``a``/``abar`` replace the treatment columns)."""
    A = data.at(data.A) if a is None else a
    N = data.at(neighbour_mean(data.A, 1)) if abar is None else abar
    X = data.at(data.X)
    D = np.column_stack([np.ones_like(A), A, N, X[:, 0], X[:, 1], A * X[:, 0]])
    return D, ["1", "A", "Abar", "X1", "X2", "A*X1"]


def _effects(coef: np.ndarray, data: SpatialData) -> dict[str, float]:
    x1 = data.at(data.X)[:, 0]
    return {"direct": float(coef[1] + coef[5] * x1.mean()), "spill": float(coef[2])}


def ols(data: SpatialData, extra: np.ndarray | None = None) -> dict[str, float]:
    """OLS on the true form, optionally with ``extra`` columns (e.g. [U, U²] for the oracle)."""
    D, _ = design(data)
    if extra is not None:
        D = np.column_stack([D, extra])
    coef, *_ = np.linalg.lstsq(D, data.at(data.Y), rcond=None)
    return _effects(coef, data)


def outer_ring_mean(data: SpatialData, inner: int = 1, outer: int = 2) -> np.ndarray:
    """Mean treatment over the cells of the (2·outer+1)² patch outside the (2·inner+1)² block (16 cells for
    5×5 minus 3×3)."""
    P = extract_patches(data.A, outer, data.idx)[..., 0]
    c = outer
    m = np.ones(P.shape[1:], bool)
    m[c - inner:c + inner + 1, c - inner:c + inner + 1] = False
    return P[:, m].mean(1)


def linear_proxy(data: SpatialData) -> dict[str, float]:
    """OLS plus the mean treatment of the 16 outer cells of the 5×5 patch: a linear summary of what the
    C-VAE reads."""
    return ols(data, outer_ring_mean(data)[:, None])


def laplacian_basis(h: int, w: int, k: int) -> np.ndarray:
    """The k lowest non-constant eigenvectors of the 4-connected h×w grid Laplacian, [h·w, k], closed form:
    products of DCT-II cosines cos(π a (i + ½)/h)·cos(π b (j + ½)/w), eigenvalue (2 − 2cos πa/h) + (2 − 2cos πb/w)."""
    a, b = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    lam = (2 - 2 * np.cos(np.pi * a / h)) + (2 - 2 * np.cos(np.pi * b / w))
    order = np.argsort(lam.ravel(), kind="stable")[1:k + 1]    # drop the constant (the intercept)
    i, j = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    cols = []
    for o in order:
        aa, bb = divmod(int(o), w)
        v = np.cos(np.pi * aa * (i + 0.5) / h) * np.cos(np.pi * bb * (j + 0.5) / w)
        cols.append((v / np.linalg.norm(v)).ravel())
    return np.stack(cols, 1)


def ridge(D: np.ndarray, y: np.ndarray, penalty: np.ndarray, lam: float) -> np.ndarray:
    """argmin ||y − Dθ||² + λ Σ_j penalty_j θ_j² (closed form)."""
    return np.linalg.solve(D.T @ D + lam * np.diag(penalty), D.T @ y)


def ridge_gcv(D: np.ndarray, y: np.ndarray, penalty: np.ndarray,
              lams: np.ndarray = np.logspace(-4, 3, 15)) -> tuple[np.ndarray, float]:
    """Ridge with λ chosen by generalized cross-validation, n·RSS/(n − tr H)²."""
    n = len(y)
    best = (np.inf, None, None)
    G = D.T @ D
    for lam in lams:
        inv = np.linalg.inv(G + lam * np.diag(penalty))
        coef = inv @ D.T @ y
        tr = np.trace(inv @ G)
        gcv = n * np.sum((y - D @ coef) ** 2) / (n - tr) ** 2
        if gcv < best[0]:
            best = (gcv, coef, float(lam))
    return best[1], best[2]


def _basis_at(data: SpatialData, k: int) -> np.ndarray:
    h, w = data.shape
    B = laplacian_basis(h, w, k)[data.idx]
    return (B - B.mean(0)) / B.std(0)


def spatial_ridge(data: SpatialData, k: int = 50) -> dict[str, float]:
    """OLS with a ridge-penalized smooth of location on the first k Laplacian eigenvectors (λ by GCV)."""
    D, _ = design(data)
    B = _basis_at(data, k)
    M = np.column_stack([D, B])
    pen = np.r_[np.zeros(D.shape[1]), np.ones(k)]
    coef, _ = ridge_gcv(M, data.at(data.Y), pen)
    return _effects(coef, data)


def spatial_plus(data: SpatialData, k: int = 50) -> dict[str, float]:
    """Spatial+: ridge-regress A_s and Ā_N on the basis, keep the residuals, then regress Y on the
    residualized treatments (and residualized A·X1), X and the basis, the basis ridge-penalized."""
    B = _basis_at(data, k)
    Bc = np.column_stack([np.ones(len(B)), B])
    pen = np.r_[0.0, np.ones(k)]
    A, N = data.at(data.A), data.at(neighbour_mean(data.A, 1))
    res = []
    for t in (A, N):
        coef, _ = ridge_gcv(Bc, t, pen)
        res.append(t - Bc @ coef)
    D, _ = design(data, a=res[0], abar=res[1])
    M = np.column_stack([D, B])
    coef, _ = ridge_gcv(M, data.at(data.Y), np.r_[np.zeros(D.shape[1]), np.ones(k)])
    return _effects(coef, data)


def lag_weights(h: int, w: int) -> np.ndarray:
    """Row-normalized Moore-neighbour weights W on the h×w grid (dense, [h·w, h·w])."""
    n = h * w
    W = np.zeros((n, n))
    for i in range(h):
        for j in range(w):
            for di in (-1, 0, 1):
                for dj in (-1, 0, 1):
                    a, b = i + di, j + dj
                    if (di or dj) and 0 <= a < h and 0 <= b < w:
                        W[i * w + j, a * w + b] = 1.0
    return W / W.sum(1, keepdims=True)


def s2sls_fit(y: np.ndarray, exog: np.ndarray, W: np.ndarray, rows: np.ndarray, lag_cols: list[int]
              ) -> tuple[np.ndarray, np.ndarray]:
    """2SLS of y = ρWy + exog·θ on the units ``rows``: the endogenous Wy instrumented by [exog, W·exog[:, lag],
    W²·exog[:, lag]]. Returns (coefficients [ρ, θ...], standard errors σ̂²(X̂ᵀX̂)⁻¹)."""
    Wy = W @ y
    WX = W @ exog[:, lag_cols]
    H = np.column_stack([exog, WX, W @ WX])[rows]
    Xf = np.column_stack([Wy, exog])[rows]
    yr = y[rows]
    Xhat = H @ np.linalg.lstsq(H, Xf, rcond=None)[0]
    coef = np.linalg.solve(Xhat.T @ Xhat, Xhat.T @ yr)
    resid = yr - Xf @ coef
    sigma2 = resid @ resid / (len(yr) - Xf.shape[1])
    se = np.sqrt(np.diag(sigma2 * np.linalg.inv(Xhat.T @ Xhat)))
    return coef, se


def s2sls_lag1(data: SpatialData, W: np.ndarray | None = None) -> dict[str, float]:
    """S2SLS-lag1 with exogenous [1, A, WA, X1, X2, A·X1] and instruments [WX, W²X, W²A]; plug-in effects of
    the reduced form Y = M(βA + γWA + ηA·X1 + …), M = (I − ρW)⁻¹, with the same definitions as the heads."""
    h, w = data.shape
    W = lag_weights(h, w) if W is None else W
    A, X = data.A.ravel(), data.X.reshape(-1, 2)
    WA = W @ A
    exog = np.column_stack([np.ones_like(A), A, WA, X[:, 0], X[:, 1], A * X[:, 0]])
    # instruments: W·[X1, X2], W²·[X1, X2] and W²A (= W·WA)
    coef, _ = s2sls_fit(data.Y.ravel(), exog, W, data.idx, lag_cols=[3, 4, 2])
    rho, beta, gamma, eta = coef[0], coef[2], coef[3], coef[6]
    M = np.linalg.inv(np.eye(h * w) - rho * W)
    MW = np.asarray((sparse.csr_matrix(W).T @ M.T).T)           # W has 8 non-zeros a row
    b = beta + eta * X[:, 0]                                     # dY/dA_j through the own-treatment terms
    s = data.idx
    direct = M[s, s] * b[s] + gamma * MW[s, s]
    S = (W[s] > 0).astype(float)                                 # the 8 neighbours of each evaluated unit
    spill = ((M[s] * S) @ b) + gamma * (MW[s] * S).sum(1)
    return {"direct": float(direct.mean()), "spill": float(spill.mean()), "rho": float(rho)}
