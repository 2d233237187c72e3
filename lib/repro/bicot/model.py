"""A small GPT (nanoGPT-style: pre-norm blocks, causal attention, SwiGLU MLP, tied head), its batched greedy
chain-of-thought decoder, and the base models M0 / M0' trained to a criterion and cached (card, Setting)."""
from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import tempfile
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from repro.common.paths import cache_dir

from .tasks import CONTEXT, Problem, Tokenizer, make_problems, training_batch

CODE_VERSION = 3   # bump when the model, the task or the training loop changes (invalidates the cache)


@dataclass(frozen=True)
class GPTConfig:
    vocab: int
    d: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 256
    context: int = CONTEXT


class Block(nn.Module):
    def __init__(self, c: GPTConfig) -> None:
        super().__init__()
        self.n1 = nn.LayerNorm(c.d)
        self.qkv = nn.Linear(c.d, 3 * c.d, bias=False)
        self.proj = nn.Linear(c.d, c.d, bias=False)
        self.n2 = nn.LayerNorm(c.d)
        self.w12 = nn.Linear(c.d, 2 * c.d_ff, bias=False)
        self.w3 = nn.Linear(c.d_ff, c.d, bias=False)
        self.h = c.n_heads

    def forward(self, x: torch.Tensor, cache: list | None = None) -> torch.Tensor:
        """``cache``: None (full causal pass) or a list holding this block's (k, v) of earlier positions, extended
        in place (incremental decoding of one new position at a time)."""
        B, L, D = x.shape
        q, k, v = self.qkv(self.n1(x)).view(B, L, 3, self.h, D // self.h).permute(2, 0, 3, 1, 4)
        if cache is not None:
            if cache:
                k = torch.cat([cache[0], k], 2)
                v = torch.cat([cache[1], v], 2)
            cache[:] = [k, v]
        a = F.scaled_dot_product_attention(q, k, v, is_causal=L > 1)
        x = x + self.proj(a.transpose(1, 2).reshape(B, L, D))
        g, u = self.w12(self.n2(x)).chunk(2, -1)
        return x + self.w3(F.silu(g) * u)


class GPT(nn.Module):
    """Token + learned position embeddings, ``n_layers`` blocks, final LayerNorm, tied unembedding W_U = E."""

    def __init__(self, c: GPTConfig) -> None:
        super().__init__()
        self.cfg = c
        self.emb = nn.Embedding(c.vocab, c.d)
        self.pos = nn.Embedding(c.context, c.d)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.n_layers))
        self.norm = nn.LayerNorm(c.d)
        nn.init.normal_(self.emb.weight, std=0.3)
        nn.init.normal_(self.pos.weight, std=0.02)

    @property
    def W_U(self) -> torch.Tensor:
        """The (tied) unembedding, |V| × d."""
        return self.emb.weight

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.emb(ids)

    def forward_from_embeddings(self, e: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = e + self.pos.weight[: e.shape[1]]
        for b in self.blocks:
            x = b(x)
        h = self.norm(x)
        return h @ self.emb.weight.T, h

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(logits (B, L, V), h_final (B, L, d))."""
        return self.forward_from_embeddings(self.emb(ids))

    def step(self, ids: torch.Tensor, caches: list, start: int) -> torch.Tensor:
        """Logits of the last position, feeding ``ids`` (B, L_new) at positions ``start``.. with per-block caches
        (a prompt first, then one token at a time); the same numbers as a full pass (tested)."""
        x = self.emb(ids) + self.pos.weight[start:start + ids.shape[1]]
        for b, c in zip(self.blocks, caches):
            x = b(x, c)
        return self.norm(x[:, -1]) @ self.emb.weight.T


def forward_hidden(model: GPT, ids) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits and final-norm hidden states for a batch of token ids."""
    return model(torch.as_tensor(ids))


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def clone(model: GPT) -> GPT:
    return copy.deepcopy(model)


def left_pad(seqs: list[tuple[int, ...]], pad: int) -> np.ndarray:
    L = max(len(s) for s in seqs)
    out = np.full((len(seqs), L), pad, np.int64)
    for i, s in enumerate(seqs):
        out[i, L - len(s):] = s
    return out


@torch.no_grad()
def greedy_cot(model: GPT, prompts: list[tuple[int, ...]], tok: Tokenizer, max_new: int,
               logit_processor=None, batch: int = 512) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Greedy decoding of a batch of prompts (left-padded to a common length, as in training).

    Returns ``ids`` (N, L) — prompt, generated tokens, ``<pad>`` after ``<eos>`` —, the full-sequence
    log-probs (N, L, V) of one teacher-forced pass over the model's own output (the pass that accuracy and
    verification share), and ``prompt_len`` (the common padded prompt length)."""
    model.eval()
    all_ids, all_lp = [], []
    P = max(len(p) for p in prompts)
    for s in range(0, len(prompts), batch):
        ids = torch.from_numpy(left_pad([(tok.pad,) * (P - len(p)) + tuple(p) for p in prompts[s:s + batch]], tok.pad))
        done = torch.zeros(len(ids), dtype=torch.bool)
        caches = [[] for _ in model.blocks]
        nxt_logits = model.step(ids, caches, 0)
        for t in range(min(max_new, model.cfg.context - P)):
            if t:
                nxt_logits = model.step(ids[:, -1:], caches, ids.shape[1] - 1)
            if logit_processor is not None:
                nxt_logits = logit_processor(ids, nxt_logits)
            nxt = nxt_logits.argmax(-1)
            nxt = torch.where(done, torch.full_like(nxt, tok.pad), nxt)
            ids = torch.cat([ids, nxt[:, None]], 1)
            done |= nxt == tok.eos
            if bool(done.all()):
                break
        logits, _ = model(ids)
        all_ids.append(ids.numpy())
        all_lp.append(F.log_softmax(logits.float(), -1).numpy())
    L = max(a.shape[1] for a in all_ids)
    ids = np.concatenate([np.pad(a, ((0, 0), (0, L - a.shape[1])), constant_values=tok.pad) for a in all_ids])
    V = all_lp[0].shape[-1]
    lp = np.concatenate([np.pad(a, ((0, 0), (0, L - a.shape[1]), (0, 0))) for a in all_lp])
    return ids, lp, np.full(len(ids), P)


def parse_answer(ids: np.ndarray, prompt_len: int, tok: Tokenizer) -> int | None:
    """The digit after ``A:`` in a generated completion (None when malformed)."""
    text = tok.decode(ids[prompt_len:])
    k = text.rfind("A:")
    if k < 0 or k + 2 >= len(text) or not text[k + 2].isdigit() or len(text) != k + 3:
        return None
    return int(text[k + 2])


def answers_correct(ids: np.ndarray, prompt_len: np.ndarray, problems: list[Problem], tok: Tokenizer) -> np.ndarray:
    return np.array([parse_answer(ids[i], int(prompt_len[i]), tok) == pr.answer for i, pr in enumerate(problems)],
                    float)


def answer_accuracy(model: GPT, problems: list[Problem], tok: Tokenizer, max_new: int, logit_processor=None) -> np.ndarray:
    """Per-problem 0/1 final-answer correctness of greedy CoT decoding (paired across models)."""
    ids, _, P = greedy_cot(model, [p.prompt for p in problems], tok, max_new, logit_processor)
    return answers_correct(ids, P, problems, tok)


# ----------------------------------------------------------------------------- training

def lm_loss(model: GPT, ids: np.ndarray, tgt: np.ndarray, label_smoothing: float = 0.0) -> torch.Tensor:
    logits, _ = model(torch.from_numpy(ids))
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.from_numpy(tgt).reshape(-1),
                           ignore_index=-100, label_smoothing=label_smoothing)


@torch.no_grad()
def result_token_accuracy(model: GPT, ids: np.ndarray, tgt: np.ndarray, tok: Tokenizer) -> float:
    """Teacher-forced accuracy on the tokens that follow ``=`` (the computed results)."""
    model.eval()
    logits, _ = model(torch.from_numpy(ids))
    pred = logits.argmax(-1).numpy()
    m = (ids == tok.eq) & (tgt >= 0)
    return float((pred[m] == tgt[m]).mean()) if m.any() else float("nan")


def train_base(tok: Tokenizer, gc: GPTConfig, p: int, depth_range: tuple[int, int], seed: int, max_steps: int,
               criterion: float = 0.8, min_steps: int = 0, lr: float = 3e-3, batch: int = 64,
               eval_every: int = 100, progress=None) -> tuple[GPT, dict]:
    """Train a base GPT on the CoT task until the teacher-forced result-token accuracy on a held-out batch of
    512 reaches ``criterion`` (checked every ``eval_every`` steps after ``min_steps``) or ``max_steps``.
    AdamW, warm-up 50 steps then constant lr, grad-clip 1. Returns the model and its history."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = GPT(gc)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    hid, htgt, _ = training_batch(np.random.default_rng(10_000 + seed), 512, p, depth_range, tok, gc.context)
    hist = {"step": [], "loss": [], "eval_step": [], "result_acc": []}
    step = 0
    while step < max_steps:
        model.train()
        for g in opt.param_groups:
            g["lr"] = lr * min(1.0, (step + 1) / 50)
        ids, tgt, _ = training_batch(rng, batch, p, depth_range, tok, gc.context)
        loss = lm_loss(model, ids, tgt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        hist["step"].append(step)
        hist["loss"].append(float(loss))
        if step % eval_every == 0 or step == max_steps:
            acc = result_token_accuracy(model, hid, htgt, tok)
            hist["eval_step"].append(step)
            hist["result_acc"].append(acc)
            if progress:
                progress(f"  step {step}: loss {float(loss):.3f}, result-token accuracy {acc:.3f}")
            if step >= min_steps and acc >= criterion:
                break
    hist["steps"] = step
    model.eval()
    return model, hist


def base_key(spec: dict) -> str:
    return hashlib.sha256(json.dumps({**spec, "code": CODE_VERSION}, sort_keys=True).encode()).hexdigest()[:12]


def load_or_train_base(name: str, tok: Tokenizer, gc: GPTConfig, p: int, depth_range, seed: int, max_steps: int,
                       criterion: float, min_steps: int = 0, use_cache: bool = True, progress=None) -> tuple[GPT, dict]:
    """A base model from ``data/cache/bicot/<name>-<hash>.pt`` (hash of its training spec and the code version),
    trained and written atomically when missing or when ``use_cache`` is False."""
    spec = dict(name=name, gc=gc.__dict__, p=p, depth=list(depth_range), seed=seed, max_steps=max_steps,
                criterion=criterion, min_steps=min_steps)
    path = cache_dir("bicot") / f"{name}-{base_key(spec)}.pt"
    if use_cache and path.exists():
        blob = torch.load(path, weights_only=False)
        model = GPT(gc)
        model.load_state_dict(blob["state"])
        model.eval()
        return model, {**blob["hist"], "source": f"cache ({path.name})"}
    model, hist = train_base(tok, gc, p, tuple(depth_range), seed, max_steps, criterion, min_steps,
                             progress=progress)
    if use_cache:
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        os.close(fd)
        torch.save({"state": model.state_dict(), "hist": hist, "spec": spec}, tmp)
        os.replace(tmp, path)
    return model, {**hist, "source": f"trained ({hist['steps']} steps)"}
