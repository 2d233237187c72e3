"""Solvers of BiRoLF's two Lassos: the bilinear DR-Lasso main estimator (blockwise and full) and the imputation.

Chapter 02 (BiRoLF, ICML 2026), card *Method* steps 5, 7, 8. With Γ matched rounds, pseudo-reward matrices
R̃_τ and B = (1/Γ) Σ_τ X̃ᵀ R̃_τ Ỹ, the main estimator is (up to the constant Σ‖R̃_τ‖² and the factor Γ)

    Φ̂ = argmin_Φ  tr(Φᵀ G_x Φ G_y) − 2⟨B, Φ⟩ + μ‖Φ‖₁,      μ = λ_main / Γ,                        (main)

and tr(Φᵀ G_x Φ G_y) = ‖X̃ Φ Ỹᵀ‖²_F with G_x = X̃ᵀX̃ = blockdiag(X Xᵀ, I), G_y = blockdiag(Y Yᵀ, I). Split Φ
into the blocks oo (d_x × d_y), ou, uo, uu along the observed / complement coordinates. The quadratic has
no cross terms between blocks, so (main) is four independent problems (:func:`solve_main_blockwise`):

    uu:  min ‖Φ‖² − 2⟨B_uu, Φ⟩ + μ‖Φ‖₁               →  Φ_uu = soft(B_uu, μ/2)      (closed form)
    ou:  min tr(Φᵀ XXᵀ Φ) − 2⟨B_ou, Φ⟩ + μ‖Φ‖₁       →  one vector Lasso per column (Gram XXᵀ)
    uo:  min tr(Φᵀ Φ YYᵀ) − 2⟨B_uo, Φ⟩ + μ‖Φ‖₁       →  one vector Lasso per row (Gram YYᵀ)
    oo:  min tr(Φᵀ XXᵀ Φ YYᵀ) − 2⟨B_oo, Φ⟩ + μ‖Φ‖₁   →  a small matrix Lasso

all by FISTA except uu. :func:`solve_main_full` runs FISTA on (main) as one M × N problem; its condition
number is λ_max(G_x)λ_max(G_y) / (λ_min(G_x)λ_min(G_y)), which grows like λ_max(XXᵀ)², while the oo block
only sees the condition number of XXᵀ ⊗ YYᵀ. :func:`solve_main_cvxpy` and :func:`solve_main_slsqp` solve
(main) with generic solvers (test reference; the authors' code used SLSQP).

The imputation estimator (step 5) is a Lasso over the matched rewards, written with running counts
N_ij and reward sums S_ij:  Σ_ij N_ij (x̃_iᵀΦỹ_j)² − 2 S_ij x̃_iᵀΦỹ_j + λ_imp‖Φ‖₁ (:func:`fista_impute`).
Its Lipschitz constant is tracked by :class:`ImputeLipschitz`.

FISTA (Beck & Teboulle 2009) with a constant step 1/L; the compiled loops are in ``_kernels.cpp``, the numpy
functions ``_fista_matrix_numpy`` / ``_fista_impute_numpy`` are their reference (``backend="numpy"``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

try:  # compiled kernel; the numpy reference below is the fallback
    from . import _kernels  # type: ignore[attr-defined]
    HAVE_KERNEL = True
except ImportError:  # pragma: no cover - depends on the build
    _kernels = None
    HAVE_KERNEL = False

__all__ = [
    "HAVE_KERNEL", "soft_threshold", "fista_kkt_path", "kkt_residual", "main_objective", "fista_matrix", "fista_vector_lasso",
    "fista_impute", "impute_objective", "impute_lipschitz", "ImputeLipschitz", "BlockInfo",
    "solve_main_blockwise", "solve_main_full", "solve_main_cvxpy", "solve_main_slsqp", "CODE_CAPS", "KERNEL_MAX_ENTRIES",
]

_EMPTY = np.zeros((0, 0))
# backend="auto": the compiled loop for problems up to this many entries, where numpy's per-call overhead
# dominates; numpy (BLAS) above, where its matrix products are faster than the kernel's plain loops.
KERNEL_MAX_ENTRIES = 400
# The authors' caps: full-matrix FISTA 200 iterations; blockwise oo/ou/uo 100/50/50; step tolerance 1e-6.
CODE_CAPS = {"full": 200, "oo": 100, "ou": 50, "uo": 50, "tol": 1e-6}


def soft_threshold(Z: np.ndarray, tau: float) -> np.ndarray:
    """Entrywise soft-thresholding sign(Z)·max(|Z| − τ, 0), the prox of τ‖·‖₁."""
    return np.sign(Z) * np.maximum(np.abs(Z) - tau, 0.0)


def _apply(Gx: np.ndarray | None, Gy: np.ndarray | None, Phi: np.ndarray) -> np.ndarray:
    """G_x Φ G_y with None standing for the identity."""
    out = Phi if Gx is None else Gx @ Phi
    return out if Gy is None else out @ Gy


def kkt_residual(Gx: np.ndarray | None, Gy: np.ndarray | None, B: np.ndarray, Phi: np.ndarray, mu: float) -> float:
    """Largest violation of the optimality conditions of (main) at Φ (0 at the solution).

    With g = 2(G_xΦG_y − B): |g_ij + μ·sign Φ_ij| where Φ_ij ≠ 0, and max(|g_ij| − μ, 0) where Φ_ij = 0.
    """
    g = 2.0 * _apply(Gx, Gy, Phi) - 2.0 * B
    nz = np.abs(Phi) > 1e-12
    r = np.where(nz, np.abs(g + mu * np.sign(Phi)), np.maximum(np.abs(g) - mu, 0.0))
    return float(r.max()) if r.size else 0.0


def main_objective(Gx: np.ndarray, Gy: np.ndarray, B: np.ndarray, Phi: np.ndarray, mu: float) -> float:
    """tr(ΦᵀG_xΦG_y) − 2⟨B, Φ⟩ + μ‖Φ‖₁."""
    return float(np.sum(Phi * (Gx @ Phi @ Gy)) - 2.0 * np.sum(B * Phi) + mu * np.abs(Phi).sum())


# --------------------------------------------------------------------------------------------- matrix FISTA
def _fista_momentum(X, Xn, t, tol):
    """FISTA's momentum step (Beck & Teboulle 2009): t' = (1 + √(1 + 4t²))/2, Y = Xn + ((t − 1)/t')(Xn − X).
    Returns (Xn, Y, t', small) with small = ‖Xn − X‖ ≤ tol·max(1, ‖X‖) (never when tol ≤ 0)."""
    tn = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
    d = Xn - X
    small = tol > 0 and np.sqrt(np.sum(d * d)) <= tol * max(1.0, np.sqrt(np.sum(X * X)))
    return Xn, Xn + ((t - 1.0) / tn) * d, tn, bool(small)


def _fista_matrix_numpy(Gx, Gy, B, mu, Phi0, L, max_iter, tol, kkt_tol, kkt_every, path=None):
    X = np.array(Phi0, dtype=float, copy=True)
    Y = X.copy()
    t, it, kkt, kkt_at = 1.0, 0, float("nan"), -1
    thr = mu / L
    for k in range(max_iter):
        grad = 2.0 * _apply(Gx, Gy, Y) - 2.0 * B
        Xn = soft_threshold(Y - grad / L, thr)
        X, Y, t, small = _fista_momentum(X, Xn, t, tol)
        it = k + 1
        if small:
            break
        if kkt_tol > 0 and it % kkt_every == 0:
            kkt, kkt_at = kkt_residual(Gx, Gy, B, X, mu), it
            if path is not None:
                path.append((it, kkt))
            if kkt <= kkt_tol:
                break
    if kkt_tol > 0 and kkt_at != it:
        kkt = kkt_residual(Gx, Gy, B, X, mu)
    return X, it, kkt


def fista_matrix(Gx: np.ndarray | None, Gy: np.ndarray | None, B: np.ndarray, mu: float, Phi0: np.ndarray | None,
                 L: float, max_iter: int, tol: float = 1e-6, kkt_tol: float = 0.0, kkt_every: int = 10,
                 backend: str = "auto") -> tuple[np.ndarray, int, float]:
    """FISTA on min tr(ΦᵀG_xΦG_y) − 2⟨B,Φ⟩ + μ‖Φ‖₁ (``None`` Gram = identity), step 1/L.

    ``L`` must be ≥ 2·λ_max(G_x)·λ_max(G_y). Stops after ``max_iter`` iterations, when the step
    ‖Φ_{k+1} − Φ_k‖_F ≤ tol·max(1, ‖Φ_k‖_F) (tol = 0: off), or when the KKT residual checked every
    ``kkt_every`` iterations is ≤ ``kkt_tol`` (0: off). Returns (Φ, iterations, KKT residual or NaN).
    """
    if backend not in ("auto", "numpy", "kernel"):
        raise ValueError(f"backend must be 'auto', 'numpy' or 'kernel'; got {backend!r}")
    if backend == "kernel" and not HAVE_KERNEL:
        raise RuntimeError("the compiled kernel repro.birolf._kernels is not built (python setup.py build_ext --inplace)")
    B = np.ascontiguousarray(B, dtype=float)
    Phi0 = np.zeros_like(B) if Phi0 is None else np.ascontiguousarray(Phi0, dtype=float)
    if backend == "numpy" or (backend == "auto" and (not HAVE_KERNEL or B.size > KERNEL_MAX_ENTRIES)):
        return _fista_matrix_numpy(Gx, Gy, B, mu, Phi0, L, max_iter, tol, kkt_tol, kkt_every)
    gx = _EMPTY if Gx is None else np.ascontiguousarray(Gx, dtype=float)
    gy = _EMPTY if Gy is None else np.ascontiguousarray(Gy, dtype=float)
    Phi, it, kkt = _kernels.fista_matrix(gx, gy, B, float(mu), Phi0, float(L), int(max_iter), float(tol),
                                         float(kkt_tol), int(kkt_every))
    return Phi, int(it), float(kkt)


def fista_kkt_path(Gx: np.ndarray | None, Gy: np.ndarray | None, B: np.ndarray, mu: float, L: float,
                   kkt_tol: float, max_iter: int = 100_000, every: int = 10) -> list[tuple[int, float]]:
    """(iteration, KKT residual) every ``every`` FISTA iterations from Φ = 0 until KKT ≤ ``kkt_tol`` (figures)."""
    path: list[tuple[int, float]] = []
    _fista_matrix_numpy(Gx, Gy, np.asarray(B, float), mu, np.zeros_like(B, dtype=float), L, max_iter, 0.0,
                        kkt_tol, every, path)
    return path


def fista_vector_lasso(G: np.ndarray, b: np.ndarray, mu: float, x0: np.ndarray | None, L: float, max_iter: int,
                       tol: float = 1e-6, kkt_tol: float = 0.0, backend: str = "auto") -> tuple[np.ndarray, int]:
    """FISTA on min xᵀGx − 2bᵀx + μ‖x‖₁ (the matrix problem with one column and G_y = 1)."""
    b = np.asarray(b, dtype=float).reshape(-1, 1)
    x0 = None if x0 is None else np.asarray(x0, dtype=float).reshape(-1, 1)
    x, it, _ = fista_matrix(G, None, b, mu, x0, L, max_iter, tol, kkt_tol, 10, backend)
    return x[:, 0], it


def _lam_max(G: np.ndarray | None) -> float:
    if G is None or G.size == 0:
        return 1.0
    return float(np.linalg.eigvalsh(G)[-1])


# --------------------------------------------------------------------------------------------- main estimator
@dataclass
class BlockInfo:
    """What one main-estimator solve did: iterations per block and the KKT residual if it was computed."""

    iters: dict[str, int] = field(default_factory=dict)
    kkt: float = float("nan")


def solve_main_blockwise(B: np.ndarray, Gx_o: np.ndarray, Gy_o: np.ndarray, mu: float, dx: int, dy: int,
                         Phi0: np.ndarray | None = None, *, caps: tuple[int, int, int] = (100, 50, 50),
                         tol: float = 1e-6, kkt_tol: float = 0.0, lam_x: float | None = None,
                         lam_y: float | None = None, backend: str = "auto") -> tuple[np.ndarray, BlockInfo]:
    """Exact blockwise solve of (main): closed-form uu, column / row vector Lassos ou / uo, matrix Lasso oo.

    ``caps`` are the iteration caps of the oo, ou, uo FISTA loops (the authors' 100/50/50); ``tol`` the step
    tolerance; ``kkt_tol`` > 0 additionally stops each block at that KKT residual (and reports the largest).
    Since the blocks decouple exactly, the KKT residual of the assembled Φ is the max over the blocks.
    """
    M, N = B.shape
    Phi0 = np.zeros_like(B) if Phi0 is None else Phi0
    lam_x = _lam_max(Gx_o) if lam_x is None else lam_x
    lam_y = _lam_max(Gy_o) if lam_y is None else lam_y
    Phi = np.empty_like(B, dtype=float)
    info = BlockInfo()
    kkts = []
    # uu: Gram blocks are identities -> Φ = soft(B, μ/2), exactly.
    Phi[dx:, dy:] = soft_threshold(B[dx:, dy:], mu / 2.0)
    if kkt_tol > 0 and M > dx and N > dy:
        kkts.append(kkt_residual(None, None, B[dx:, dy:], Phi[dx:, dy:], mu))
    info.iters["uu"] = 0
    # ou: columns k of Φ_ou solve min φᵀ(XXᵀ)φ − 2 B_ou[:, k]ᵀφ + μ‖φ‖₁; batched as one matrix problem
    # with G_y = I (same iterates as the column problems, one common stopping rule).
    if N > dy:
        Phi[:dx, dy:], info.iters["ou"], k = fista_matrix(Gx_o, None, B[:dx, dy:], mu, Phi0[:dx, dy:], 2.0 * lam_x,
                                                          caps[1], tol, kkt_tol, 10, backend)
        kkts.append(k)
    # uo: rows of Φ_uo, Gram YYᵀ acting from the right.
    if M > dx:
        Phi[dx:, :dy], info.iters["uo"], k = fista_matrix(None, Gy_o, B[dx:, :dy], mu, Phi0[dx:, :dy], 2.0 * lam_y,
                                                          caps[2], tol, kkt_tol, 10, backend)
        kkts.append(k)
    # oo: the only genuinely bilinear block.
    Phi[:dx, :dy], info.iters["oo"], k = fista_matrix(Gx_o, Gy_o, B[:dx, :dy], mu, Phi0[:dx, :dy],
                                                      2.0 * lam_x * lam_y, caps[0], tol, kkt_tol, 10, backend)
    kkts.append(k)
    if kkt_tol > 0:
        info.kkt = float(max(kkts))
    return Phi, info


def solve_main_full(B: np.ndarray, Gx: np.ndarray, Gy: np.ndarray, mu: float, Phi0: np.ndarray | None = None, *,
                    max_iter: int = 200, tol: float = 1e-6, kkt_tol: float = 0.0, lam_x: float | None = None,
                    lam_y: float | None = None, backend: str = "auto") -> tuple[np.ndarray, BlockInfo]:
    """FISTA on (main) as one M × N matrix problem with the full Grams (BiRoLF without the blockwise split)."""
    lam_x = _lam_max(Gx) if lam_x is None else lam_x
    lam_y = _lam_max(Gy) if lam_y is None else lam_y
    Phi, it, kkt = fista_matrix(Gx, Gy, B, mu, Phi0, 2.0 * lam_x * lam_y, max_iter, tol, kkt_tol, 10, backend)
    return Phi, BlockInfo({"full": it}, kkt)


def solve_main_cvxpy(B: np.ndarray, X_aug: np.ndarray, Y_aug: np.ndarray, mu: float) -> np.ndarray:
    """(main) by cvxpy + Clarabel with tight tolerances: an independent reference.

    The quadratic is written as ‖X̃ΦỸᵀ‖²_F = ‖K vec Φ‖², K = Ỹ ⊗ X̃ (column-major vec), and handed to Clarabel
    as the quadratic form vec Φᵀ (KᵀK) vec Φ with KᵀK computed from X̃ and Ỹ themselves — the block structure
    of the Gram is not used. (``cp.sum_squares(X̃ @ Φ @ Ỹ.T)`` gives the same answer, about 8× slower.)
    """
    import cvxpy as cp

    M, N = B.shape
    K = np.kron(Y_aug, X_aug)
    P = K.T @ K
    P = 0.5 * (P + P.T)
    v = cp.Variable(M * N)
    obj = cp.quad_form(v, cp.psd_wrap(P)) - 2 * B.ravel(order="F") @ v + mu * cp.norm1(v)
    prob = cp.Problem(cp.Minimize(obj))
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12, tol_ktratio=1e-10,
               max_iter=500)
    if v.value is None:
        raise RuntimeError(f"cvxpy/Clarabel returned status {prob.status}")
    return np.asarray(v.value).reshape(M, N, order="F")


def solve_main_slsqp(B: np.ndarray, Gx: np.ndarray, Gy: np.ndarray, mu: float, Phi0: np.ndarray | None = None,
                     *, ftol: float = 1e-6, maxiter: int = 10000) -> np.ndarray:
    """(main) by scipy's SLSQP on the nonsmooth objective, as the authors' code does for its generic variant.

    The gradient is supplied where Φ_ij ≠ 0 (sign(0) = 0 elsewhere); SLSQP does not know the problem is
    nonsmooth, which is why it is slow and only roughly accurate.
    """
    from scipy.optimize import minimize

    M, N = B.shape
    x0 = np.zeros(M * N) if Phi0 is None else np.asarray(Phi0, float).ravel()

    def fun(v):
        P = v.reshape(M, N)
        GP = Gx @ P @ Gy
        f = float(np.sum(P * GP) - 2.0 * np.sum(B * P) + mu * np.abs(v).sum())
        g = (2.0 * GP - 2.0 * B).ravel() + mu * np.sign(v)
        return f, g

    res = minimize(fun, x0, jac=True, method="SLSQP", options={"ftol": ftol, "maxiter": maxiter})
    return res.x.reshape(M, N)


# --------------------------------------------------------------------------------------------- imputation
def impute_objective(X_aug: np.ndarray, Y_aug: np.ndarray, Ncnt: np.ndarray, S: np.ndarray, lam: float,
                     Phi: np.ndarray) -> float:
    """Σ_ij N_ij (x̃_iᵀΦỹ_j)² − 2 S_ij x̃_iᵀΦỹ_j + λ‖Φ‖₁ (the squared loss up to the constant Σ r²)."""
    P = X_aug @ Phi @ Y_aug.T
    return float(np.sum(Ncnt * P * P) - 2.0 * np.sum(S * P) + lam * np.abs(Phi).sum())


def _fista_impute_numpy(Xa, Ya, Ncnt, S, lam, Phi0, L, max_iter, tol):
    X = np.array(Phi0, dtype=float, copy=True)
    Y = X.copy()
    t, it = 1.0, 0
    thr = lam / L
    for k in range(max_iter):
        grad = 2.0 * (Xa.T @ (Ncnt * (Xa @ Y @ Ya.T) - S) @ Ya)
        Xn = soft_threshold(Y - grad / L, thr)
        X, Y, t, small = _fista_momentum(X, Xn, t, tol)
        it = k + 1
        if small:
            break
    return X, it


def fista_impute(X_aug: np.ndarray, Y_aug: np.ndarray, Ncnt: np.ndarray, S: np.ndarray, lam: float,
                 Phi0: np.ndarray, L: float, max_iter: int = 200, tol: float = 1e-6,
                 backend: str = "auto") -> tuple[np.ndarray, int]:
    """FISTA on the imputation Lasso (see :func:`impute_objective`); ``L`` ≥ 2·λ_max of its quadratic."""
    if backend == "numpy" or (backend == "auto" and (not HAVE_KERNEL or Ncnt.size > KERNEL_MAX_ENTRIES)):
        return _fista_impute_numpy(X_aug, Y_aug, Ncnt, S, lam, Phi0, L, max_iter, tol)
    Phi, it = _kernels.fista_impute(np.ascontiguousarray(X_aug, dtype=float), np.ascontiguousarray(Y_aug, dtype=float),
                                    np.ascontiguousarray(Ncnt, dtype=float),
                                    np.ascontiguousarray(S, dtype=float), float(lam),
                                    np.ascontiguousarray(Phi0, dtype=float), float(L), int(max_iter), float(tol))
    return Phi, int(it)


def impute_lipschitz(X_aug: np.ndarray, Y_aug: np.ndarray, Ncnt: np.ndarray) -> float:
    """λ_max of the imputation quadratic Φ ↦ Σ N_ij (x̃_iᵀΦỹ_j)², exactly.

    Its matrix in vec(Φ) is Kᵀ D K with K the rows x̃_i ⊗ ỹ_j of the pulled pairs and D = diag(N_ij); the
    nonzero eigenvalues equal those of D^{½} K Kᵀ D^{½}, whose (a, b) entry is
    √(N_a N_b) (x̃_{i_a}·x̃_{i_b})(ỹ_{j_a}·ỹ_{j_b}) — a matrix only as large as the number of pulled pairs.
    """
    ii, jj = np.nonzero(Ncnt)
    if ii.size == 0:
        return 0.0
    w = np.sqrt(Ncnt[ii, jj])
    Kx = X_aug[ii] @ X_aug[ii].T
    Ky = Y_aug[jj] @ Y_aug[jj].T
    H = (w[:, None] * w[None, :]) * Kx * Ky
    n = H.shape[0]
    if n <= 2:
        return float(np.linalg.eigvalsh(H)[-1])
    from scipy.linalg import eigh

    return float(eigh(H, eigvals_only=True, subset_by_index=[n - 1, n - 1])[0])


class ImputeLipschitz:
    """An upper bound on λ_max of the imputation quadratic that is cheap to keep up to date.

    One more pull of (i, j) adds the rank-one term (x̃_i⊗ỹ_j)(x̃_i⊗ỹ_j)ᵀ, which raises λ_max by at most
    ‖x̃_i‖²‖ỹ_j‖² (Weyl). We add that bound after every pull and recompute λ_max exactly
    (:func:`impute_lipschitz`) whenever the bound has drifted more than ``slack`` above the last exact value,
    so the bound is always valid and never more than (1 + slack)× too large.
    """

    def __init__(self, X_aug: np.ndarray, Y_aug: np.ndarray, slack: float = 0.25) -> None:
        self.X_aug, self.Y_aug, self.slack = X_aug, Y_aug, slack
        self.xn2 = np.sum(X_aug * X_aug, axis=1)
        self.yn2 = np.sum(Y_aug * Y_aug, axis=1)
        self.exact = 0.0
        self.bound = 0.0
        self.recomputes = 0

    def add(self, i: int, j: int, Ncnt: np.ndarray) -> float:
        """Register one more pull of (i, j) (``Ncnt`` already counts it); return the current bound."""
        self.bound += self.xn2[i] * self.yn2[j]
        if self.bound > (1.0 + self.slack) * self.exact:
            self.exact = impute_lipschitz(self.X_aug, self.Y_aug, Ncnt)
            self.bound = self.exact
            self.recomputes += 1
        return self.bound
