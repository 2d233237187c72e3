"""Concept erasure: the ESD objective, UnHype's hypernetwork training, and the baselines.

* ESD (Gandikota et al., 2023, Eq. 2 of the UnHype paper): with the adapter off,
  v* = v(x_t, t, c_a) - eta_neg (v(x_t, t, c*) - v(x_t, t, c_a)), and L_ESD = MSE(v(x_t, t, c*; adapter), v*).
  x_t is drawn by running the *base* sampler (CFG 3) with the target prompt c* and stopping at a grid step, as the
  authors' script does. x_t and v* depend only on the frozen base, so they are precomputed once per target in an
  :class:`ESDBank` shared by UnHype, LoRA-ESD and ESD-x.
* UnHype (Sec. 3, "Hypernet Fields" gradient matching; ``backends/sd_train.py`` of the authors' code): one
  iteration reads g = dL_ESD/dT_k at the generated tensors T_k = H(c*, k), asks H(c*, k+1) - H(c*, k) = -eta_int g
  (removal loss, weight 10), and keeps H(c_r, k) = H(c_r, 0) for retain prompts (retention loss, weight 5), with
  two Adam optimizers. With ``aux_to_hyper=True`` (the repository's behaviour) the ESD loss's own gradient w.r.t.
  H's parameters is not zeroed before the removal step, so Adam applies grad_H L_ESD + grad_H L_remove.
* :func:`explicit_gd_trajectory` -- the trajectory H amortizes: a static LoRA moved by plain GD on L_ESD.
* Baselines: ESD-x (fine-tune the text projections), static LoRA-ESD, UCE (Gandikota et al., 2024, closed form),
  Concept Ablation (Kumari et al., 2023, model-based variant).
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from .hyperlora import Factors, HyperNet, LoRAContext, StaticLoRA, flat
from .models import CondMLP, sample


# ---------------------------------------------------------------------- ESD target and bank

@torch.no_grad()
def esd_target(model: CondMLP, x: torch.Tensor, t: torch.Tensor, c_star: torch.Tensor, c_anchor: torch.Tensor,
               eta: float = 1.0) -> torch.Tensor:
    """v* = v(x,t,c_a) - eta (v(x,t,c*) - v(x,t,c_a)) with every adapter off (eta = 0 gives the anchor)."""
    ctx = getattr(model, "lora", None)
    with (ctx.no_lora() if ctx is not None else torch.no_grad()):
        pa = model(x, t, c_anchor)
        ps = model(x, t, c_star)
    return pa - eta * (ps - pa)


@dataclass
class ESDBank:
    """Precomputed regression pairs for one set of target prompts: states x, times t, prompt ids p, targets y."""

    x: torch.Tensor
    t: torch.Tensor
    p: torch.Tensor
    y: torch.Tensor
    by_prompt: dict[int, torch.Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_prompt = {int(q): torch.nonzero(self.p == q).flatten() for q in torch.unique(self.p)}

    @property
    def prompts(self) -> list[int]:
        return list(self.by_prompt)

    def draw(self, prompt: int, n: int, gen: torch.Generator) -> torch.Tensor:
        """``n`` random rows of ``prompt``."""
        rows = self.by_prompt[prompt]
        return rows[torch.randint(0, rows.numel(), (n,), generator=gen)]

    def subset(self, n: int, gen: torch.Generator) -> torch.Tensor:
        """``n`` random rows over all prompts (for evaluation curves)."""
        return torch.randperm(self.x.shape[0], generator=gen)[:n]


@torch.no_grad()
def esd_bank(model: CondMLP, emb: torch.Tensor, prompts: np.ndarray, anchor: int, uncond: int, *,
             n_traj: int = 512, steps: int = 20, cfg: float = 3.0, eta: float = 1.0, seed: int = 0) -> ESDBank:
    """ESD training states: ``n_traj`` base trajectories (prompts round-robin) x ``steps`` grid states, with v*."""
    gen = torch.Generator().manual_seed(seed)
    p = torch.as_tensor(np.asarray(prompts))[torch.arange(n_traj) % len(prompts)]
    noise = torch.randn(n_traj, 64, generator=gen)
    ctx = getattr(model, "lora", None)
    with (ctx.no_lora() if ctx is not None else torch.no_grad()):
        _, states, times = sample(model, emb[p], emb[uncond], noise, steps, cfg, return_traj=True)
    x = states.reshape(-1, 64)
    t = times.repeat_interleave(n_traj)
    pp = p.repeat(steps)
    y = esd_target(model, x, t, emb[pp], emb[anchor].reshape(1, -1), eta)
    return ESDBank(x, t, pp, y)


@torch.no_grad()
def ablation_bank(model: CondMLP, emb: torch.Tensor, prompts: np.ndarray, anchors: np.ndarray | int, uncond: int, *,
                  n: int = 512, steps: int = 20, cfg: float = 3.0, seed: int = 0) -> ESDBank:
    """Concept Ablation's pairs: base samples of the anchor concept, noised at random t; target sg(v(x_t, t, c_a)).

    ``anchors``: the anchor prompt id, or several (round-robin over the rows; each row's x_t is a base sample of
    its own anchor prompt and its target the base prediction under that prompt). Kumari et al. map the target to
    an anchor concept that excludes it ("Grumpy Cat" -> "cat"); the chapter's anchor is the other digits' prompts.
    The rows are paired with the target ``prompts`` (round-robin), whose prediction is trained towards the target.
    """
    gen = torch.Generator().manual_seed(seed)
    noise = torch.randn(n, 64, generator=gen)
    a = torch.as_tensor(np.atleast_1d(np.asarray(anchors)))[torch.randperm(n, generator=gen) % max(1, np.size(anchors))]
    ctx = getattr(model, "lora", None)
    with (ctx.no_lora() if ctx is not None else torch.no_grad()):
        x0 = sample(model, emb[a], emb[uncond], noise, steps, cfg)
        xt, t, _ = model.noisy(x0, gen)
        y = model(xt, t, emb[a])
    p = torch.as_tensor(np.asarray(prompts))[torch.arange(n) % len(prompts)]
    return ESDBank(xt, t, p, y)


def esd_loss(model: CondMLP, bank: ESDBank, rows: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """MSE(v(x_t, t, c; current adapter), v*) on ``rows`` of ``bank``; ``c`` is (1, d) or (len(rows), d)."""
    return F.mse_loss(model(bank.x[rows], bank.t[rows], c), bank.y[rows])


@torch.no_grad()
def bank_loss(model: CondMLP, bank: ESDBank, rows: torch.Tensor, emb: torch.Tensor,
              factors_fn: Callable[[torch.Tensor], dict] | None = None) -> float:
    """L_ESD over ``rows`` with each row's own prompt; ``factors_fn(c_unique)`` gives the adapter per prompt."""
    ctx = model.lora
    uniq, inv = torch.unique(bank.p[rows], return_inverse=True)
    film_fn = model.film
    if factors_fn is None:
        with ctx.no_lora():
            film = film_fn(emb[uniq])
    else:
        with ctx.using(factors_fn(emb[uniq])):
            film = film_fn(emb[uniq])
    film = [(k[inv], v[inv]) for k, v in film]
    pred = model(bank.x[rows], bank.t[rows], film=film)
    return float(F.mse_loss(pred, bank.y[rows]))


# ---------------------------------------------------------------------- UnHype

def _grads_like(factors: Factors, grads: list[torch.Tensor]) -> Factors:
    it = iter(grads)
    return {n: tuple(next(it) for _ in f) for n, f in factors.items()}


def removal_loss(hyper: HyperNet, c: torch.Tensor, k: int, delta_star: torch.Tensor, w_remove: float = 10.0,
                 select: Callable[[Factors], torch.Tensor] = flat) -> torch.Tensor:
    """w_remove MSE(H(c, k+1) - H(c, k), delta*): one pseudo-time step of H should equal the GD step delta*.

    ``select`` maps the generated tensors to the compared vector (all (alpha, A, B) by default).
    """
    pair = select(hyper.factors(c.expand(2, -1), torch.tensor([k, k + 1])))   # H(c, k) and H(c, k+1) in one pass
    return w_remove * F.mse_loss(pair[1:] - pair[:1], delta_star)


def unhype_step(model: CondMLP, hyper: HyperNet, bank: ESDBank, emb: torch.Tensor, prompt: int, k: int,
                rows: torch.Tensor, eta_int: float, aux_to_hyper: bool, w_remove: float = 10.0
                ) -> tuple[torch.Tensor, float, Factors]:
    """Steps 2-3 of one iteration: returns (L_remove, L_aux, g). Gradients are left in H's ``.grad``.

    With ``aux_to_hyper`` the backward of L_aux also accumulates grad_H L_aux (not zeroed, as in the repo).
    """
    ctx = model.lora
    c = emb[prompt].reshape(1, -1)
    fac = hyper.factors(c, k)
    tensors = [t for f in fac.values() for t in f]
    with ctx.using(fac):
        loss_aux = esd_loss(model, bank, rows, c)
    if aux_to_hyper:
        for t in tensors:
            t.retain_grad()
        loss_aux.backward()
        grads = [t.grad for t in tensors]
    else:
        grads = list(torch.autograd.grad(loss_aux, tensors))
    g = _grads_like(fac, [gr.detach() for gr in grads])
    loss_remove = removal_loss(hyper, c, k, -eta_int * flat(g), w_remove)
    loss_remove.backward()
    return loss_remove, loss_aux.item(), g


def retain_loss(hyper: HyperNet, c_retain: torch.Tensor, k: int, w_retain: float = 5.0) -> torch.Tensor:
    """5 mean((flat H(c_r, k) - flat H(c_r, 0))^2) on the (alpha, A, B) tuples."""
    n = c_retain.shape[0]
    ks = torch.cat([torch.full((n,), float(k)), torch.zeros(n)])
    f = flat(hyper.factors(torch.cat([c_retain, c_retain]), ks))
    return w_retain * (f[:n] - f[n:]).pow(2).mean()


@dataclass
class UnHypeResult:
    hyper: HyperNet
    history: dict[str, list[float]]
    seconds: float


def train_unhype(model: CondMLP, hyper: HyperNet, banks: dict[int, ESDBank], emb: torch.Tensor,
                 retain: np.ndarray, *, steps: int = 600, eta_int: float = 1.0, lr: float = 1e-3,
                 aux_to_hyper: bool = True, batch: int = 32, n_retain: int = 16, w_remove: float = 10.0,
                 w_retain: float = 5.0, seed: int = 0) -> UnHypeResult:
    """Train H to erase the digits of ``banks`` (target drawn uniformly per iteration), retaining ``retain`` prompts.

    Removal optimizer Adam(lr), retain optimizer Adam(3 lr) (the official 1e-4 / 3e-4 ratio), both over all of H.
    """
    t0 = time.process_time()
    gen = torch.Generator().manual_seed(seed)
    opt_rm = torch.optim.Adam(hyper.parameters(), lr=lr)
    opt_rt = torch.optim.Adam(hyper.parameters(), lr=3 * lr)
    targets = list(banks)
    retain = torch.as_tensor(np.asarray(retain))
    hist: dict[str, list[float]] = {"aux": [], "remove": [], "retain": []}
    for _ in range(steps):
        d = targets[int(torch.randint(0, len(targets), (1,), generator=gen))]
        bank = banks[d]
        prompt = bank.prompts[int(torch.randint(0, len(bank.prompts), (1,), generator=gen))]
        k = int(torch.randint(0, hyper.K, (1,), generator=gen))
        rows = bank.draw(prompt, batch, gen)
        opt_rm.zero_grad(set_to_none=True)
        loss_rm, aux, _ = unhype_step(model, hyper, bank, emb, prompt, k, rows, eta_int, aux_to_hyper, w_remove)
        opt_rm.step()
        opt_rt.zero_grad(set_to_none=True)
        r = retain[torch.randint(0, retain.numel(), (n_retain,), generator=gen)]
        loss_rt = retain_loss(hyper, emb[r], k, w_retain)
        loss_rt.backward()
        opt_rt.step()
        opt_rt.zero_grad(set_to_none=True)
        hist["aux"].append(aux); hist["remove"].append(loss_rm.item()); hist["retain"].append(loss_rt.item())
    for p in hyper.parameters():
        p.grad = None
    return UnHypeResult(hyper, hist, time.process_time() - t0)


def unhype_factors(hyper: HyperNet, k: int | None = None) -> Callable[[torch.Tensor], Factors]:
    """c -> H(c, k) (k = K by default), without gradients: the adapter UnHype uses at inference."""
    kk = hyper.K if k is None else k

    def fn(c: torch.Tensor) -> Factors:
        with torch.no_grad():
            return hyper.factors(c, kk)
    return fn


# ---------------------------------------------------------------------- explicit GD (what H amortizes)

@dataclass
class GDTrajectory:
    ks: list[int]
    loss: list[float]
    lora: dict[str, tuple[torch.Tensor, torch.Tensor]]


def explicit_gd_trajectory(model: CondMLP, banks: dict[int, ESDBank], emb: torch.Tensor, *, eta: float, K: int,
                           A0: dict[str, torch.Tensor], alpha: float = 1.0, batch: int = 32,
                           eval_rows: dict[int, torch.Tensor] | None = None, eval_every: int = 1,
                           seed: int = 0) -> GDTrajectory:
    """A static LoRA (A = alpha A0, B = 0) moved by K plain GD steps of size ``eta`` on L_ESD (32-state batches).

    ``A0`` are the fixed left factors of the hypernetwork (so the start point is H(c, 0)). L_ESD on ``eval_rows``
    (all targets, each row with its own prompt) is recorded every ``eval_every`` steps.
    """
    gen = torch.Generator().manual_seed(seed)
    ctx = model.lora
    lora = {n: ((alpha * a.reshape(1, *a.shape[-2:])).clone().requires_grad_(True),
                torch.zeros(1, a.shape[-1], model.width).requires_grad_(True)) for n, a in A0.items()}
    targets = list(banks)
    ks, losses = [], []

    def record(k: int) -> None:
        if eval_rows is None:
            return
        tot = 0.0
        with ctx.using(lora):
            for d, rows in eval_rows.items():
                tot += bank_loss(model, banks[d], rows, emb, lambda c: {n: (a.expand(c.shape[0], -1, -1),
                                                                            b.expand(c.shape[0], -1, -1))
                                                                        for n, (a, b) in lora.items()})
        ks.append(k); losses.append(tot / len(eval_rows))

    record(0)
    for k in range(K):
        d = targets[int(torch.randint(0, len(targets), (1,), generator=gen))]
        bank = banks[d]
        prompt = bank.prompts[int(torch.randint(0, len(bank.prompts), (1,), generator=gen))]
        rows = bank.draw(prompt, batch, gen)
        with ctx.using(lora):
            loss = esd_loss(model, bank, rows, emb[prompt].reshape(1, -1))
        params = [t for ab in lora.values() for t in ab]
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p_, g_ in zip(params, grads):
                p_ -= eta * g_
        if (k + 1) % eval_every == 0 or k + 1 == K:
            record(k + 1)
    return GDTrajectory(ks, losses, {n: (a.detach(), b.detach()) for n, (a, b) in lora.items()})


# ---------------------------------------------------------------------- iterative baselines

@dataclass
class BaselineResult:
    name: str
    model: CondMLP                       # the backbone to sample from (a fine-tuned copy, or the base)
    factors: Callable[[torch.Tensor], dict] | None   # LoRA per prompt on the conditional branch, or None
    steps: int
    matched: bool                        # reached the erasure threshold at a checkpoint
    checks: list[tuple[int, float]]      # (step, max target rate) at each checkpoint
    seconds: float

    @property
    def stop_rate(self) -> float:
        """The check's target rate at the checkpoint the baseline stopped at (nan for closed forms)."""
        return float(self.checks[-1][1]) if self.checks else float("nan")


def _iterative(name: str, model: CondMLP, params: list[torch.Tensor], loss_fn: Callable[[torch.Generator], torch.Tensor],
               check: Callable[[], float], *, lr: float, max_steps: int, check_every: int, threshold: float,
               seed: int, snapshot: Callable[[], object], restore: Callable[[object], None],
               factors: Callable | None) -> BaselineResult:
    """Adam on ``loss_fn``; checkpoints every ``check_every`` steps; stop at the first with check() <= threshold."""
    t0 = time.process_time()
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(params, lr=lr)
    checks: list[tuple[int, float]] = []
    matched, step = False, 0
    for step in range(1, max_steps + 1):
        loss = loss_fn(gen)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % check_every == 0 or step == max_steps:
            state = snapshot()
            rate = check()
            checks.append((step, rate))
            if rate <= threshold:
                matched = True
                restore(state)
                break
    for p in params:
        p.requires_grad_(False)
    return BaselineResult(name, model, factors, step, matched, checks, time.process_time() - t0)


def _pick(banks: dict[int, ESDBank], gen: torch.Generator) -> tuple[ESDBank, int]:
    targets = list(banks)
    bank = banks[targets[int(torch.randint(0, len(targets), (1,), generator=gen))]]
    return bank, bank.prompts[int(torch.randint(0, len(bank.prompts), (1,), generator=gen))]


def _finetune_text(name: str, base: CondMLP, banks: dict[int, ESDBank], emb: torch.Tensor,
                   check: Callable[[CondMLP], float], *, lr: float = 1e-3, max_steps: int = 400,
                   check_every: int = 10, threshold: float = 0.15, batch: int = 32, seed: int = 0) -> BaselineResult:
    model = copy.deepcopy(base)
    params = [p for n in model.target_names for p in model.get_submodule(n).base.parameters()]
    for p in params:
        p.requires_grad_(True)

    def loss_fn(gen: torch.Generator) -> torch.Tensor:
        bank, prompt = _pick(banks, gen)
        with model.lora.no_lora():
            return esd_loss(model, bank, bank.draw(prompt, batch, gen), emb[prompt].reshape(1, -1))

    return _iterative(name, model, params, loss_fn, lambda: check(model), lr=lr, max_steps=max_steps,
                      check_every=check_every, threshold=threshold, seed=seed,
                      snapshot=lambda: [p.detach().clone() for p in params],
                      restore=lambda s: [p.data.copy_(v) for p, v in zip(params, s)], factors=None)


def train_esd(base: CondMLP, banks: dict[int, ESDBank], emb: torch.Tensor, check: Callable[[CondMLP], float],
              **kw) -> BaselineResult:
    """ESD-x: fine-tune the text projections (cond_k, cond_v) on L_ESD; edits both CFG branches.

    ESD draws x_t from the model being tuned; we reuse the base bank (stated in the chapter's Setting).
    """
    return _finetune_text("ESD-x", base, banks, emb, check, **kw)


def train_concept_ablation(base: CondMLP, abl_banks: dict[int, ESDBank], emb: torch.Tensor,
                           check: Callable[[CondMLP], float], **kw) -> BaselineResult:
    """Concept Ablation (model-based): v(x_t, t, c*) -> sg(v(x_t, t, c_a)) on noised anchor samples."""
    return _finetune_text("Concept Ablation", base, abl_banks, emb, check, **kw)


def train_lora_esd(base: CondMLP, banks: dict[int, ESDBank], emb: torch.Tensor,
                   check: Callable[[Callable], float], *, rank: int = 4, alpha: float = 1.0, lr: float = 1e-3,
                   max_steps: int = 400, check_every: int = 10, threshold: float = 0.15, batch: int = 32,
                   seed: int = 0, name: str = "LoRA-ESD") -> BaselineResult:
    """A static rank-r LoRA (A = alpha A0, B = 0) on the text projections, trained on L_ESD (conditional branch)."""
    shapes = {n: (base.get_submodule(n).base.in_features, base.width) for n in base.target_names}
    lora = StaticLoRA(shapes, rank, alpha, seed=seed + 7919)
    params = list(lora.parameters())

    def factors(c: torch.Tensor | None = None) -> dict:
        return lora.factors()

    def loss_fn(gen: torch.Generator) -> torch.Tensor:
        bank, prompt = _pick(banks, gen)
        with base.lora.using(lora.factors()):
            return esd_loss(base, bank, bank.draw(prompt, batch, gen), emb[prompt].reshape(1, -1))

    return _iterative(name, base, params, loss_fn, lambda: check(factors), lr=lr, max_steps=max_steps,
                      check_every=check_every, threshold=threshold, seed=seed,
                      snapshot=lambda: [p.detach().clone() for p in params],
                      restore=lambda s: [p.data.copy_(v) for p, v in zip(params, s)], factors=factors)


# ---------------------------------------------------------------------- UCE

def uce_edit(W: torch.Tensor, C_erase: torch.Tensor, c_anchor: torch.Tensor, C_keep: torch.Tensor,
             lam_p: float = 1.0, lam: float = 0.1) -> torch.Tensor:
    """UCE's closed form (Gandikota et al., 2024, Eq. 6) for one projection W (d_out, d_in):

    W' = (sum_i W c_a c_i^T + lam_p sum_j W c_j c_j^T + lam W) (sum_i c_i c_i^T + lam_p sum_j c_j c_j^T + lam I)^-1,
    the minimiser of sum_i ||W' c_i - W c_a||^2 + lam_p sum_j ||W' c_j - W c_j||^2 + lam ||W' - W||_F^2.
    Rows of ``C_erase`` / ``C_keep`` are prompts.
    """
    W = W.double(); Ce = C_erase.double(); Ck = C_keep.double(); ca = c_anchor.double().reshape(-1)
    d = W.shape[1]
    lhs = (W @ ca)[:, None] @ Ce.sum(0, keepdim=True) + lam_p * (W @ Ck.T) @ Ck + lam * W
    M = Ce.T @ Ce + lam_p * Ck.T @ Ck + lam * torch.eye(d, dtype=torch.float64)
    return torch.linalg.solve(M, lhs.T).T.float()   # lhs M^-1 (M symmetric)


def apply_uce(base: CondMLP, emb: torch.Tensor, erase: np.ndarray, anchor: int, keep: np.ndarray,
              lam_p: float = 1.0, lam: float = 0.1) -> BaselineResult:
    """A copy of ``base`` with every text projection edited by :func:`uce_edit` (acts on both CFG branches)."""
    t0 = time.process_time()
    model = copy.deepcopy(base)
    for n in model.target_names:
        lin = model.get_submodule(n).base
        with torch.no_grad():
            lin.weight.copy_(uce_edit(lin.weight, emb[erase], emb[anchor], emb[keep], lam_p, lam))
    return BaselineResult("UCE", model, None, 0, True, [], time.process_time() - t0)
