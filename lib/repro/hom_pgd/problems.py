"""The parametric non-convex QCQP family of chapter 14 (the authors' ``NonConvexQCProblem``, re-derived).

    minimise   f(x) = ½ xᵀQx + pᵀx
    subject to g_i(x) = ½ xᵀQ_i x + p_iᵀx − s_i b_i ≤ 0   (i = 1..m),   −5 ≤ x ≤ 5,   ‖x‖ ≤ R = 5.

Q_i = U_i Λ_i U_iᵀ / n with U_i ∈ R^{n×r} (unit columns), r = n/2, Λ_i ~ N(0, 1) (indefinite, hence a
non-convex feasible set), p_i ~ N(0, 1)/n, as the authors draw them. Two departures, both labelled in the chapter:

* *Parametric family.* The constraint matrices (Q_i, p_i) are fixed per chapter seed; an instance is the
  m scale factors s ~ U[0.9, 1.1] of the right-hand sides and its own objective (Q, p), drawn like the authors'.
  The INN is conditioned on s only (the objective does not change the feasible set).
* *Right-hand sides that bind* (card, "Controls and risks"): the authors' b_i = ‖p_i‖ + max|Λ_i|² makes the
  quadratic constraints almost never active at n ≥ 10. We set b_i to the α-quantile of g_i(R v) over v uniform on
  the sphere of radius R, α = 0.5^{1/m}, so that each constraint cuts ≈ 1 − α of the sphere and together they cut
  about half of it. The origin stays strictly feasible: a constraint whose quantile is not positive (a mostly
  negative-definite Q_i, which would cut off the origin) is redrawn; b_i > 0 is asserted.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

try:                                    # the fused constraint kernel (``_kernels.cpp``; built by ``make setup``)
    from . import _kernels
except ImportError:                     # not built: :meth:`QCQPFamily.check_violation` falls back to the torch path
    _kernels = None

BOX = 5.0
RADIUS = 5.0
SCALE_RANGE = (0.9, 1.1)


def _low_rank_sym(rng: np.random.Generator, k: int, n: int, r: int) -> tuple[np.ndarray, np.ndarray]:
    """k matrices U Λ Uᵀ / n with U ∈ R^{n×r} of unit columns and Λ ~ N(0, 1); also returns the eigenvalues."""
    lam = rng.standard_normal((k, r))
    U = rng.standard_normal((k, n, r))
    U /= np.linalg.norm(U, axis=1, keepdims=True)
    return np.einsum("kir,kr,kjr->kij", U, lam, U) / n, lam


def sphere(k: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """k points uniform on the unit sphere S^{n−1}."""
    v = rng.standard_normal((k, n))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@dataclass
class Instances:
    """A batch of k instances: scale factors s [k, m] (the INN's condition) and objectives Q [k, n, n], p [k, n]."""

    s: np.ndarray
    Q: np.ndarray
    p: np.ndarray

    def __len__(self) -> int:
        return len(self.s)

    def __getitem__(self, idx) -> "Instances":
        idx = np.atleast_1d(np.arange(len(self))[idx])
        return Instances(self.s[idx], self.Q[idx], self.p[idx])


class QCQPFamily:
    """The fixed constraint data of one chapter seed, and the functions of an instance batch.

    ``b_base`` follows the binding rule of the module docstring (``rhs="quantile"``) or the authors'
    ``‖p_i‖ + max|Λ_i|²`` (``rhs="authors"``, kept to show why we changed it).
    """

    def __init__(self, n: int, m: int, seed: int, rank: int | None = None, box: float = BOX, radius: float = RADIUS,
                 rhs: str = "quantile", n_sphere: int = 20_000):
        self.n, self.m, self.box, self.radius = n, m, box, radius
        self.rank = rank or max(1, n // 2)
        rng = np.random.default_rng([seed, n, m, 14])
        self.Qc, lam = _low_rank_sym(rng, m, n, self.rank)
        self.pc = rng.standard_normal((m, n)) / n
        self.redrawn = 0                      # constraints redrawn because they cut off the origin
        if rhs == "authors":
            self.b_base = np.linalg.norm(self.pc, axis=1) + np.abs(lam).max(1) ** 2
        elif rhs == "quantile":
            v = radius * sphere(n_sphere, n, rng)
            g = 0.5 * np.einsum("ki,mij,kj->km", v, self.Qc, v) + v @ self.pc.T
            self.b_base = np.quantile(g, 0.5 ** (1.0 / m), axis=0)
            # A constraint whose α-quantile on the sphere is not positive would cut off the interior point 0
            # (mostly negative-definite Q_i); such (Q_i, p_i) are redrawn, as often as needed.
            self.redrawn = 0
            for _ in range(1000):
                bad = np.flatnonzero(self.b_base <= 0)
                if not bad.size:
                    break
                Qn, _ = _low_rank_sym(rng, bad.size, n, self.rank)
                pn = rng.standard_normal((bad.size, n)) / n
                gn = 0.5 * np.einsum("ki,mij,kj->km", v, Qn, v) + v @ pn.T
                self.Qc[bad], self.pc[bad] = Qn, pn
                self.b_base[bad] = np.quantile(gn, 0.5 ** (1.0 / m), axis=0)
                self.redrawn += int(bad.size)
        else:
            raise ValueError(f"rhs must be 'quantile' or 'authors'; got {rhs!r}")
        assert (self.b_base > 0).all(), "the origin must be strictly feasible"
        self._t = {}

    # ------------------------------------------------------------------ sampling
    def sample(self, k: int, rng: np.random.Generator) -> Instances:
        """k instances: s ~ U[0.9, 1.1]^m and an objective drawn as the authors draw theirs."""
        s = rng.uniform(*SCALE_RANGE, size=(k, self.m))
        Q, _ = _low_rank_sym(rng, k, self.n, self.rank)
        p = rng.standard_normal((k, self.n)) / self.n
        return Instances(s, Q, p)

    def sample_s(self, k: int, gen: torch.Generator | None = None) -> torch.Tensor:
        lo, hi = SCALE_RANGE
        return lo + (hi - lo) * torch.rand(k, self.m, generator=gen)

    @staticmethod
    def condition(s: torch.Tensor | np.ndarray) -> torch.Tensor:
        """The INN's condition: scale factors mapped to [−1, 1]."""
        s = torch.as_tensor(s, dtype=torch.float32)
        lo, hi = SCALE_RANGE
        return (2 * s - (lo + hi)) / (hi - lo)

    # ------------------------------------------------------------------ torch functions (batched)
    def tensors(self, dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if dtype not in self._t:
            self._t[dtype] = tuple(torch.as_tensor(a, dtype=dtype) for a in (self.Qc, self.pc, self.b_base))
        return self._t[dtype]

    def quad_constraints(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """g_i(x) for a batch: x [k, n], s [k, m] -> [k, m] (one einsum, m·n² per point)."""
        Qc, pc, b = self.tensors(x.dtype)
        xQ = torch.einsum("ki,mij->kmj", x, Qc)
        return 0.5 * (xQ * x[:, None, :]).sum(-1) + x @ pc.T - s.to(x.dtype) * b

    def all_constraints(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """[k, m + n + 1]: the quadratic constraints, the box |x_j| − 5 and the ball ‖x‖ − R (all ≤ 0 when feasible)."""
        return torch.cat([self.quad_constraints(x, s), x.abs() - self.box,
                          (x.norm(dim=1, keepdim=True) - self.radius)], dim=1)

    def violation(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """Max violation max(0, max_j c_j(x)) per point, [k], evaluated in float64 (so that a float32 iterate
        accepted at 1e-5 is also feasible at 1e-5 for the float64 check of C1); returned in x's dtype."""
        return self.all_constraints(x.double(), s.double()).amax(1).clamp_min(0).to(x.dtype)

    def packed(self) -> tuple[np.ndarray, np.ndarray]:
        """The kernel's layout of (Q_i, p_i): U_i = the upper triangle of Q_i with its diagonal halved (so that
        ½xᵀQ_ix = Σ_{j≤l} x_j U_i[j,l] x_l), rows and p_i zero-padded to a multiple of 8 columns; cached."""
        if "packed" not in self._t:
            n, npad = self.n, (self.n + 7) // 8 * 8
            U = np.zeros((self.m, n, npad))
            U[:, :, :n] = np.triu(self.Qc, 1) + np.einsum("mjj->mj", self.Qc)[:, :, None] * np.eye(n) / 2
            P = np.zeros((self.m, npad))
            P[:, :n] = self.pc
            self._t["packed"] = (U, P, np.ascontiguousarray(self.b_base, dtype=np.float64))
        return self._t["packed"]

    def check_violation(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """:meth:`violation` for the feasibility check and the bisection of Hom-PGD⁺ (no gradient): the fused C++
        kernel for float32 points (float64 inside, as :meth:`violation`; equal to it up to rounding, see
        tests/test_hom_pgd.py), the torch path otherwise (other dtypes, a tensor needing a gradient, kernel not built).
        ``benchmarks/bench_hom_pgd.py`` times both."""
        if _kernels is None or x.dtype != torch.float32 or x.requires_grad or x.dim() != 2:
            return self.violation(x, s)
        U, P, b = self.packed()
        out = _kernels.violation(x.detach().contiguous().numpy(), s.detach().float().contiguous().numpy(), U, P, b,
                                 float(self.box), float(self.radius))
        return torch.from_numpy(out)

    @staticmethod
    def objective(x: torch.Tensor, Q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        """f(x) = ½ xᵀQx + pᵀx per instance, [k]."""
        return 0.5 * torch.einsum("ki,kij,kj->k", x, Q, x) + (p * x).sum(1)

    # ------------------------------------------------------------------ numpy (float64) for SLSQP / SDP
    def np_constraints(self, x: np.ndarray, s: np.ndarray) -> np.ndarray:
        """g_i(x) for one point x [n] and its scale factors s [m] -> [m]."""
        return 0.5 * np.einsum("i,mij,j->m", x, self.Qc, x) + self.pc @ x - s * self.b_base

    def np_jac_constraints(self, x: np.ndarray) -> np.ndarray:
        """∂g_i/∂x = Q_i x + p_i, [m, n] (Q_i symmetric)."""
        return self.Qc @ x + self.pc


def ray_reentry(family: QCQPFamily, s: np.ndarray, n_rays: int, rng: np.random.Generator,
                n_grid: int = 1000) -> float:
    """Fraction of rays from 0 (uniform directions) along which C is not one interval [0, t*] for t ∈ [0, R]:
    the ray leaves C and comes back. Star-shapedness about 0 (and so a radial homeomorphism) needs 0."""
    v = sphere(n_rays, family.n, rng)
    t = np.linspace(0, family.radius, n_grid)
    # g_i(t v) = ½ t² vᵀQ_i v + t p_iᵀv − s_i b_i, quadratic in t
    a = 0.5 * np.einsum("ki,mij,kj->km", v, family.Qc, v)
    c = v @ family.pc.T
    g = a[:, None, :] * t[None, :, None] ** 2 + c[:, None, :] * t[None, :, None] - (s * family.b_base)[None, None, :]
    feas = (g <= 0).all(-1) & (np.abs(t[None, :, None] * v[:, None, :]) <= family.box).all(-1)
    # feasible set along the ray is an interval starting at 0 iff feas is non-increasing in t
    reenter = (np.diff(feas.astype(int), axis=1) > 0).any(1)
    return float(reenter.mean())
