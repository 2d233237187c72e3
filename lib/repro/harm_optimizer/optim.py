"""Harm-aware SGD-momentum and AdamW (card, *Method*; our reconstruction), and their plain baselines behind
one interface: ``opt.step_batch(x, y, lr) -> StepInfo`` does the forward pass, the B-dimensional problem, the
backward pass and the update.

A step of X proposes the descent direction d_opt (θ ← θ − η d, weight decay included as X applies it).
Harm-X solves the dual (qp.py, eq. 1) for α ≥ 0 on the last layer (``mode="proxy"``) or on the full network
(``mode="exact"``, per-sample gradients by ``torch.func``), and moves along d = d_opt + P⁻¹Gᵀα, where Gᵀα is
the gradient of Σ_i α_i ℓ_i — an ordinary backward pass with per-sample loss weights.

Where the correction goes (``correction_in_state``):
* ``False`` (the chapter's main variant, the card's *Controls and risks*): the correction moves the current
  step only; the optimizer's state (momentum m, Adam's m and v) is fed the plain mean gradient ḡ. This needs
  ḡ and Gᵀα separately: two backward passes through the same graph. The correction is capped twice: on the
  last layer (√(αᵀKα) <= cap ‖D_W‖, the card's cap) and on the full network (‖correction‖ <= cap ‖d_opt‖, the
  card's risk note: α is solved on the head but Gᵀα moves every layer).
* ``True`` (the card's first design, kept as an ablation): Harm-SGDM feeds ḡ + Gᵀα into m (ONE backward of
  Σ(1/B + α_i)ℓ_i); Harm-AdamW feeds ḡ + s_t Gᵀα into m with s_t = (1 − β₁ᵗ)/(1 − β₁), so that the
  correction reaches the step with unit weight, and ḡ alone into v. Only the last-layer cap applies here
  (Harm-SGDM never sees Gᵀα apart from ḡ).

Gradient-norm clipping (``clip``, the same for X and Harm-X): the mini-batch mean gradient ḡ is rescaled to
norm <= ``clip`` over the whole network before it enters the optimizer (``torch.nn.utils.clip_grad_norm_``'s
rule, factor f = min(1, clip / (‖ḡ‖ + 1e-6))). Harm-X clips ḡ with the same factor, so its d_opt is exactly
X's proposed step; the per-sample gradients in K and c are left as they are (the correction Gᵀα does not
depend on their scale: scaling G by s scales α by 1/s), and the correction is bounded by the caps. Clipping
needs ‖ḡ‖ before the QP, so Harm-X computes ḡ's backward first; with ``clip > 0`` the ``correction_in_state``
variant therefore also takes two backward passes.

With α ≡ 0 both reproduce ``torch.optim.SGD(momentum, weight_decay)`` and ``torch.optim.AdamW`` (tested),
with or without clipping.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from . import qp
from .diagnostics import HARM_TOL


@dataclass
class StepInfo:
    """What one step measured. ``losses`` are ℓ_i(θ_old) on the batch; QP fields are None for baselines."""

    losses: torch.Tensor
    alpha: torch.Tensor | None = None
    cap_bound: bool = False
    viol_before: int = 0
    viol_after: int = 0
    extra: dict = field(default_factory=dict)


def _head_block(head: nn.Linear, tensors: dict) -> torch.Tensor:
    """[W | b] of a per-parameter dict (for the head's weight and bias), shape [C, d_h+1]."""
    return torch.cat([tensors[head.weight], tensors[head.bias][:, None]], dim=1)


def _errors(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """e_i = ∂ℓ_i/∂logits = softmax − onehot for cross-entropy, in float64 and numerically stable.

    The float32 difference p_y − 1 is zero once p_y rounds to 1 (loss below ~6e-8), while the other entries
    p_c stay positive: the computed e_i then points the wrong way (it no longer sums to 0) and is dominated by
    rounding. The Jacobi-scaled QP gives every constraint the same weight whatever ‖g_i‖, so such a sample's
    multiplier grows like 1/‖g_i‖ (we saw α_i ≈ 7·10⁷ on the MNIST-1D CNN) and its rounding error reaches the
    step at full size. Here p_c = exp(log_softmax) in float64 and the true class's entry is −Σ_{c≠y} p_c."""
    logp = torch.log_softmax(logits.detach().double(), dim=1)
    onehot = F.one_hot(y, logits.shape[1]).bool()
    p_other = logp.exp().masked_fill(onehot, 0.0)
    return p_other - onehot.double() * p_other.sum(1, keepdim=True)


def per_sample_grads(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """G ∈ R^{B×P}: the per-sample gradients of the cross-entropy, flattened in ``model.parameters()`` order
    (``torch.func.vmap(grad)``). Each row is J_iᵀe_i, the logits' Jacobian applied to the stable e_i of
    :func:`_errors` (the same value as ∇ℓ_i, without float32's cancellation in p_y − 1)."""
    params = {k: v.detach() for k, v in model.named_parameters()}
    with torch.no_grad():
        e = _errors(model(x), y).to(x.dtype)

    def lin_one(p, xi, ei):
        out = functional_call(model, p, (xi[None],))
        return (out[0] * ei).sum()

    g = vmap(grad(lin_one), in_dims=(None, 0, 0))(params, x, e)
    return torch.cat([g[k].reshape(x.shape[0], -1) for k in params], dim=1)


def clip_factor(grads, clip: float) -> float:
    """f = min(1, clip / (‖g‖ + 1e-6)) over all tensors of ``grads`` (1.0 when ``clip`` <= 0): the factor of
    ``torch.nn.utils.clip_grad_norm_``."""
    if clip <= 0:
        return 1.0
    n = math.sqrt(sum(float((g.double() * g.double()).sum()) for g in grads))
    return min(1.0, clip / (n + 1e-6))


def flat(tensors) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors])


class _Base:
    """Shared plumbing: parameters, the forward pass with features, the weighted backward."""

    name = "base"
    harm = False

    def __init__(self, model: nn.Module, lr: float, weight_decay: float, clip: float = 0.0) -> None:
        self.model = model
        self.params = [p for p in model.parameters()]
        self.lr = lr
        self.wd = weight_decay
        self.clip = float(clip)
        self.t = 0

    def _mean_grad(self, losses: torch.Tensor, retain: bool) -> tuple[list, float]:
        """ḡ = ∇ mean ℓ, clipped (see the module docstring), and the clip factor f."""
        B = losses.shape[0]
        g = self._grads(losses, torch.full((B,), 1.0 / B, dtype=losses.dtype), retain=retain)
        f = clip_factor(g, self.clip)
        return ([t * f for t in g] if f < 1.0 else g), f

    def _forward(self, x, y):
        h = self.model.features(x)
        logits = self.model.head(h)
        losses = F.cross_entropy(logits, y, reduction="none")
        return h, logits, losses

    def _grads(self, losses: torch.Tensor, weights: torch.Tensor, retain: bool = False) -> list[torch.Tensor]:
        """∇ Σ_i w_i ℓ_i: one backward pass with per-sample loss weights ``weights`` [B]."""
        return list(torch.autograd.grad(losses, self.params, grad_outputs=weights, retain_graph=retain))

    def _corr_grad(self, logits: torch.Tensor, e: torch.Tensor, alpha: torch.Tensor) -> list:
        """Gᵀα = Σ_i α_i J_iᵀe_i (through the logits, with the stable e_i of :func:`_errors`): the second
        backward pass through the graph whose first gave ḡ (two passes were measured faster than one
        ``is_grads_batched`` pass on these models)."""
        return list(torch.autograd.grad(logits, self.params, grad_outputs=(alpha[:, None] * e).to(logits.dtype)))

    def _cap_full(self, d_opt: list, corr: list, scale_of: list) -> tuple[list, bool]:
        """The card's risk note: a multiplier solved on the last layer also moves every other layer through
        Gᵀα, where nothing bounds it. Shrink the correction so that its full-network norm is at most
        ``cap`` × ‖d_opt‖ (``corr`` is the step's correction, ``scale_of`` the tensors to rescale)."""
        nd = math.sqrt(sum(float((d * d).sum()) for d in d_opt))
        nc = math.sqrt(sum(float((c * c).sum()) for c in corr))
        if nc > self.cap * nd and nc > 0:
            f = self.cap * nd / nc
            return [t * f for t in scale_of], True
        return scale_of, False


class TorchBaseline(_Base):
    """SGDM or AdamW from ``torch.optim`` (the methods being modified), with the chapter's step interface."""

    harm = False

    def __init__(self, model, kind: str, lr: float, weight_decay: float, momentum: float = 0.9,
                 betas=(0.9, 0.999), eps: float = 1e-8, clip: float = 0.0) -> None:
        super().__init__(model, lr, weight_decay, clip)
        self.name = kind
        if kind == "sgdm":
            self.opt = torch.optim.SGD(self.params, lr=lr, momentum=momentum, weight_decay=weight_decay)
        elif kind == "adamw":
            self.opt = torch.optim.AdamW(self.params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        else:
            raise ValueError(f"unknown baseline {kind!r}")

    def step_batch(self, x, y, lr: float | None = None) -> StepInfo:
        if lr is not None:
            for g in self.opt.param_groups:
                g["lr"] = lr
        _, _, losses = self._forward(x, y)
        self.opt.zero_grad(set_to_none=True)
        losses.mean().backward()
        f = clip_factor([p.grad for p in self.params], self.clip)
        if f < 1.0:
            with torch.no_grad():
                for p in self.params:
                    p.grad.mul_(f)
        self.opt.step()
        self.t += 1
        return StepInfo(losses.detach(), extra={"clipped": f < 1.0})


class _Harm(_Base):
    harm = True

    def __init__(self, model, lr, weight_decay, qp_iters: int = 10, cap: float = 1.0, mode: str = "proxy",
                 correction_in_state: bool = False, backend: str = "auto", force_zero_alpha: bool = False,
                 clip: float = 0.0) -> None:
        super().__init__(model, lr, weight_decay, clip)
        if mode not in ("proxy", "exact"):
            raise ValueError(f"mode must be 'proxy' or 'exact'; got {mode!r}")
        self.qp_iters, self.cap, self.mode = qp_iters, cap, mode
        self.in_state = correction_in_state
        self.backend = backend
        self.force_zero_alpha = force_zero_alpha
        self.head = model.head
        idx = {id(p): i for i, p in enumerate(self.params)}
        self._iw, self._ib = idx[id(self.head.weight)], idx[id(self.head.bias)]

    def _solve(self, K, c, dnorm, gnorm, lr, step_norm):
        """α of (1), capped, and the first-order violations before/after the correction.

        Constraints that cannot matter are dropped (their multiplier is 0): sample i's first-order loss change
        is at most ‖g_i‖‖Δθ‖ <= lr (1 + cap) ‖g_i‖ ‖d_opt‖ (Euclidean, on the layer(s) of the QP), and when that
        bound is below the harm tolerance (Δℓ_i > 1e-6, the card's definition of harmed) the step cannot harm
        it to first order. Keeping such constraints is not harmless: the Jacobi-scaled problem weighs every
        constraint alike whatever ‖g_i‖, so a sample with ℓ_i ≈ 1e-9 gets α_i ∝ 1/‖g_i‖ (we saw 10¹⁸ on the
        MNIST-1D CNN, then an overflow to NaN in the exact variant) and a full-size share of the correction.
        Violations are counted over the constraints kept; ``extra["dropped"]`` counts the others."""
        B = c.shape[0]
        live = (lr * (1.0 + self.cap) * step_norm * gnorm.double()) >= HARM_TOL
        K, c = K.double(), c.double()
        if not bool(live.all()):
            lf = live.double()
            K, c = K * lf[:, None] * lf[None, :], c * lf
        if self.force_zero_alpha:
            alpha, bound = torch.zeros(B, dtype=torch.float64), False
        else:
            alpha = qp.solve_nonneg_qp(K, c, self.qp_iters, backend=self.backend)
            alpha, bound = qp.cap_correction(alpha, K, dnorm, self.cap)
        before, after = qp.violations(c[live], (K @ alpha)[live], gnorm[live], dnorm)
        return alpha, bound, before, after, int((~live).sum())

    def _exact_problem(self, x, y, d_opt_flat, pinv_flat=None):
        G = per_sample_grads(self.model, x, y)
        GP = G if pinv_flat is None else G * pinv_flat
        K = (GP @ G.T).double()
        c = (G @ d_opt_flat).double()
        return G, K, c

    def _unflatten(self, v: torch.Tensor) -> list[torch.Tensor]:
        out, i = [], 0
        for p in self.params:
            out.append(v[i:i + p.numel()].view_as(p))
            i += p.numel()
        return out


class HarmSGDM(_Harm):
    """Harm-SGDM (torch's convention, dampening 0): d_opt = βm + ḡ + λθ, d = d_opt + Gᵀα."""

    name = "harm_sgdm"

    def __init__(self, model, lr: float, momentum: float = 0.9, weight_decay: float = 0.0, **kw) -> None:
        super().__init__(model, lr, weight_decay, **kw)
        self.beta = momentum
        self.buf = [torch.zeros_like(p) for p in self.params]

    @torch.no_grad()
    def _update(self, gbar, gcorr, lr):
        b = self.beta if self.t > 0 else 0.0
        for p, m, g, gc in zip(self.params, self.buf, gbar, gcorr):
            m.mul_(b).add_(g).add_(p, alpha=self.wd)
            if gc is not None and self.in_state:
                m.add_(gc)
            p.sub_(m, alpha=lr)
            if gc is not None and not self.in_state:
                p.sub_(gc, alpha=lr)

    def step_batch(self, x, y, lr: float | None = None) -> StepInfo:
        lr = self.lr if lr is None else lr
        B = x.shape[0]
        h, logits, losses = self._forward(x, y)
        b = self.beta if self.t > 0 else 0.0
        one_bw = self.in_state and self.clip <= 0 and self.mode == "proxy"
        f = 1.0
        if not one_bw:                                            # ḡ first: its clip factor enters d_opt
            gbar, f = self._mean_grad(losses, retain=self.mode == "proxy")
        with torch.no_grad():
            e = _errors(logits, y)                                  # float64, stable
            hb = qp.with_bias(h).double()
            if self.mode == "proxy":
                W = torch.cat([self.head.weight, self.head.bias[:, None]], 1).double()
                M = torch.cat([self.buf[self._iw], self.buf[self._ib][:, None]], 1).double()
                D = b * M + self.wd * W + f * (e.T @ hb) / B        # head block of d_opt (ḡ clipped)
                K = qp.lastlayer_gram(e, hb).double()
                c = qp.lastlayer_c(e, hb, D).double()
                dnorm = float(torch.linalg.matrix_norm(D))
                gnorm = torch.linalg.vector_norm(e, dim=1) * torch.linalg.vector_norm(hb, dim=1)
        if self.mode == "exact":
            with torch.no_grad():
                d_opt = flat([b * m + g + self.wd * p for m, g, p in zip(self.buf, gbar, self.params)])
                G, K, c = self._exact_problem(x, y, d_opt)
                dnorm = float(torch.linalg.vector_norm(d_opt))
                gnorm = torch.linalg.vector_norm(G, dim=1)
                alpha, bound, vb, va, drop = self._solve(K, c, dnorm, gnorm, lr, dnorm)
                gcorr = self._unflatten(G.T @ alpha.to(G.dtype))
            self._update(gbar, gcorr, lr)
        else:
            with torch.no_grad():
                alpha, bound, vb, va, drop = self._solve(K, c, dnorm, gnorm, lr, dnorm)
            if one_bw:                                            # one backward of Σ(1/B + α_i)ℓ_i
                w = (alpha + 1.0 / B)[:, None] * e                 # through the logits, stable e_i
                u = list(torch.autograd.grad(logits, self.params, grad_outputs=w.to(logits.dtype)))
                self._update(u, [None] * len(u), lr)
            elif self.in_state:                                   # clipped ḡ + Gᵀα into the momentum
                gcorr = self._corr_grad(logits, e, alpha)
                self._update([g + gc for g, gc in zip(gbar, gcorr)], [None] * len(gbar), lr)
            else:                                                 # Gᵀα, then the full-network cap
                gcorr = self._corr_grad(logits, e, alpha)
                with torch.no_grad():
                    d_opt = [b * m + g + self.wd * p for m, g, p in zip(self.buf, gbar, self.params)]
                    gcorr, full = self._cap_full(d_opt, gcorr, gcorr)
                bound = bound or full
                self._update(gbar, gcorr, lr)
        self.t += 1
        return StepInfo(losses.detach(), alpha, bound, vb, va, {"dropped": drop, "clipped": f < 1.0})


class HarmAdamW(_Harm):
    """Harm-AdamW (own AdamW, equal to ``torch.optim.AdamW`` when α = 0): d_opt = m̂/P + λθ with
    P = √v̂ + ε from ḡ; the P-weighted problem has K = G P⁻¹ Gᵀ, c = G d_opt, and d = d_opt + P⁻¹Gᵀα."""

    name = "harm_adamw"

    def __init__(self, model, lr: float, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2,
                 **kw) -> None:
        super().__init__(model, lr, weight_decay, **kw)
        self.b1, self.b2 = betas
        self.eps = eps
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]

    def _moments(self, g, i, t):
        """m̂, P for parameter i after feeding gradient g at step t (without storing)."""
        m = self.b1 * self.m[i] + (1 - self.b1) * g
        v = self.b2 * self.v[i] + (1 - self.b2) * g * g
        mhat = m / (1 - self.b1 ** t)
        P = torch.sqrt(v / (1 - self.b2 ** t)) + self.eps
        return mhat, P

    @torch.no_grad()
    def _update(self, gbar, gcorr, lr, t):
        bc1, bc2 = 1 - self.b1 ** t, 1 - self.b2 ** t
        s_t = bc1 / (1 - self.b1)
        for i, (p, g) in enumerate(zip(self.params, gbar)):
            gc = gcorr[i]
            gm = g + s_t * gc if (gc is not None and self.in_state) else g
            self.m[i].mul_(self.b1).add_(gm, alpha=1 - self.b1)
            self.v[i].mul_(self.b2).addcmul_(g, g, value=1 - self.b2)
            P = (self.v[i] / bc2).sqrt().add_(self.eps)
            p.mul_(1 - lr * self.wd)
            p.addcdiv_(self.m[i], P, value=-lr / bc1)
            if gc is not None and not self.in_state:
                p.addcdiv_(gc, P, value=-lr)

    def step_batch(self, x, y, lr: float | None = None) -> StepInfo:
        lr = self.lr if lr is None else lr
        B = x.shape[0]
        t = self.t + 1
        h, logits, losses = self._forward(x, y)
        gbar, f = self._mean_grad(losses, retain=self.mode == "proxy")   # ḡ first: its clip factor enters d_opt
        if self.mode == "proxy":
            with torch.no_grad():
                e = _errors(logits, y)                                # float64, stable
                hb = qp.with_bias(h).double()
                gW = f * (e.T @ hb) / B                               # clipped ḡ on the head block
                mW, PW = self._moments(gW[:, :-1], self._iw, t)
                mb, Pb = self._moments(gW[:, -1], self._ib, t)
                W = torch.cat([self.head.weight, self.head.bias[:, None]], 1).double()
                P = torch.cat([PW, Pb[:, None]], 1)
                D = torch.cat([mW, mb[:, None]], 1) / P + self.wd * W
                K = qp.lastlayer_gram(e, hb, 1.0 / P).double()
                c = qp.lastlayer_c(e, hb, D).double()
                dnorm = float(torch.sqrt((P * D * D).sum()))          # ‖d_opt‖_P, the metric of K
                gnorm = torch.linalg.vector_norm(e, dim=1) * torch.linalg.vector_norm(hb, dim=1)
                alpha, bound, vb, va, drop = self._solve(K, c, dnorm, gnorm, lr, float(torch.linalg.matrix_norm(D)))
            gcorr = self._corr_grad(logits, e, alpha)
            if not self.in_state:
                with torch.no_grad():
                    mom = [self._moments(g, i, t) for i, g in enumerate(gbar)]
                    d_opt = [mh / P + self.wd * p for (mh, P), p in zip(mom, self.params)]
                    gcorr, full = self._cap_full(d_opt, [gc / P for gc, (_, P) in zip(gcorr, mom)], gcorr)
                bound = bound or full
        else:
            with torch.no_grad():
                mom = [self._moments(g, i, t) for i, g in enumerate(gbar)]
                Pf = flat([P for _, P in mom])
                d_opt = flat([mh / P + self.wd * p for (mh, P), p in zip(mom, self.params)])
                G, K, c = self._exact_problem(x, y, d_opt, 1.0 / Pf)
                dnorm = float(torch.sqrt((Pf * d_opt * d_opt).sum()))
                gnorm = torch.linalg.vector_norm(G, dim=1)
                alpha, bound, vb, va, drop = self._solve(K, c, dnorm, gnorm, lr,
                                                         float(torch.linalg.vector_norm(d_opt)))
                gcorr = self._unflatten(G.T @ alpha.to(G.dtype))
        self._update(gbar, gcorr, lr, t)
        self.t = t
        return StepInfo(losses.detach(), alpha, bound, vb, va, {"dropped": drop, "clipped": f < 1.0})


def make_optimizer(name: str, model: nn.Module, hp: dict, **harm_kw):
    """``name`` ∈ {sgdm, harm_sgdm, adamw, harm_adamw}; ``hp``: lr, momentum / betas, weight_decay and clip
    (gradient-norm clipping of ḡ, 0 = off; the same for X and Harm-X)."""
    clip = hp.get("clip", 0.0)
    if name == "sgdm":
        return TorchBaseline(model, "sgdm", hp["lr"], hp["weight_decay"], momentum=hp.get("momentum", 0.9), clip=clip)
    if name == "adamw":
        return TorchBaseline(model, "adamw", hp["lr"], hp["weight_decay"], clip=clip)
    if name == "harm_sgdm":
        return HarmSGDM(model, hp["lr"], momentum=hp.get("momentum", 0.9), weight_decay=hp["weight_decay"],
                        clip=clip, **harm_kw)
    if name == "harm_adamw":
        return HarmAdamW(model, hp["lr"], weight_decay=hp["weight_decay"], clip=clip, **harm_kw)
    raise ValueError(f"unknown optimizer {name!r}")
