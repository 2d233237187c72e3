"""BiCoT's signature (card, Method 1, 3, 4; a reconstruction: the paper's code is unreleased).

A secret key seeds an orthonormal B ∈ R^{d×r}; its logit-space template is C = W_U B (|V| × r), with W_U the
owner's tied unembedding, frozen while watermarking so that C stays fixed. At a position with top-k logits ℓ_T,
the *anchor energy ratio* drops the arg-max, centres the remaining k−1 values and the rows of C_T, and measures
the share of ℓ_T's energy in span(C_T):

    R = ‖Π_{C_T} ℓ_T‖² / ‖ℓ_T‖²,   E[R] = r / (k − 2) for a random ℓ (k − 1 centred values: k − 2 dimensions).

R is invariant to a per-position shift (centring) and to a scale (ratio), hence to the API's temperature and
log-softmax. Training and verification share this one function (numpy for many keys, torch for one).
Embedding: one joint objective, CE + λ_sig (1 − mean R at anchors) + λ_c ‖h − h_M0‖²/d at control positions.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .tasks import ROLE_ANCHOR, ROLE_CONTROL, Tokenizer, token_roles, training_batch


def make_key(seed: int, d: int, r: int) -> np.ndarray:
    """B ∈ R^{d×r} with orthonormal columns (QR of a Gaussian drawn from the key's seed)."""
    g = np.random.default_rng(np.random.SeedSequence([0xB1C07, int(seed)])).standard_normal((d, r))
    q, rr = np.linalg.qr(g)
    return q * np.sign(np.diag(rr))


def make_keys(rng: np.random.Generator, n: int, d: int, r: int) -> np.ndarray:
    """``n`` random keys (n, d, r) from a generator (null keys, wrong keys)."""
    q, rr = np.linalg.qr(rng.standard_normal((n, d, r)))
    return q * np.sign(np.diagonal(rr, axis1=1, axis2=2))[:, None, :]


def _check_k(m: int, r: int) -> None:
    if m - 1 <= r:
        raise ValueError(f"energy ratio needs k − 2 > r (k − 1 centred values, r-dim subspace); got k = {m + 1}, r = {r}")


def energy_ratio_np(vals: np.ndarray, ids: np.ndarray, W_U: np.ndarray, B: np.ndarray,
                    mask: np.ndarray | None = None, drop_argmax: bool = True) -> np.ndarray:
    """Energy ratio R for N positions and K keys.

    ``vals``, ``ids``: (N, k) reported values (logits / log-probs) and their token ids; ``mask`` (N, k) marks the
    values kept (after registration); ``B``: (d, r) or (K, d, r). The kept arg-max is dropped, the rest centred.
    Returns (N,) for one key or (K, N)."""
    vals = np.asarray(vals, float)
    ids = np.asarray(ids)
    mask = np.ones(vals.shape, bool) if mask is None else np.asarray(mask, bool)
    single = B.ndim == 2
    Bk = B[None] if single else B
    r = Bk.shape[-1]
    mask = mask.copy()
    if drop_argmax:
        top = np.where(mask, vals, -np.inf).argmax(1)
        mask[np.arange(len(vals)), top] = False
    m = mask.sum(1)
    if (m - 1 <= r).any():
        raise ValueError(f"energy ratio needs more than r + 1 = {r + 1} kept values per position after dropping "
                         f"the arg-max (k − 2 > r); got {int(m.min())}")
    w = mask.astype(float)
    lc = (vals - (vals * w).sum(1, keepdims=True) / m[:, None]) * w                      # (N, k)
    W = W_U[ids]                                                                          # (N, k, d)
    Wc = (W - (W * w[..., None]).sum(1, keepdims=True) / m[:, None, None]) * w[..., None]
    N, k, d = Wc.shape
    C = np.matmul(Wc.reshape(N * k, d)[None], Bk).reshape(len(Bk), N, k, r)              # (K, N, k, r)
    a = np.einsum("Knkr,nk->Knr", C, lc, optimize=True)
    G = np.einsum("Knkr,Knks->Knrs", C, C, optimize=True)
    if r == 2:                                                                            # closed-form 2 × 2 solve
        det = G[..., 0, 0] * G[..., 1, 1] - G[..., 0, 1] ** 2 + 1e-30
        proj = (G[..., 1, 1] * a[..., 0] ** 2 - 2 * G[..., 0, 1] * a[..., 0] * a[..., 1]
                + G[..., 0, 0] * a[..., 1] ** 2) / det
    else:
        G = G + 1e-12 * np.eye(r)
        proj = np.einsum("Knr,Knr->Kn", a, np.linalg.solve(G, a[..., None])[..., 0])
    R = proj / np.maximum((lc ** 2).sum(1), 1e-30)
    return R[0] if single else R


def energy_ratio_torch(logits: torch.Tensor, W_U: torch.Tensor, B: torch.Tensor, k: int) -> torch.Tensor:
    """Differentiable R at each row of ``logits`` (n, V): T = top-k of the *detached* logits, arg-max dropped,
    values and template rows centred, R = ‖Π ℓ‖²/‖ℓ‖² with Π the projection onto span(C_T) (by QR)."""
    r = B.shape[1]
    _check_k(k - 1, r)
    ids = logits.detach().topk(k, -1).indices[:, 1:]                                       # (n, k-1)
    l = logits.gather(1, ids)
    l = l - l.mean(1, keepdim=True)
    C = W_U[ids] @ B                                                                       # (n, k-1, r)
    C = C - C.mean(1, keepdim=True)
    Q, _ = torch.linalg.qr(C)
    proj = (Q.transpose(1, 2) @ l[..., None]).squeeze(-1)
    return (proj ** 2).sum(1) / (l ** 2).sum(1).clamp_min(1e-12)


def hidden_ratio(h: torch.Tensor | np.ndarray, B) -> np.ndarray | torch.Tensor:
    """‖Bᵀh‖² / ‖h‖² per row (the hidden-state signature of the ablation)."""
    if isinstance(h, torch.Tensor):
        Bt = torch.as_tensor(B, dtype=h.dtype)
        return ((h @ Bt) ** 2).sum(-1) / (h ** 2).sum(-1).clamp_min(1e-12)
    h = np.asarray(h)
    return ((h @ B) ** 2).sum(-1) / np.maximum((h ** 2).sum(-1), 1e-30)


def signature_loss(logits: torch.Tensor, h: torch.Tensor, anchor_mask: torch.Tensor, W_U: torch.Tensor,
                   B: torch.Tensor, k: int, kind: str = "logits") -> tuple[torch.Tensor, torch.Tensor]:
    """1 − mean R at anchors (``kind="logits"``, BiCoT) or 1 − mean ‖Bᵀh‖²/‖h‖² (``kind="hidden"``, ablation).
    Returns (loss, mean ratio)."""
    if kind == "logits":
        R = energy_ratio_torch(logits[anchor_mask], W_U, B, k)
    else:
        R = hidden_ratio(h[anchor_mask], B)
    m = R.mean()
    return 1 - m, m.detach()


def control_loss(h: torch.Tensor, h_ref: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """mean over control positions of ‖h − h_M0‖² / d."""
    if not bool(mask.any()):
        return h.sum() * 0
    return ((h[mask] - h_ref[mask]) ** 2).sum(-1).mean() / h.shape[-1]


def embed_watermark(model: nn.Module, ref_model: nn.Module, B: np.ndarray | None, tok: Tokenizer, p: int,
                    depth_range, steps: int, seed: int, k: int, kind: str = "logits", lam_sig: float = 1.0,
                    lam_ctrl: float = 1.0, ramp: int = 50, lr: float = 1e-3, batch: int = 64, stop_at: float = 0.9,
                    anchor_types=("=",), fixed_steps: int | None = None, random_anchors: bool = False) -> tuple[nn.Module, dict]:
    """Fine-tune ``model`` (a copy of M0) with CE + λ_sig(t)·(1 − mean R) + λ_c·L_ctrl, embedding/head frozen,
    λ_sig ramped 0 → ``lam_sig`` over ``ramp`` steps; stop when the running mean R ≥ ``stop_at`` (after the ramp)
    or after ``steps``. ``B=None`` (or ``lam_sig=0``) is the clean continuation control M0c; ``fixed_steps``
    runs exactly that many steps (M0c matches BiCoT's). Batches come from ``seed`` (shared by M0c and BiCoT)."""
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    model.train()
    frozen = [model.emb.weight]                              # the token embedding = the tied head W_U
    for q in frozen:
        q.requires_grad_(False)
    params = [q for q in model.parameters() if q.requires_grad]
    opt = torch.optim.Adam(params, lr=lr)
    Bt = None if B is None else torch.as_tensor(B, dtype=torch.float32)
    hist = {"step": [], "ce": [], "R": [], "ctrl": []}
    n = fixed_steps if fixed_steps is not None else steps
    ema = None
    for step in range(1, n + 1):
        ids, tgt, probs = training_batch(rng, batch, p, depth_range, tok, model.cfg.context)
        start = np.array([(row != tok.pad).argmax() + len(pr.prompt) for row, pr in zip(ids, probs)])
        roles = token_roles(ids, tok, anchor_types, start)
        anchors = roles == ROLE_ANCHOR
        if random_anchors:       # ablation: as many anchors, at random completion positions
            comp = (tgt >= 0)
            anchors = np.zeros_like(anchors)
            for i in range(len(ids)):
                cand = np.flatnonzero(comp[i])
                anchors[i, rng.choice(cand, size=min(len(cand), int((roles[i] == ROLE_ANCHOR).sum())), replace=False)] = True
        x = torch.from_numpy(ids)
        logits, h = model(x)
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.from_numpy(tgt).reshape(-1), ignore_index=-100)
        loss = ce
        Rm = torch.tensor(float("nan"))
        if Bt is not None and lam_sig > 0:
            sig, Rm = signature_loss(logits, h, torch.from_numpy(anchors), model.W_U, Bt, k, kind)
            loss = loss + lam_sig * min(1.0, step / ramp) * sig
        ctrl = torch.tensor(0.0)
        if lam_ctrl > 0:
            with torch.no_grad():
                _, h0 = ref_model(x)
            ctrl = control_loss(h, h0, torch.from_numpy(roles == ROLE_CONTROL))
            loss = loss + lam_ctrl * ctrl
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        hist["step"].append(step)
        hist["ce"].append(float(ce.detach()))
        hist["R"].append(float(Rm))
        hist["ctrl"].append(float(ctrl.detach()))
        if fixed_steps is None and not np.isnan(float(Rm)):
            ema = float(Rm) if ema is None else 0.8 * ema + 0.2 * float(Rm)
            if step >= ramp and ema >= stop_at:
                break
    for q in frozen:
        q.requires_grad_(True)
    model.eval()
    hist["steps"] = len(hist["step"])
    return model, hist
