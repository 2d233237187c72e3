"""The invertible network Φ_θ(z; c): unit ball -> feasible set C(c), and its unsupervised MDH training.

*The chapter's map* (``inn_arch="star"``, :class:`CondStarFlow`): a boundary-preserving star flow
Φ(z) = R ρ(‖z‖; z/‖z‖, c) z/‖z‖ with ρ a learned monotone spline, ρ(0) = 0, ρ(1) = 1, so the unit sphere stays on the
R-sphere at finite latent coordinates. The affine-coupling flow below (``inn_arch="realnvp"``) is this chapter's
earlier map, kept for comparison.

*Architecture* (decision, labelled in the chapter): a conditional RealNVP (Dinh et al., 2017) — ``blocks``
affine couplings with alternating halves, each x_b ← x_b · exp(ŝ) + t with ŝ = 2 tanh(s/2) a bounded log-scale and
(s, t) = MLP([x_a, c]), then an element-wise affine layer. The authors use conditional MADE layers with
ActNorm/LU; a coupling has the same role and an exact, cheap inverse. The network outputs u in normalised
box coordinates and x = 5u (the authors' ``scale`` for the box [−5, 5]ⁿ, no clamp). The last layer of every
coupling net starts at zero, so the untrained Φ is the radial map x = R z. With ``ball_gauge=True`` (the chapter's
default) the flow is wrapped between two exact radial maps so that Φ maps the ball onto the R-ball whatever the
flow is (the authors' ``CvxINN`` construction for the convex part of a set, :class:`CondRealNVP`).

*MDH training* (Liang, Chen & Low, ICML 2023; the authors' ``learning/training/inn.py``, re-derived):

    L = −mean log|det J_Φ(z)| / n  +  w_pen · mean Σ_j relu(c_j(Φ(z); s))  +  w_dist · mean D  +  w_lip · max D
        + w_anchor · mean ‖Φ(0; c)‖²,

D = Σ_layers max_j ŝ_j (the largest log-scale of each layer, a distortion/Lipschitz proxy), with the authors'
weights w_pen = 10 (ramped up from 1 over the first 10 % of the steps, card pitfall "the volume term dominates
early"), w_dist = 0.01, w_lip = 0.1. z is uniform in the ball (decision: the authors sample the cube for n > 2).
The volume term pushes Φ to fill space, the hinge keeps the image inside C; the balance is the learned map.
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from .problems import BOX, QCQPFamily

LOG_SCALE_CAP = 2.0


def sample_ball(k: int, n: int, gen: torch.Generator | None = None) -> torch.Tensor:
    """k points uniform in the unit ball of R^n: a normal direction times a radius U^{1/n}."""
    v = torch.randn(k, n, generator=gen)
    v = v / v.norm(dim=1, keepdim=True).clamp_min(1e-12)
    return v * torch.rand(k, 1, generator=gen) ** (1.0 / n)


class Coupling(nn.Module):
    """One conditional affine coupling: the half ``mask`` passes through, the other half is scaled and shifted."""

    def __init__(self, n: int, c_dim: int, hidden: int, mask: torch.Tensor):
        super().__init__()
        self.register_buffer("mask", mask)
        self.n_in = int(mask.sum())
        self.n_out = n - self.n_in
        self.net = nn.Sequential(nn.Linear(self.n_in + c_dim, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
                                 nn.Linear(hidden, 2 * self.n_out))
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)
        self.idx_a = torch.nonzero(mask).flatten()
        self.idx_b = torch.nonzero(1 - mask).flatten()

    def _st(self, xa: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s, t = self.net(torch.cat([xa, c], 1)).chunk(2, dim=1)
        return LOG_SCALE_CAP * torch.tanh(s / LOG_SCALE_CAP), t

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        xa, xb = x[:, self.idx_a], x[:, self.idx_b]
        s, t = self._st(xa, c)
        y = torch.empty_like(x)
        y[:, self.idx_a] = xa
        y[:, self.idx_b] = xb * torch.exp(s) + t
        return y, s.sum(1), s.amax(1)

    def inverse(self, y: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        ya, yb = y[:, self.idx_a], y[:, self.idx_b]
        s, t = self._st(ya, c)
        x = torch.empty_like(y)
        x[:, self.idx_a] = ya
        x[:, self.idx_b] = (yb - t) * torch.exp(-s)
        return x


R_CLAMP = 1.0 - 1e-6     # latent radii are clamped below 1 before atanh (float32: 1 - 1e-6 is representable)


def _ratio_atanh(r: torch.Tensor) -> torch.Tensor:
    """atanh(r)/r, smooth at r = 0."""
    return torch.where(r < 1e-3, 1 + r * r / 3, torch.atanh(r) / r.clamp_min(1e-3))


def _ratio_tanh(s: torch.Tensor) -> torch.Tensor:
    """tanh(s)/s, smooth at s = 0."""
    return torch.where(s < 1e-3, 1 - s * s / 3, torch.tanh(s) / s.clamp_min(1e-3))


class CondRealNVP(nn.Module):
    """Φ(z; c) = 5 · A(C_K(…C_1(z; c)…; c)) with couplings C_k and an element-wise affine A.

    ``ball_gauge=True`` wraps the flow F = A∘C_K∘…∘C_1 between two exact radial maps, as the authors' ``CvxINN``
    does for the convex part of a set: Φ(z) = R κ(F(κ⁻¹(z))), κ⁻¹(z) = z atanh‖z‖/‖z‖ (open ball → Rⁿ) and
    κ(y) = y tanh‖y‖/‖y‖ (Rⁿ → open ball). Φ then maps the ball *onto* the R-ball whatever F is (the untrained
    Φ is again x = R z), so the convex part of C (‖x‖ ≤ R, which implies the box) is exact and F only has to carve
    out the non-convex constraints; the log-determinant includes both radial maps. Latent radii are clamped at
    1 − 1e-6 (float32), so the R-sphere is reached to within a relative 1e-6.
    """

    def __init__(self, n: int, c_dim: int, blocks: int, hidden: int, box: float = BOX, ball_gauge: bool = False):
        super().__init__()
        self.n, self.c_dim, self.box, self.ball_gauge = n, c_dim, box, ball_gauge
        half = torch.zeros(n)
        half[: n // 2] = 1
        if n == 1:
            raise ValueError("n must be >= 2 for a coupling flow")
        self.layers = nn.ModuleList(Coupling(n, c_dim, hidden, half if k % 2 == 0 else 1 - half) for k in range(blocks))
        self.log_a = nn.Parameter(torch.zeros(n))
        self.shift = nn.Parameter(torch.zeros(n))
        self.r_max = R_CLAMP if ball_gauge else 1.0      # largest latent radius the float32 map represents

    def forward(self, z: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x, log|det ∂x/∂z| (without the constant n log 5), distortion D = Σ_layers max_j ŝ_j; all per point."""
        logdet = torch.zeros(len(z), dtype=z.dtype)
        dist = torch.zeros(len(z), dtype=z.dtype)
        h = z
        n = self.n
        if self.ball_gauge:                       # κ⁻¹: radial derivative 1/(1 − r²), tangential atanh(r)/r
            r = torch.sqrt((z * z).sum(1) + 1e-20).clamp_max(R_CLAMP)
            q = _ratio_atanh(r)
            h = z / torch.sqrt((z * z).sum(1) + 1e-20).clamp_min(1e-10)[:, None] * (r * q)[:, None]
            logdet = logdet - torch.log1p(-r * r) + (n - 1) * torch.log(q)
        for layer in self.layers:
            h, ld, d = layer(h, c)
            logdet = logdet + ld
            dist = dist + d
        h = h * torch.exp(self.log_a) + self.shift
        logdet = logdet + self.log_a.sum()
        dist = dist + self.log_a.max()
        if self.ball_gauge:                       # κ: radial derivative sech²(s), tangential tanh(s)/s
            s = torch.sqrt((h * h).sum(1) + 1e-20)
            q = _ratio_tanh(s)
            h = h * q[:, None]
            logdet = logdet + 2 * torch.log(1 / torch.cosh(s)) + (n - 1) * torch.log(q)
        return self.box * h, logdet, dist

    def __call__(self, z, c):  # type hints for the common case
        return super().__call__(z, c)

    def map(self, z: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """x = Φ(z; c) only."""
        return self.forward(z, c)[0]

    def inverse(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """z = Φ⁻¹(x; c), exact."""
        h = x / self.box
        if self.ball_gauge:
            a = h.norm(dim=1)
            h = h / a.clamp_min(1e-10)[:, None] * (a.clamp_max(R_CLAMP) * _ratio_atanh(a.clamp_max(R_CLAMP)))[:, None]
        h = (h - self.shift) * torch.exp(-self.log_a)
        for layer in reversed(self.layers):
            h = layer.inverse(h, c)
        if self.ball_gauge:
            h = h * _ratio_tanh(h.norm(dim=1))[:, None]
        return h



# ----------------------------------------------------------------------------- boundary-preserving star flow

SPLINE_MIN = 1e-3        # smallest bin width / height / knot derivative of the radial spline


def rq_spline(r: torch.Tensor, w: torch.Tensor, h: torch.Tensor, d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Monotone rational-quadratic spline ρ on [0, 1] (Durkan et al., 2019, eq. 4) and its derivative ρ'(r), row-wise.

    ``w``, ``h``: [B, K] positive bin widths and heights summing to 1; ``d``: [B, K + 1] positive knot derivatives.
    ρ(0) = 0 and ρ(1) = 1 exactly (the last knot is pinned), so the unit sphere stays the unit sphere."""
    xk = torch.cat([torch.zeros_like(w[:, :1]), torch.cumsum(w, 1)], 1)
    yk = torch.cat([torch.zeros_like(h[:, :1]), torch.cumsum(h, 1)], 1)
    xk[:, -1] = 1.0
    yk[:, -1] = 1.0
    K = w.shape[1]
    k = (r[:, None] >= xk[:, 1:K]).sum(1, keepdim=True)               # bin index 0..K-1
    x0, x1 = xk.gather(1, k), xk.gather(1, k + 1)
    y0, y1 = yk.gather(1, k), yk.gather(1, k + 1)
    d0, d1 = d.gather(1, k), d.gather(1, k + 1)
    wk, hk = x1 - x0, y1 - y0
    sk = hk / wk
    xi = ((r[:, None] - x0) / wk).clamp(0.0, 1.0)
    om = xi * (1 - xi)
    den = sk + (d1 + d0 - 2 * sk) * om
    rho = y0 + hk * (sk * xi * xi + d0 * om) / den
    drho = sk * sk * (d1 * xi * xi + 2 * sk * om + d0 * (1 - xi) ** 2) / (den * den)
    return rho.squeeze(1), drho.squeeze(1)


class CondStarFlow(nn.Module):
    """Φ(z; c) = R ρ(‖z‖; z/‖z‖, c) z/‖z‖: a learned *star-shaped* homeomorphism of the ball that keeps the sphere.

    Every latent direction v is kept; along it the radius r ∈ [0, 1] goes through a monotone rational-quadratic
    spline ρ(·; v, c) with ``bins`` bins whose widths, heights and knot derivatives come from an MLP of (v, c)
    (2 hidden layers of width ``hidden``). ρ(0) = 0 and ρ(1) = 1 exactly, so Φ(0) = 0 (the known interior point) and
    Φ maps the unit sphere *onto* the R-sphere at finite latent coordinates: a point of ‖x‖ = R is reached at z = x/R,
    which float32 holds exactly. (The wrapped :class:`CondRealNVP` reaches the R-sphere only in the limit ‖z‖ → 1.)
    Where a quadratic constraint cuts a ray at radius ρ_e < R, MDH training can keep ρ below ρ_e/R for most of
    [0, 1] and rise to 1 in a thin shell. The feasible set C is star-shaped about 0 (control K1 counts rays that
    re-enter C), so such a map can represent a homeomorphism onto C up to that shell; it is a learned version of the
    gauge map. The last MLP layer starts at zero, so the untrained Φ is the radial map x = R z.

    In polar coordinates J_Φ is triangular (directions are kept; ρ's dependence on v only adds a shear): radial
    stretch R ρ'(r), tangential stretch R ρ(r)/r in n − 1 directions, so log|det J| = log ρ' + (n − 1) log(ρ/r)
    (+ n log R, a constant left out) exactly, and the distortion of MDH is D = max(log ρ', log ρ/r), the larger
    log-stretch (the analogue of the couplings' largest log-scale).
    """

    box = BOX

    def __init__(self, n: int, c_dim: int, hidden: int, bins: int = 8, radius: float = BOX):
        super().__init__()
        self.n, self.c_dim, self.bins, self.radius = n, c_dim, bins, radius
        self.net = nn.Sequential(nn.Linear(n + c_dim, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
                                 nn.Linear(hidden, 3 * bins + 1))
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)
        # softplus(u + D_SHIFT) + SPLINE_MIN = 1 at u = 0, so that the zero-initialised net gives ρ(r) = r
        self.d_shift = math.log(math.expm1(1.0 - SPLINE_MIN))
        self.r_max = 1.0

    def spline_params(self, v: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        K = self.bins
        u = self.net(torch.cat([math.sqrt(self.n) * v, c], 1))   # √n v: unit-variance entries, like c
        w = SPLINE_MIN + (1 - K * SPLINE_MIN) * torch.softmax(u[:, :K], 1)
        h = SPLINE_MIN + (1 - K * SPLINE_MIN) * torch.softmax(u[:, K:2 * K], 1)
        d = SPLINE_MIN + nn.functional.softplus(u[:, 2 * K:] + self.d_shift)
        return w, h, d

    def _polar(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r = torch.sqrt((z * z).sum(1) + 1e-30)
        return r, z / r.clamp_min(1e-12)[:, None]

    def forward(self, z: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x, log|det ∂x/∂z| (without the constant n log R), distortion D; all per point."""
        r, v = self._polar(z)
        rc = r.clamp_max(1.0)                       # Hom-PGD projects onto the ball; beyond it the map is radial-constant
        rho, drho = rq_spline(rc, *self.spline_params(v, c))
        q = torch.where(rc < 1e-6, drho, rho / rc.clamp_min(1e-6))   # ρ(r)/r, → ρ'(0) at the centre
        x = self.radius * q[:, None] * z * torch.where(r > 1.0, 1.0 / r, torch.ones_like(r))[:, None]
        logdet = torch.log(drho) + (self.n - 1) * torch.log(q)
        dist = torch.maximum(torch.log(drho), torch.log(q))
        return x, logdet, dist

    def __call__(self, z, c):
        return super().__call__(z, c)

    def map(self, z: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return self.forward(z, c)[0]

    @torch.no_grad()
    def inverse(self, x: torch.Tensor, c: torch.Tensor, iters: int = 60) -> torch.Tensor:
        """z = Φ⁻¹(x; c): the direction of x, and r = ρ⁻¹(‖x‖/R) by bisection (ρ is monotone; 60 halvings reach
        float64 resolution). Points beyond the R-ball get r = 1 (their radial projection's pre-image)."""
        a = (x.norm(dim=1) / self.radius).clamp(0.0, 1.0)
        v = x / x.norm(dim=1).clamp_min(1e-30)[:, None]
        w, h, d = self.spline_params(v, c)
        lo, hi = torch.zeros_like(a), torch.ones_like(a)
        for _ in range(iters):
            mid = 0.5 * (lo + hi)
            below = rq_spline(mid, w, h, d)[0] < a
            lo, hi = torch.where(below, mid, lo), torch.where(below, hi, mid)
        return v * (0.5 * (lo + hi))[:, None]


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@dataclass
class MDHWeights:
    """The authors' loss weights, plus the anchor that keeps Φ(0; c) = x₀ = 0."""

    pen: float = 10.0
    dist: float = 0.01
    lip: float = 0.1
    anchor: float = 1.0
    pen_start: float = 1.0
    ramp_frac: float = 0.1


@dataclass
class TrainResult:
    """Loss history (per step), seconds, and EMA state dicts at the requested checkpoints."""

    history: dict[str, list[float]] = field(default_factory=dict)
    checkpoints: dict[int, dict] = field(default_factory=dict)
    seconds: float = 0.0


def mdh_loss(inn: CondRealNVP, family: QCQPFamily, z: torch.Tensor, s: torch.Tensor, w_pen: float,
             w: MDHWeights) -> tuple[torch.Tensor, dict[str, float]]:
    """The MDH objective on one batch (module docstring); also returns its parts."""
    c = family.condition(s)
    x, logdet, dist = inn(z, c)
    vol = -logdet.mean() / family.n
    pen = family.all_constraints(x, s).clamp_min(0).sum(1).mean()
    x0 = inn.map(torch.zeros(min(len(z), 64), family.n), c[:64])
    anchor = (x0 ** 2).sum(1).mean()
    loss = vol + w_pen * pen + w.dist * dist.mean() + w.lip * dist.max() + w.anchor * anchor
    parts = {"loss": loss, "volume": vol, "penalty": pen, "distortion": dist.mean(), "anchor": anchor}
    return loss, {k: float(v.detach()) for k, v in parts.items()}


def train_mdh(inn: CondRealNVP, family: QCQPFamily, steps: int, batch: int, seed: int,
              weights: MDHWeights | None = None, checkpoints: tuple[int, ...] = (), lr: float = 1e-3,
              ema_decay: float = 0.99) -> tuple[CondRealNVP, TrainResult]:
    """Unsupervised MDH training with Adam; returns the EMA copy (used for solving) and the history.

    ``checkpoints`` are steps at which the EMA weights are saved (C5). The loss history is the training
    batch's loss with the *final* penalty weight, so steps before and after the ramp are comparable (K4).
    """
    w = weights or MDHWeights()
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    opt = torch.optim.Adam(inn.parameters(), lr=lr)
    ema = copy.deepcopy(inn)
    for p in ema.parameters():
        p.requires_grad_(False)
    res = TrainResult(history={k: [] for k in ("loss", "volume", "penalty", "distortion", "anchor")})
    ramp = max(1, int(w.ramp_frac * steps))
    t0 = time.process_time()
    for step in range(1, steps + 1):
        w_pen = w.pen_start + (w.pen - w.pen_start) * min(1.0, step / ramp)
        z = sample_ball(batch, family.n, gen)
        s = family.sample_s(batch, gen)
        loss, parts = mdh_loss(inn, family, z, s, w_pen, w)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        with torch.no_grad():
            for pe, p in zip(ema.parameters(), inn.parameters()):
                pe.mul_(ema_decay).add_(p, alpha=1 - ema_decay)
        parts["loss"] = parts["volume"] + w.pen * parts["penalty"] + w.dist * parts["distortion"] + w.anchor * parts["anchor"]
        for k, v in parts.items():
            res.history[k].append(v)
        if step in checkpoints:
            res.checkpoints[step] = copy.deepcopy(ema.state_dict())
    res.seconds = time.process_time() - t0
    return ema, res


@torch.no_grad()
def eps_inn(phi, family: QCQPFamily, k: int, seed: int, chunk: int = 20_000, tol: float = 1e-5) -> float:
    """ε_inn: fraction of k uniform ball samples z (with random conditions) whose image Φ(z; s) is infeasible."""
    gen = torch.Generator().manual_seed(seed)
    bad = 0
    for start in range(0, k, chunk):
        b = min(chunk, k - start)
        z = sample_ball(b, family.n, gen)
        s = family.sample_s(b, gen)
        bad += int((family.violation(phi(z, family.condition(s)), s) > tol).sum())
    return bad / k


REACH_TAU = 1e-3        # K2's reach tolerance, relative to the radius R (fixed before any result; see reach_misses)


@torch.no_grad()
def reach_misses(inn, family: QCQPFamily, x: np.ndarray, s: np.ndarray, iters: int = 60) -> np.ndarray:
    """How close Hom-PGD⁺ can get to each point x* through Φ: the miss d(x*) = ‖Φ(z_t) − x*‖ (x units), per point.

    The rule of control K2's coverage, fixed before any result: t* is the largest t ∈ [0, 1] (``iters`` halvings)
    whose exact pre-image Φ⁻¹(t x*), computed in float64, lies within the latent radius ``inn.r_max`` that the
    float32 map can represent (1 for the star flow and the plain flow, 1 − 1e-6 for the gauge-wrapped RealNVP,
    whose atanh needs a clamp); z_t = Φ⁻¹(t* x*), and Φ is evaluated exactly as Hom-PGD⁺ evaluates it (float32).
    Since C is star-shaped about 0 the segment t x* lies in C, so d is an upper bound on the distance from x* to
    the feasible points Hom-PGD⁺ can reach. x* counts as reachable when d ≤ τ = REACH_TAU · R."""
    inn64 = copy.deepcopy(inn).double()
    X = torch.as_tensor(x, dtype=torch.float64)
    c64 = family.condition(s).double()
    r_max = float(getattr(inn, "r_max", 1.0))
    lo = torch.zeros(len(X), 1, dtype=torch.float64)
    hi = torch.ones_like(lo)
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        ok = inn64.inverse(mid * X, c64).norm(dim=1, keepdim=True) <= r_max
        lo, hi = torch.where(ok, mid, lo), torch.where(ok, hi, mid)
    z = inn64.inverse(lo * X, c64)
    z = z / (z.norm(dim=1, keepdim=True) / r_max).clamp_min(1.0)
    back = inn.map(z.float(), family.condition(s)).double()
    return (back - X).norm(dim=1).numpy()


@torch.no_grad()
def preimage_norms(inn, family: QCQPFamily, x: np.ndarray, s: np.ndarray) -> np.ndarray:
    """‖Φ⁻¹(x; s)‖ per point in float64: the card's literal coverage test (≤ 1). For a map *onto* the R-ball (the
    star flow, the gauge-wrapped RealNVP) every point of the R-ball passes it by construction, so it is reported
    beside :func:`reach_misses` but decides nothing; it is informative only for maps whose image is smaller."""
    inn64 = copy.deepcopy(inn).double()
    return inn64.inverse(torch.as_tensor(x, dtype=torch.float64), family.condition(s).double()).norm(dim=1).numpy()


def radial_map(radius: float):
    """The learning-free baseline map x = R z (the untrained Φ)."""
    return lambda z, c: radius * z

