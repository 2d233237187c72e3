"""The chain-arithmetic task with a written chain-of-thought trace (chapter 03's toy stand-in for reasoning).

A problem ``Q:a+b*c T:a+b=r1;r1*c=r2 A:r2`` applies depth-many operations left to right, modulo p. Digits
0..p-1 are single tokens; the vocabulary is the digits, the operators ``+ - * = ;``, the formatting tokens
``Q : T A`` and the space, ``<eos>`` and ``<pad>`` (19 tokens for p = 7). The prompt ends with ``T:``; the model
writes the trace and the answer. Token roles (card, Method 2): *anchors* are the structural positions whose next
token is computed (the chapter selects them by saliency, :mod:`.saliency`; with the decision of the card they are
the ``=`` positions of the trace), *controls* are formatting tokens, *other* is everything else.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

OPS = ("+", "-", "*")
FORMAT = ("Q", ":", "T", "A", " ")
STRUCT = ("+", "-", "*", "=", ";")
CONTEXT = 48

ROLE_OTHER, ROLE_ANCHOR, ROLE_CONTROL = 0, 1, 2


class Tokenizer:
    """Character-level tokenizer: digits 0..p-1, operators, formatting tokens, ``<eos>`` and ``<pad>``."""

    def __init__(self, p: int) -> None:
        self.p = p
        self.itos = [str(i) for i in range(p)] + list(STRUCT) + list(FORMAT) + ["<eos>", "<pad>"]
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        self.eos = self.stoi["<eos>"]
        self.pad = self.stoi["<pad>"]
        self.eq = self.stoi["="]

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def encode(self, text: str) -> list[int]:
        return [self.stoi[c] for c in text]

    def decode(self, ids) -> str:
        out = []
        for i in ids:
            i = int(i)
            if i == self.pad:
                continue
            if i == self.eos:
                break
            out.append(self.itos[i])
        return "".join(out)

    def ids_of(self, chars) -> list[int]:
        return [self.stoi[c] for c in chars]


def apply_op(x: int, op: str, y: int, p: int) -> int:
    if op == "+":
        return (x + y) % p
    if op == "-":
        return (x - y) % p
    return (x * y) % p


@dataclass(frozen=True)
class Problem:
    """One problem: ``prompt`` (ends with ``T:``), ``completion`` (trace, answer, ``<eos>``), ``answer``."""
    prompt: tuple[int, ...]
    completion: tuple[int, ...]
    answer: int
    depth: int


def make_cot_problem(rng: np.random.Generator, depth: int, p: int, tok: Tokenizer,
                     op_probs: tuple[float, float, float] = (1 / 3, 1 / 3, 1 / 3)) -> Problem:
    """A seeded chain problem of ``depth`` operations (left to right, mod p) with its full trace."""
    nums = rng.integers(0, p, size=depth + 1)
    ops = [OPS[i] for i in rng.choice(3, size=depth, p=np.asarray(op_probs) / np.sum(op_probs))]
    q = str(nums[0]) + "".join(o + str(n) for o, n in zip(ops, nums[1:]))
    steps, r = [], int(nums[0])
    for o, n in zip(ops, nums[1:]):
        r2 = apply_op(r, o, int(n), p)
        steps.append(f"{r}{o}{n}={r2}")
        r = r2
    prompt = f"Q:{q} T:"
    completion = ";".join(steps) + f" A:{r}"
    return Problem(tuple(tok.encode(prompt)), tuple(tok.encode(completion)) + (tok.eos,), r, depth)


#: Out-of-distribution prompt families of C5: deeper chains, '-'-only and '*'-heavy operation mixes.
OOD_FAMILIES = {"depth4": dict(depth=(4, 4), op_probs=(1 / 3, 1 / 3, 1 / 3)),
                "minus_only": dict(depth=None, op_probs=(0.0, 1.0, 0.0)),
                "times_heavy": dict(depth=None, op_probs=(0.1, 0.1, 0.8))}


def make_problems(rng: np.random.Generator, n: int, p: int, depth_range: tuple[int, int], tok: Tokenizer,
                  ood: bool = False) -> list[Problem]:
    """``n`` problems; in-domain depths uniform in ``depth_range`` and uniform operations, or (``ood``) a
    round-robin of the three OOD families (depth max+1; '-'-only; '*'-heavy at in-domain depths)."""
    out = []
    lo, hi = depth_range
    for i in range(n):
        if not ood:
            out.append(make_cot_problem(rng, int(rng.integers(lo, hi + 1)), p, tok))
            continue
        fam = list(OOD_FAMILIES.values())[i % 3]
        d = hi + 1 if fam["depth"] is not None else int(rng.integers(lo, hi + 1))
        out.append(make_cot_problem(rng, d, p, tok, fam["op_probs"]))
    return out


def max_depth_len(depth: int) -> tuple[int, int]:
    """(prompt length, completion length incl. <eos>) at a depth: 2D+6 and 6D+4."""
    return 2 * depth + 6, 6 * depth + 4


def training_batch(rng: np.random.Generator, batch: int, p: int, depth_range: tuple[int, int], tok: Tokenizer,
                   context: int = CONTEXT, problems: list[Problem] | None = None):
    """A batch of whole sequences with a random left-padding offset (so every position up to the context is
    trained). Returns ``ids`` (B, L) int64, ``targets`` (B, L) with -100 outside the completion, and the problems."""
    probs = problems if problems is not None else make_problems(rng, batch, p, depth_range, tok)
    ids = np.full((len(probs), context), tok.pad, np.int64)
    tgt = np.full((len(probs), context), -100, np.int64)
    for i, pr in enumerate(probs):
        seq = list(pr.prompt) + list(pr.completion)
        off = int(rng.integers(0, context - len(seq) + 1))
        ids[i, off:off + len(seq)] = seq
        # position j predicts token j+1: completion tokens are predicted from the prompt's last token on
        start = off + len(pr.prompt) - 1
        tgt[i, start:off + len(seq) - 1] = seq[len(pr.prompt):]
    return ids, tgt, probs


def token_roles(ids: np.ndarray, tok: Tokenizer, anchor_types: tuple[str, ...] = ("=",),
                start: np.ndarray | int = 0) -> np.ndarray:
    """Role of every position: anchor (a token of an anchor type at or after ``start``, the trace),
    control (formatting tokens Q : T A space) or other."""
    ids = np.asarray(ids)
    roles = np.zeros(ids.shape, np.int8)
    fmt = np.isin(ids, tok.ids_of(FORMAT))
    roles[fmt] = ROLE_CONTROL
    pos = np.arange(ids.shape[-1])
    after = pos >= np.asarray(start)[..., None] if np.ndim(start) else pos >= start
    roles[np.isin(ids, tok.ids_of(anchor_types)) & after] = ROLE_ANCHOR
    return roles
