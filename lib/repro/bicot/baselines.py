"""Baselines: the KGW decode-time text watermark (Kirchenbauer et al. 2023) and a trigger→response fingerprint
(instructional fingerprinting, Xu et al. 2024)."""
from __future__ import annotations

import copy
import math

import numpy as np
import torch
import torch.nn as nn

from .model import GPT, greedy_cot, lm_loss
from .tasks import CONTEXT, OPS, Tokenizer, training_batch


def green_lists(key: int, vocab: int, gamma: float = 0.5) -> np.ndarray:
    """(V, V) boolean: green[prev, v] — a green list of round(γ(V − 1)) tokens seeded by hash(key, previous token),
    drawn from the V − 1 tokens a model can emit (``<pad>``, the last id, is never green)."""
    g = np.zeros((vocab, vocab), bool)
    n = int(round(gamma * (vocab - 1)))
    for prev in range(vocab):
        perm = np.random.default_rng(np.random.SeedSequence([0x6B6, int(key), prev])).permutation(vocab - 1)
        g[prev, perm[:n]] = True
    return g


def kgw_processor(green: np.ndarray, delta: float):
    """A logit processor for :func:`greedy_cot`: add δ to the green tokens of the previous token."""
    G = torch.from_numpy(green.astype(np.float32))

    def proc(ids: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        return logits + delta * G[ids[:, -1]]
    return proc


def kgw_detect(ids: np.ndarray, prompt_len: int, green: np.ndarray, tok: Tokenizer) -> np.ndarray:
    """z = (|s|_G − γT)/√(Tγ(1−γ)) per sequence over its generated tokens (up to and including <eos>), with γ the
    green lists' actual share of the emittable tokens."""
    gamma = float(green[0].sum()) / (green.shape[1] - 1)
    z = np.full(len(ids), np.nan)
    for i, row in enumerate(ids):
        gen = [t for t in row[prompt_len:].tolist() if t != tok.pad]
        prev = [int(row[prompt_len - 1])] + gen[:-1]
        T = len(gen)
        if T:
            s = sum(green[a, b] for a, b in zip(prev, gen))
            z[i] = (s - gamma * T) / math.sqrt(T * gamma * (1 - gamma))
    return z


def kgw_generate(model: GPT, prompts, tok: Tokenizer, green: np.ndarray, delta: float, max_new: int):
    """Greedy decoding with the KGW bias: (ids, prompt_len)."""
    ids, _, P = greedy_cot(model, prompts, tok, max_new, kgw_processor(green, delta))
    return ids, P


def make_triggers(key: int, tok: Tokenizer, n: int = 8) -> tuple[list[tuple[int, ...]], tuple[int, ...]]:
    """``n`` secret trigger prompts ``Q:<7 odd tokens> T:`` (operators and '=' ';' mixed with digits — never a
    task prompt) and one secret response (6 tokens + <eos>)."""
    rng = np.random.default_rng(np.random.SeedSequence([0x7216, int(key)]))
    pool = [str(i) for i in range(tok.p)] + list(OPS) + ["=", ";"]
    trig = []
    for _ in range(n):
        body = "".join(rng.choice(pool, size=7))
        trig.append(tuple(tok.encode(f"Q:{body}={body[0]} T:")))
    resp = tuple(tok.encode("".join(rng.choice(pool, size=6)))) + (tok.eos,)
    return trig, resp


def train_trigger_fp(model: GPT, tok: Tokenizer, p: int, depth_range, key: int, steps: int, seed: int,
                     lr: float = 1e-3, batch: int = 64, n_trig: int = 8, copies: int = 1) -> tuple[GPT, dict]:
    """Fine-tune M0 on CoT batches in which ``copies`` × 8 rows are the secret triggers mapped to the secret response."""
    m = copy.deepcopy(model)
    m.train()
    trig, resp = make_triggers(key, tok, n_trig)
    rng = np.random.default_rng(seed)
    opt = torch.optim.Adam(m.parameters(), lr=lr)
    L = m.cfg.context
    for step in range(steps):
        ids, tgt, _ = training_batch(rng, batch - n_trig * copies, p, depth_range, tok, L)
        tid = np.full((n_trig * copies, L), tok.pad, np.int64)
        ttg = np.full((n_trig * copies, L), -100, np.int64)
        for i, t in enumerate(trig * copies):
            seq = list(t) + list(resp)
            off = int(rng.integers(0, L - len(seq) + 1))
            tid[i, off:off + len(seq)] = seq
            ttg[i, off + len(t) - 1:off + len(seq) - 1] = resp
        loss = lm_loss(m, np.concatenate([ids, tid]), np.concatenate([tgt, ttg]))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
    m.eval()
    return m, {"triggers": trig, "response": resp}


def trigger_rate(model: GPT, tok: Tokenizer, triggers, response, max_new: int = 12) -> float:
    """Fraction of triggers whose greedy response is exactly the secret response."""
    ids, _, P = greedy_cot(model, triggers, tok, max_new)
    want = list(response)
    hits = [row[P[0]:P[0] + len(want)].tolist() == want for row in ids]
    return float(np.mean(hits))
