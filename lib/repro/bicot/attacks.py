"""Model-level attacks on a suspect (card, Method 6): fine-tuning on clean CoT data, symmetric per-channel weight
quantisation, Gaussian weight noise, magnitude pruning, and the adaptive whitening attack (key unknown)."""
from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .model import lm_loss
from .tasks import ROLE_ANCHOR, Tokenizer, token_roles, training_batch


def finetune_attack(model, tok: Tokenizer, p: int, depth_range, steps: int, lr: float = 1e-3, seed: int = 0,
                    checkpoints=(), label_smoothing: float = 0.0, batch: int = 64) -> dict[int, nn.Module]:
    """Adam fine-tuning of every parameter on clean CoT data; returns copies at ``checkpoints`` and at ``steps``."""
    m = copy.deepcopy(model)
    m.train()
    rng = np.random.default_rng(seed)
    opt = torch.optim.Adam(m.parameters(), lr=lr)
    out = {0: copy.deepcopy(model)} if 0 in checkpoints else {}
    for step in range(1, steps + 1):
        ids, tgt, _ = training_batch(rng, batch, p, depth_range, tok, m.cfg.context)
        loss = lm_loss(m, ids, tgt, label_smoothing)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        if step in checkpoints or step == steps:
            c = copy.deepcopy(m)
            c.eval()
            out[step] = c
    return out


@torch.no_grad()
def quantize(model, bits: int):
    """Symmetric per-output-channel quantisation of every matrix (scale = max|w_row| / (2^{bits−1} − 1))."""
    m = copy.deepcopy(model)
    qmax = 2 ** (bits - 1) - 1
    for w in m.parameters():
        if w.dim() == 2:
            s = w.abs().amax(1, keepdim=True).clamp_min(1e-12) / qmax
            w.copy_((w / s).round().clamp(-qmax, qmax) * s)
    return m


@torch.no_grad()
def weight_noise(model, rel_sigma: float, seed: int = 0):
    """Add N(0, (rel_sigma · std(W))²) to every weight tensor (std of that tensor)."""
    m = copy.deepcopy(model)
    g = torch.Generator().manual_seed(seed)
    for w in m.parameters():
        if w.numel() > 1:
            w.add_(torch.randn(w.shape, generator=g) * rel_sigma * w.std())
    return m


@torch.no_grad()
def magnitude_prune(model, frac: float):
    """Zero the ``frac`` smallest-magnitude entries of every matrix."""
    m = copy.deepcopy(model)
    for w in m.parameters():
        if w.dim() == 2:
            k = int(frac * w.numel())
            if k > 0:
                thr = w.abs().flatten().kthvalue(k).values
                w[w.abs() <= thr] = 0.0
    return m


def param_distance(a, b) -> float:
    """‖θ_a − θ_b‖ over all parameters."""
    return float(torch.sqrt(sum(((x.detach() - y.detach()) ** 2).sum() for x, y in zip(a.parameters(), b.parameters()))))


def _anchor_features(logits: torch.Tensor) -> torch.Tensor:
    """Anchor logits with the arg-max entry replaced by the mean of the others, centred (what the attacker whitens)."""
    top = logits.detach().argmax(-1, keepdim=True)
    mask = torch.ones_like(logits).scatter(-1, top, 0.0)
    mean = (logits * mask).sum(-1, keepdim=True) / mask.sum(-1, keepdim=True)
    x = logits * mask + mean * (1 - mask)
    return x - x.mean(-1, keepdim=True)


@torch.no_grad()
def anchor_pcs(model, tok: Tokenizer, p: int, depth_range, r: int, seed: int, n: int = 512, anchor_types=("=",)):
    """Top-r principal directions of the anchor-logit features and of the anchor hidden states (attacker's side)."""
    ids, tgt, probs = training_batch(np.random.default_rng(seed), n, p, depth_range, tok, model.cfg.context)
    start = np.array([(row != tok.pad).argmax() + len(pr.prompt) for row, pr in zip(ids, probs)])
    am = torch.from_numpy(token_roles(ids, tok, anchor_types, start) == ROLE_ANCHOR)
    logits, h = model(torch.from_numpy(ids))
    X = _anchor_features(logits[am])
    H = h[am] - h[am].mean(0)
    Ul = torch.linalg.svd(X - X.mean(0), full_matrices=False).Vh[:r].T
    Uh = torch.linalg.svd(H, full_matrices=False).Vh[:r].T
    return Ul, Uh, ids, am


@torch.no_grad()
def pc_energy(model, Ul: torch.Tensor, ids: np.ndarray, am: torch.Tensor) -> float:
    """Share of the anchor-logit feature energy in the attacker's top-r directions ``Ul``."""
    logits, _ = model(torch.from_numpy(ids))
    X = _anchor_features(logits[am])
    return float(((X @ Ul) ** 2).sum() / (X ** 2).sum())


def whitening_attack(model, tok: Tokenizer, p: int, depth_range, steps: int, lam: float, r: int, seed: int = 0,
                     lr: float = 1e-3, batch: int = 64, anchor_types=("=",), pcs=None):
    """The adaptive attacker (knows the method, not the key): penalise the share of anchor-logit features and of
    anchor hidden states in their top-r principal directions (estimated once on the attacker's own data), plus CE."""
    Ul, Uh = pcs[:2] if pcs is not None else anchor_pcs(model, tok, p, depth_range, r, seed + 1)[:2]
    m = copy.deepcopy(model)
    m.train()
    rng = np.random.default_rng(seed)
    opt = torch.optim.Adam(m.parameters(), lr=lr)
    for step in range(1, steps + 1):
        ids, tgt, probs = training_batch(rng, batch, p, depth_range, tok, m.cfg.context)
        start = np.array([(row != tok.pad).argmax() + len(pr.prompt) for row, pr in zip(ids, probs)])
        am = torch.from_numpy(token_roles(ids, tok, anchor_types, start) == ROLE_ANCHOR)
        logits, h = m(torch.from_numpy(ids))
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.from_numpy(tgt).reshape(-1), ignore_index=-100)
        X = _anchor_features(logits[am])
        H = h[am] - h[am].mean(0)
        pen = ((X @ Ul) ** 2).sum(-1).mean() / (X ** 2).sum(-1).mean() + ((H @ Uh) ** 2).sum(-1).mean() / (H ** 2).sum(-1).mean()
        loss = ce + lam * pen
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
    m.eval()
    return m
