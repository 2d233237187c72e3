"""The black-box verification API and output-level attacks on what it reports (card, Setting and Method 6).

For a prompt the API teacher-forces the suspect's own greedy CoT and returns, at every position, the top-k token
ids with their log-probs — nothing else. Output attacks transform the full reported log-prob vector before the
top-k is taken (temperature, per-query shift, fixed per-token bias, Gaussian noise) or truncate k.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .model import GPT, answers_correct, greedy_cot
from .tasks import FORMAT, Problem, Tokenizer


@dataclass
class Records:
    """What the API returned for one query set: token ids (N, L) of prompt + greedy CoT, reported top-k ids and
    log-probs (N, L, k), the padded prompt length, and (kept for the owner's analyses, never read by the
    verifier) the full log-probs (N, L, V)."""
    ids: np.ndarray
    top_ids: np.ndarray
    top_lp: np.ndarray
    prompt_len: int
    full_lp: np.ndarray
    correct: np.ndarray | None = None


def topk(lp: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    idx = np.argsort(-lp, -1, kind="stable")[..., :k]
    return idx, np.take_along_axis(lp, idx, -1)


def query(model: GPT, problems: list[Problem], tok: Tokenizer, k: int, max_new: int) -> Records:
    """Greedy CoT for every prompt, then the top-k log-probs of one teacher-forced pass over the output."""
    ids, lp, P = greedy_cot(model, [p.prompt for p in problems], tok, max_new)
    ti, tl = topk(lp, k)
    return Records(ids, ti, tl, int(P[0]), lp, answers_correct(ids, P, problems, tok))


def reported(rec: Records, k: int | None = None, attack: dict | None = None, rng: np.random.Generator | None = None
             ) -> Records:
    """The records an attacked API would report: ``attack`` = {"temperature": τ} | {"shift": σ (per query)} |
    {"bias": δ (V,)} | {"noise": σ} | {"trunc": k'}; top-k recomputed from the transformed log-probs."""
    lp = rec.full_lp
    k = k or rec.top_ids.shape[-1]
    a = attack or {}
    if "temperature" in a:
        z = lp / a["temperature"]
        lp = z - np.logaddexp.reduce(z, -1, keepdims=True)
    if "shift" in a:
        lp = lp + rng.normal(0, a["shift"], size=(lp.shape[0], 1, 1))
    if "bias" in a:
        lp = lp + np.asarray(a["bias"])[None, None, :]
    if "noise" in a:
        lp = lp + rng.normal(0, a["noise"], size=lp.shape)
    if "trunc" in a:
        k = a["trunc"]
    ti, tl = topk(lp, k)
    return replace(rec, top_ids=ti, top_lp=tl, full_lp=lp)


def sentinel_mask(rec: Records, tok: Tokenizer) -> np.ndarray:
    """Sentinel positions: the prompt's formatting tokens (identical inputs for owner and suspect)."""
    m = np.isin(rec.ids, tok.ids_of(FORMAT))
    m[:, rec.prompt_len:] = False
    return m


def anchor_mask(rec: Records, tok: Tokenizer, anchor_types=("=",)) -> np.ndarray:
    """Anchor positions: anchor-type tokens in the generated trace, before ``<eos>``."""
    ids = rec.ids
    m = np.isin(ids, tok.ids_of(anchor_types))
    m[:, :rec.prompt_len] = False
    after_eos = np.cumsum(ids == tok.eos, 1) > 0
    return m & ~after_eos
