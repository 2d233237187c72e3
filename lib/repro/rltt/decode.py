"""Batched autoregressive decoding with the per-loop KV cache: greedy, or sampled at a temperature.

All prompts of one call have the same length (task A prompts always do; task B is grouped by length),
so no left-padding is needed. ``n_loops`` < T decodes with the truncated model: every token uses the
readout after loop ``n_loops`` (the per-loop evaluation of the paper's Fig. on intermediate loops).
Tokens after a row's first ``<eos>`` are replaced by ``<pad>``; the verifiers never read them anyway.
"""
from __future__ import annotations

import torch

from .model import LoopedLM
from .tasks import TOK


@torch.inference_mode()
def generate(model: LoopedLM, prompts: torch.Tensor, max_new: int, temperature: float | None = None,
             generator: torch.Generator | None = None, n_loops: int | None = None, repeats: int = 1
             ) -> torch.Tensor:
    """Completions [B·repeats, max_new] for ``prompts`` [B, Lp]; greedy when ``temperature`` is None.

    With ``repeats`` = G every prompt is decoded G times (rows grouped by prompt): the prompt is run once
    and its per-loop cache shared, exactly as if the prompt had been repeated G times (tested).
    """
    out = model(prompts, n_loops=n_loops, readout="last", use_cache=True)
    cache = out.cache
    logits = out.per_loop_logits[0, :, -1]
    if repeats > 1:
        cache = [[(k.repeat_interleave(repeats, 0), v.repeat_interleave(repeats, 0)) for k, v in layer]
                 for layer in cache]
        logits = logits.repeat_interleave(repeats, 0)
    B = logits.shape[0]
    toks = torch.full((B, max_new), TOK.PAD, dtype=torch.long)
    done = torch.zeros(B, dtype=torch.bool)
    for j in range(max_new):
        if temperature is None:
            nxt = logits.argmax(-1)
        else:
            probs = torch.softmax(logits / temperature, -1)
            nxt = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        toks[:, j] = torch.where(done, torch.full_like(nxt, TOK.PAD), nxt)
        done |= nxt == TOK.EOS
        if bool(done.all()) or j == max_new - 1:
            break
        out = model(nxt[:, None], n_loops=n_loops, cache=cache, readout="last", use_cache=True)
        cache = out.cache
        logits = out.per_loop_logits[0, :, -1]
    return toks


@torch.inference_mode()
def generate_full(model: LoopedLM, prompts: torch.Tensor, max_new: int, temperature: float | None = None,
                  generator: torch.Generator | None = None, n_loops: int | None = None) -> torch.Tensor:
    """The same as :func:`generate` but recomputing the whole prefix at every step (the cache's reference)."""
    B = prompts.shape[0]
    seq = prompts.clone()
    toks = torch.full((B, max_new), TOK.PAD, dtype=torch.long)
    done = torch.zeros(B, dtype=torch.bool)
    for j in range(max_new):
        logits = model(seq, n_loops=n_loops, readout="last").per_loop_logits[0, :, -1]
        if temperature is None:
            nxt = logits.argmax(-1)
        else:
            nxt = torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=generator).squeeze(-1)
        toks[:, j] = torch.where(done, torch.full_like(nxt, TOK.PAD), nxt)
        done |= nxt == TOK.EOS
        if bool(done.all()):
            break
        seq = torch.cat([seq, nxt[:, None]], 1)
    return toks


def completion_mask(completions: torch.Tensor) -> torch.Tensor:
    """True on the tokens of each completion up to and including its first ``<eos>``."""
    is_eos = completions == TOK.EOS
    after = torch.cumsum(is_eos.long(), 1) - is_eos.long()   # eos tokens strictly before this position
    return after == 0
