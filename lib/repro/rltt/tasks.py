"""The two toy tasks of chapter 12 and their verifiers (card, "Setting at book scale").

**Task A (the RL domain): modular chain arithmetic with a result trace.** Every prompt has exactly six
operations, ``a0 o1 a1 o2 a2 … o6 a6 =``, digits 0–9, operators {+, −, ×} mod 10, evaluated left to
right. A depth-d problem has d random operations in d slots of the six; the other slots read ``+ 0``
(in random slots by default, so that no slot is exercised only by the deepest problems). The completion
is a trace of intermediate results, ``#``, the final result and ``<eos>``. With ``stride`` s the trace
writes every s-th running result: s = 1 (the card's trace) gives all five, ``3 1 8 8 8 # 8 <eos>``;
s = 2 (the chapter's default, issue 14) gives results 2 and 4, ``1 8 # 8 <eos>``, so every written token
needs *two* operations of latent work, which is what gives the loops something to do (with s = 1 one
operation per token is solved by two loops and loops 3-4 read out the same answer). The reward is 1 iff
the token right after the first ``#`` is the true result; the paper's math reward likewise reads only the
final answer. A rewarded completion whose trace is wrong is a *lucky guess* (:func:`lucky_guesses`).

**The imperfect teacher (issue 46).** The SFT demonstrations of task A come from a teacher that gets one family
of facts, ``× 3`` and ``× 7`` (:data:`TEACHER_FACT`), wrong with probability ``teacher_error``: it writes
``(a·b + 5) mod 10``
and carries on consistently from its wrong running result (trace and answer). The held-out sets, the RL prompts
and the verifier use the true arithmetic. With ``teacher_error`` > 1/2 the SFT model prefers the wrong fact, so no
temperature of the SFT model repairs it, while RL against the verifier can: the regime where RL adds correctness
beyond sharpening, which control K2 asks for (the chapter's Setting).

**Task B (transfer, never used in RL):** ``S`` or ``R``, 4–8 digits, ``=``; the completion is ``#``, the
digits sorted (S) or reversed (R), ``<eos>``; scored by exact match.

Vocabulary (19 tokens; the card counts 20, its list has 19): digits 0–9 (ids 0–9), ``+ - *``, ``=``,
``#``, ``S``, ``R``, ``<eos>``, ``<pad>``. Everything is pure numpy, seeded by the caller's Generator.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

TOKENS = ("0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "+", "-", "*", "=", "#", "S", "R", "<eos>", "<pad>")
N_OPS = 6
PROMPT_LEN_A = 2 * N_OPS + 2          # a0, six (op, digit) pairs, '='
COMPLETION_LEN_A = N_OPS + 2          # stride 1: five intermediate results, '#', result, '<eos>'
STRIDES = (1, 2, 3)


def trace_slots(stride: int = 1) -> list[int]:
    """Indices (0-based, of the six running results) written before ``#``: every ``stride``-th but the last."""
    if stride not in STRIDES:
        raise ValueError(f"stride must be one of {STRIDES}; got {stride}")
    return list(range(stride - 1, N_OPS - 1, stride))


def completion_len(stride: int = 1) -> int:
    """Tokens of a task-A completion: the trace, ``#``, the result, ``<eos>``."""
    return len(trace_slots(stride)) + 3


class Tokenizer:
    """Token <-> id for the chapter's 19-symbol vocabulary (digits are their own ids)."""

    tokens = TOKENS

    def __init__(self) -> None:
        self.id = {t: i for i, t in enumerate(TOKENS)}
        self.PLUS, self.MINUS, self.TIMES = self.id["+"], self.id["-"], self.id["*"]
        self.EQ, self.HASH, self.S, self.R = self.id["="], self.id["#"], self.id["S"], self.id["R"]
        self.EOS, self.PAD = self.id["<eos>"], self.id["<pad>"]

    @property
    def vocab_size(self) -> int:
        return len(TOKENS)

    def encode(self, text: str | Sequence[str]) -> list[int]:
        """``"3 + 4 ="`` or a list of tokens -> ids."""
        parts = text.split() if isinstance(text, str) else list(text)
        return [self.id[p] for p in parts]

    def decode(self, ids: Sequence[int]) -> str:
        return " ".join(TOKENS[int(i)] for i in ids)


TOK = Tokenizer()
OPS = np.array([TOK.PLUS, TOK.MINUS, TOK.TIMES])


@dataclass
class Problem:
    """One problem: prompt ids, reference completion ids, the answer the verifier checks, its depth."""

    prompt: list[int]
    completion: list[int]
    answer: int | list[int]
    depth: int
    task: str = "A"
    meta: dict = field(default_factory=dict)


# ----------------------------------------------------------------------------- task A

def apply_op(acc: np.ndarray, op: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One left-to-right step mod 10: acc + b, acc − b or acc × b (op given as token ids)."""
    return np.where(op == TOK.PLUS, acc + b, np.where(op == TOK.MINUS, acc - b, acc * b)) % 10


#: The imperfect teacher's family of facts (operator token, digits) and its mistake: it writes (true + shift) mod 10.
TEACHER_FACT = ("*", (3, 7))
TEACHER_SHIFT = 5


def chain_batch(rng: np.random.Generator, depths: Sequence[int] | np.ndarray, pad_slots: str = "random",
                stride: int = 1, teacher_error: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``len(depths)`` task-A problems at once: prompts [n, 14], completions [n, completion_len(stride)],
    answers [n]. The random draws do not depend on ``stride`` (same prompts for every trace).

    Slot choice: a depth-d problem draws d of the six slots (``pad_slots="random"``) or takes the first
    d (``"end"``, the pilot's original layout, which left slot 6 to depth-6 problems only); each chosen
    slot gets a uniform operator and digit, every other slot is ``+ 0``.

    ``teacher_error`` q > 0 gives the imperfect teacher's demonstrations (SFT only): every ``× 3`` or ``× 7`` step is
    written as ``(a·b + 5) mod 10`` with probability q and the chain goes on from it, so the completion and the returned
    answer are the teacher's. Its random draws come after the prompt's, so the prompts are those of q = 0 for the
    same generator state; q = 0 draws nothing extra (every other set is unchanged).
    """
    depths = np.asarray(depths, dtype=np.int64)
    n = len(depths)
    if n and (depths.min() < 0 or depths.max() > N_OPS):
        raise ValueError(f"depth must lie in 0..{N_OPS}; got {depths.min()}..{depths.max()}")
    if pad_slots not in ("random", "end"):
        raise ValueError(f"pad_slots must be 'random' or 'end'; got {pad_slots!r}")
    a0 = rng.integers(0, 10, size=n)
    ops = OPS[rng.integers(0, 3, size=(n, N_OPS))]
    digits = rng.integers(0, 10, size=(n, N_OPS))
    if pad_slots == "random":
        rank = np.argsort(rng.random((n, N_OPS)), axis=1).argsort(axis=1)   # a random permutation per row
    else:
        rank = np.broadcast_to(np.arange(N_OPS), (n, N_OPS))
    active = rank < depths[:, None]
    ops = np.where(active, ops, TOK.PLUS)
    digits = np.where(active, digits, 0)
    slip = np.zeros((n, N_OPS), dtype=bool)
    if teacher_error > 0:
        slip = ((ops == TOK.encode(TEACHER_FACT[0])[0]) & np.isin(digits, TEACHER_FACT[1])
                & (rng.random((n, N_OPS)) < teacher_error))
    results = np.empty((n, N_OPS), dtype=np.int64)
    acc = a0.copy()
    for k in range(N_OPS):
        acc = apply_op(acc, ops[:, k], digits[:, k])
        acc = np.where(slip[:, k], (acc + TEACHER_SHIFT) % 10, acc)
        results[:, k] = acc
    prompts = np.empty((n, PROMPT_LEN_A), dtype=np.int64)
    prompts[:, 0] = a0
    prompts[:, 1:-1:2] = ops
    prompts[:, 2:-1:2] = digits
    prompts[:, -1] = TOK.EQ
    completions = np.concatenate(
        [results[:, trace_slots(stride)], np.full((n, 1), TOK.HASH), results[:, -1:], np.full((n, 1), TOK.EOS)],
        axis=1)
    return prompts, completions, results[:, -1].copy()


def has_teacher_fact(prompts: np.ndarray | Sequence[Sequence[int]]) -> np.ndarray:
    """Which task-A prompts [n, 14] contain a step of the imperfect teacher's family (``× 3``, ``× 7``): bool [n]."""
    p = np.asarray(prompts)
    return ((p[:, 1:-1:2] == TOK.encode(TEACHER_FACT[0])[0]) & np.isin(p[:, 2:-1:2], TEACHER_FACT[1])).any(1)


def make_chain_problem(rng: np.random.Generator, depth: int, n_ops: int = N_OPS, pad_slots: str = "random",
                       stride: int = 1) -> Problem:
    """One task-A problem of the given depth (``n_ops`` is fixed at 6 by the task's design)."""
    if n_ops != N_OPS:
        raise ValueError(f"task A has exactly {N_OPS} operations; got n_ops={n_ops}")
    p, c, a = chain_batch(rng, [depth], pad_slots, stride)
    return Problem(p[0].tolist(), c[0].tolist(), int(a[0]), int(depth), "A")


def sample_depths(rng: np.random.Generator, n: int, depths: Sequence[int], probs: Sequence[float] | None = None
                  ) -> np.ndarray:
    return rng.choice(np.asarray(depths), size=n, p=None if probs is None else np.asarray(probs) / np.sum(probs))


# ----------------------------------------------------------------------------- task B

def make_sort_problem(rng: np.random.Generator, n: int | None = None, kind: str | None = None) -> Problem:
    """``S``/``R`` + n digits (n uniform in 4..8 when not given) + ``=`` -> ``#`` + sorted/reversed + ``<eos>``."""
    n = int(rng.integers(4, 9)) if n is None else int(n)
    kind = ("S", "R")[int(rng.integers(0, 2))] if kind is None else kind
    digits = rng.integers(0, 10, size=n).tolist()
    out = sorted(digits) if kind == "S" else digits[::-1]
    prompt = [TOK.id[kind], *digits, TOK.EQ]
    completion = [TOK.HASH, *out, TOK.EOS]
    return Problem(prompt, completion, completion, n, "B", {"kind": kind})


# ----------------------------------------------------------------------------- verifiers

def truncate_at_eos(completion: Sequence[int]) -> list[int]:
    """The completion up to and including its first ``<eos>`` (everything after is never read)."""
    out = []
    for t in completion:
        out.append(int(t))
        if int(t) == TOK.EOS:
            break
    return out


def reward(completion: Sequence[int], answer: int) -> float:
    """Task A: 1.0 iff the token right after the first ``#`` (before the first ``<eos>``) is ``answer``."""
    seq = truncate_at_eos(completion)
    if TOK.HASH not in seq:
        return 0.0
    k = seq.index(TOK.HASH)
    return float(k + 1 < len(seq) and seq[k + 1] == int(answer))


def exact_match(completion: Sequence[int], reference: Sequence[int]) -> float:
    """Task B: 1.0 iff the completion up to its first ``<eos>`` equals the reference (which ends in ``<eos>``)."""
    return float(truncate_at_eos(completion) == list(reference))


def trace_is_consistent(prompt: Sequence[int], completion: Sequence[int], stride: int = 1) -> bool:
    """Every written result of a task-A completion (trace and answer) follows from the prompt by running
    the six operations left to right, and the completion has the trace's layout."""
    slots = trace_slots(stride)
    if len(completion) != len(slots) + 3:
        return False
    acc, running = int(prompt[0]), []
    for k in range(N_OPS):
        acc = int(apply_op(np.array(acc), np.array(prompt[1 + 2 * k]), np.array(prompt[2 + 2 * k])))
        running.append(acc)
    written = [int(t) for t in completion[:len(slots)]] + [int(completion[len(slots) + 1])]
    return (written == [running[k] for k in slots] + [running[-1]] and completion[len(slots)] == TOK.HASH
            and completion[-1] == TOK.EOS)


def batch_rewards(completions: np.ndarray, answers: np.ndarray) -> np.ndarray:
    """Vectorised :func:`reward` over rows of ``completions`` [n, m] (same semantics; tested against it)."""
    c = np.asarray(completions)
    n, m = c.shape
    pos = np.arange(m)
    is_eos = c == TOK.EOS
    first_eos = np.where(is_eos.any(1), is_eos.argmax(1), m)
    is_hash = (c == TOK.HASH) & (pos[None, :] < first_eos[:, None])
    has_hash = is_hash.any(1)
    k = is_hash.argmax(1) + 1
    ok = has_hash & (k < m) & (k <= first_eos)   # the answer slot exists (if it is <eos>, it cannot match a digit)
    tok = c[np.arange(n), np.minimum(k, m - 1)]
    return (ok & (tok == np.asarray(answers))).astype(np.float64)


def chain_reference(prompts: np.ndarray, stride: int = 1) -> np.ndarray:
    """The reference completions [n, completion_len(stride)] of task-A ``prompts`` [n, 14], recomputed."""
    p = np.asarray(prompts)
    acc = p[:, 0].copy()
    results = np.empty((len(p), N_OPS), dtype=np.int64)
    for k in range(N_OPS):
        acc = apply_op(acc, p[:, 1 + 2 * k], p[:, 2 + 2 * k])
        results[:, k] = acc
    n = len(p)
    return np.concatenate([results[:, trace_slots(stride)], np.full((n, 1), TOK.HASH), results[:, -1:],
                           np.full((n, 1), TOK.EOS)], axis=1)


def lucky_guesses(completions: np.ndarray, prompts: np.ndarray, stride: int = 1) -> np.ndarray:
    """Rewarded task-A completions whose text up to ``<eos>`` is not the reference (a wrong trace, or the right
    answer after a malformed one): a reward the written reasoning does not support. With ten possible answers,
    a wrong computation still lands on the right digit about one time in ten. ``completions`` [n, m] as
    generated (rows matching ``prompts`` [n, 14]). Returns booleans [n]."""
    c = np.asarray(completions)
    ref = chain_reference(prompts, stride)
    rewarded = batch_rewards(c, ref[:, len(trace_slots(stride)) + 1]) > 0
    k, m = ref.shape[1], c.shape[1]
    head = c[:, :k] if m >= k else np.pad(c, ((0, 0), (0, k - m)), constant_values=TOK.PAD)
    return rewarded & ~(head == ref).all(1)


# ----------------------------------------------------------------------------- batches

def sft_batch(rng: np.random.Generator, batch: int, pad_slots: str = "random", frac_a: float = 0.7,
              depths: Sequence[int] = (2, 3, 4, 5, 6), depth_probs: Sequence[float] = (.30, .25, .20, .15, .10),
              stride: int = 1, teacher_error: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One SFT batch: inputs [B, L], next-token targets [B, L], and the mask of completion targets.

    ``frac_a`` of the rows are task A with the card's depth mix, written by the imperfect teacher when
    ``teacher_error`` > 0 (:func:`chain_batch`), the rest task B; rows are right-padded (causal attention never
    lets a padded position influence a real one).
    """
    n_a = int(rng.binomial(batch, frac_a))
    seqs: list[np.ndarray] = []
    plen: list[int] = []
    if n_a:
        p, c, _ = chain_batch(rng, sample_depths(rng, n_a, depths, depth_probs), pad_slots, stride, teacher_error)
        seqs += list(np.concatenate([p, c], 1))
        plen += [PROMPT_LEN_A] * n_a
    for _ in range(batch - n_a):
        pb = make_sort_problem(rng)
        seqs.append(np.array(pb.prompt + pb.completion))
        plen.append(len(pb.prompt))
    L = max(len(s) for s in seqs) - 1
    x = np.full((batch, L), TOK.PAD, dtype=np.int64)
    y = np.full((batch, L), TOK.PAD, dtype=np.int64)
    mask = np.zeros((batch, L), dtype=bool)
    for i, (s, lp) in enumerate(zip(seqs, plen)):
        x[i, :len(s) - 1] = s[:-1]
        y[i, :len(s) - 1] = s[1:]
        mask[i, lp - 1:len(s) - 1] = True    # targets are the completion tokens
    return x, y, mask


def eval_sets(seed: int, n_hard: int, pad_slots: str = "random", stride: int = 1) -> dict[str, list[Problem]]:
    """Held-out problems, the same for every model: ``hard`` (depths 5–6), ``easy`` (depths 2–4), ``B``."""
    rng = np.random.default_rng([seed, 12, 0xE7A1])
    out: dict[str, list[Problem]] = {}
    for name, n, ds in (("hard", n_hard, (5, 6)), ("easy", max(n_hard // 2, 2), (2, 3, 4))):
        d = sample_depths(rng, n, ds)
        p, c, a = chain_batch(rng, d, pad_slots, stride)
        out[name] = [Problem(p[i].tolist(), c[i].tolist(), int(a[i]), int(d[i])) for i in range(n)]
    out["B"] = [make_sort_problem(rng) for _ in range(max(n_hard // 3, 2))]
    return out
