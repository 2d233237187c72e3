"""Gradient × input saliency of the final answer and the choice of anchor token types (card, Method 2).

s_j = |⟨∂ log p(A) / ∂e_j, e_j⟩| (Shrikumar et al. 2017) for every input token embedding e_j of a clean trace.
Anchor types: the structural types (``+ - * = ;``) whose mean saliency over trace positions is in the top half,
restricted to types whose next token has entropy under the model (decision: mean next-token entropy at least half
the largest among structural types — the card's "next token has entropy", read under the model).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from .tasks import STRUCT, Problem, Tokenizer


def grad_x_input(model, ids: torch.Tensor, answer_pos: torch.Tensor, answer_tok: torch.Tensor) -> torch.Tensor:
    """(B, L) saliency |⟨∂ log p(answer at answer_pos) / ∂e_j, e_j⟩|."""
    e = model.embed(ids).detach().requires_grad_(True)
    logits, _ = model.forward_from_embeddings(e)
    lp = F.log_softmax(logits, -1)
    sel = lp[torch.arange(len(ids)), answer_pos, answer_tok].sum()
    (g,) = torch.autograd.grad(sel, e)
    return (g * e).sum(-1).abs().detach()


def saliency_by_type(model, problems: list[Problem], tok: Tokenizer) -> dict[str, dict[str, float]]:
    """Mean saliency and mean next-token model entropy per structural type over the trace positions of
    teacher-forced clean traces (no padding)."""
    L = max(len(p.prompt) + len(p.completion) for p in problems)
    ids = np.full((len(problems), L), tok.pad, np.int64)
    ans_pos, ans_tok, starts = [], [], []
    for i, p in enumerate(problems):
        seq = list(p.prompt) + list(p.completion)
        ids[i, L - len(seq):] = seq                       # left-padded like at inference
        ans_pos.append(L - 2 - 1)                         # the position predicting the answer (before <eos>)
        ans_tok.append(seq[-2])
        starts.append(L - len(seq) + len(p.prompt))
    x = torch.from_numpy(ids)
    sal = grad_x_input(model, x, torch.tensor(ans_pos), torch.tensor(ans_tok)).numpy()
    with torch.no_grad():
        logits, _ = model(x)
        lp = F.log_softmax(logits, -1)
        ent = -(lp.exp() * lp).sum(-1).numpy()
    pos = np.arange(L)[None]
    trace = (pos >= np.array(starts)[:, None]) & (pos < np.array(ans_pos)[:, None])
    out = {}
    for t in STRUCT:
        m = trace & (ids == tok.stoi[t])
        if m.any():
            out[t] = {"saliency": float(sal[m].mean()), "next_entropy": float(ent[m].mean()), "count": int(m.sum())}
    return out


def select_anchor_types(stats: dict[str, dict[str, float]], q: float = 0.5, entropy_frac: float = 0.5) -> tuple[str, ...]:
    """Types with mean saliency in the top ``q`` share of structural types, restricted to those whose mean
    next-token entropy is >= ``entropy_frac`` × the largest."""
    if not stats:
        return ("=",)
    sal = np.array([v["saliency"] for v in stats.values()])
    cut = np.quantile(sal, 1 - q)
    emax = max(v["next_entropy"] for v in stats.values())
    chosen = tuple(t for t, v in stats.items() if v["saliency"] >= cut and v["next_entropy"] >= entropy_frac * emax)
    return chosen or (max(stats, key=lambda t: stats[t]["saliency"]),)
