"""Robust Subspace Registration (RSR) verification from top-k log-probs — our reconstruction from the abstract
(card, Method 5), not the paper's code.

a. Registration. Over the sentinel (t, v) pairs observed in both the suspect's and the owner's stored top-k lists,
   fit ℓ_sus(t, v) ≈ α ℓ_ref(t, v) + β_t + δ_v with Σ δ_v = 0 (least squares). At the anchors use
   ℓ̃ = (ℓ − δ_v)/α, dropping tokens with no δ estimate and positions left with ≤ r + 2 tokens.
b. Score S(B) = mean anchor energy ratio over the query set; the null is S for random keys on the same registered
   records; detect iff S(B) exceeds every null score (empirical p = (1 + #{null ≥ S}) / (n + 1)); z = (S − μ₀)/σ₀.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .api import Records, anchor_mask, sentinel_mask
from .tasks import Tokenizer
from .watermark import energy_ratio_np


@dataclass
class Registration:
    alpha: float
    delta: np.ndarray          # (V,), NaN where the token was never seen at a sentinel
    n_pairs: int


def register(sus: Records, ref: Records, tok: Tokenizer, vocab: int) -> Registration:
    """Least-squares fit of ℓ_sus = α ℓ_ref + β_t + δ_v on the sentinel pairs seen in both top-k lists."""
    P = min(ref.prompt_len, sus.prompt_len)
    sm = sentinel_mask(ref, tok)[:, :P] & sentinel_mask(sus, tok)[:, :P]
    pos = np.argwhere(sm)
    si, sv = sus.top_ids[pos[:, 0], pos[:, 1]], sus.top_lp[pos[:, 0], pos[:, 1]]       # (M, k)
    ri, rv = ref.top_ids[pos[:, 0], pos[:, 1]], ref.top_lp[pos[:, 0], pos[:, 1]]
    match = si[:, :, None] == ri[:, None, :]                                           # (M, k_sus, k_ref)
    rows_t, a_sus, a_ref = np.nonzero(match)
    if not len(rows_t):
        return Registration(1.0, np.full(vocab, np.nan), 0)
    rows_v = si[rows_t, a_sus]
    y = sv[rows_t, a_sus].astype(float)
    x = rv[rows_t, a_ref].astype(float)
    seen, vidx = np.unique(rows_v, return_inverse=True)
    nT, nV, N = len(pos), len(seen), len(y)
    # β_t profiled out: centre y, x and the token indicators within each sentinel position t
    cnt = np.bincount(rows_t, minlength=nT).astype(float)[rows_t]
    def centre(col):
        return col - (np.bincount(rows_t, col, nT) if col.ndim == 1 else
                      np.stack([np.bincount(rows_t, c, nT) for c in col.T], 1))[rows_t] / (cnt if col.ndim == 1 else cnt[:, None])
    D = np.zeros((N, nV))
    D[np.arange(N), vidx] = 1.0
    A = np.zeros((N + 1, 1 + nV))
    A[:N, 0] = centre(x)
    A[:N, 1:] = centre(D)
    A[N, 1:] = np.sqrt(N)                     # Σ δ_v = 0, weighted as a hard-ish constraint
    b = np.append(centre(y), 0.0)
    sol, *_ = np.linalg.lstsq(A, b, rcond=None)
    delta = np.full(vocab, np.nan)
    delta[seen] = sol[1:]
    alpha = float(sol[0]) if abs(sol[0]) > 1e-6 else 1e-6
    return Registration(alpha, delta, N)


def anchor_values(sus: Records, tok: Tokenizer, reg: Registration | None, r: int, anchor_types=("=",)
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """The anchors' reported (and, with ``reg``, registered) top-k values, ids and kept-mask; positions with
    ≤ r + 2 kept tokens dropped. Also returns coverage numbers."""
    am = anchor_mask(sus, tok, anchor_types)
    vals, ids = sus.top_lp[am].astype(float), sus.top_ids[am]
    keep = np.ones(vals.shape, bool)
    if reg is not None:
        d = reg.delta[ids]
        keep = ~np.isnan(d)
        vals = np.where(keep, (vals - np.nan_to_num(d)) / reg.alpha, 0.0)
    ok = keep.sum(1) >= r + 3
    info = {"anchors": int(am.sum()), "anchors kept": int(ok.sum()),
            "kept share": float(ok.mean()) if ok.size else float("nan"),
            "mean tokens kept": float(keep.sum(1).mean()) if keep.size else float("nan")}
    return vals[ok], ids[ok], keep[ok], info


def scores(sus: Records, ref: Records | None, tok: Tokenizer, W_U: np.ndarray, keys: np.ndarray,
           use_registration: bool = True, anchor_types=("=",)) -> tuple[np.ndarray, dict]:
    """S for each key in ``keys`` (K, d, r) on one query set's records."""
    reg = register(sus, ref, tok, W_U.shape[0]) if use_registration else None
    vals, ids, keep, info = anchor_values(sus, tok, reg, keys.shape[-1], anchor_types)
    if len(vals) == 0:
        return np.full(len(keys), np.nan), info
    R = energy_ratio_np(vals, ids, W_U, keys, keep)
    info["alpha"] = reg.alpha if reg is not None else 1.0
    return R.mean(1), info


def verify(sus: Records, ref: Records | None, tok: Tokenizer, W_U: np.ndarray, B: np.ndarray, null_keys: np.ndarray,
           use_registration: bool = True, extra_keys: np.ndarray | None = None) -> dict:
    """S(B), the null of ``null_keys`` on the same records, z, the empirical p and the detection decision;
    ``extra_keys`` (wrong keys) get their own z against the same null."""
    keys = np.concatenate([B[None], null_keys] + ([extra_keys] if extra_keys is not None else []))
    S, info = scores(sus, ref, tok, W_U, keys, use_registration)
    s, null = S[0], S[1:1 + len(null_keys)]
    mu, sd = float(np.mean(null)), float(np.std(null, ddof=1))
    out = dict(S=float(s), mu0=mu, sd0=sd, z=float((s - mu) / sd) if sd > 0 else float("nan"),
               p=float((1 + np.sum(null >= s)) / (len(null) + 1)), detected=bool(s > null.max()), **info)
    if extra_keys is not None:
        out["z_extra"] = ((S[1 + len(null_keys):] - mu) / sd).tolist()
    return out
