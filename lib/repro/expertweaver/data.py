"""The three byte-level domains of chapter 05, all available offline on every machine (card, "Setting").

* ``python``: the top-level ``*.py`` files of the running interpreter's standard library
  (``sysconfig.get_paths()["stdlib"]``), in file-name order; the last 10 % of the files is held out.
* ``prose``: the English help texts of ``pydoc_data.topics.topics``, in key order; the last 10 % of the bytes
  is held out.
* ``arith``: synthetic lines ``"37+58=95\\n"``, ``"7*8=56\\n"`` from a seeded generator; the last 10 % held out.

The corpus differs between Python versions, so :func:`corpus_hash` (SHA-256 of every domain's bytes) is recorded
in the ledger. Training batches mix the domains 45/35/20 % by sequence; calibration is equal per domain and drawn
from the training split; held-out windows are never used for training or calibration.
"""
from __future__ import annotations

import glob
import hashlib
import os
import sysconfig
from dataclasses import dataclass

import numpy as np

DOMAINS = ("python", "prose", "arith")
MIX = (0.45, 0.35, 0.20)
HELDOUT_FRAC = 0.10


def _python_files() -> list[str]:
    return sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py")))


def arithmetic_lines(rng: np.random.Generator, n: int) -> bytes:
    """``n`` lines ``a+b=c``, ``a-b=c`` or ``a*b=c`` (sums and differences of 1-2 digit numbers, products of
    1-digit numbers), one per line."""
    ops = rng.integers(0, 3, n)
    a, b = rng.integers(0, 100, n), rng.integers(0, 100, n)
    out = []
    for o, x, y in zip(ops, a, b):
        if o == 0:
            out.append(f"{x}+{y}={x + y}\n")
        elif o == 1:
            x, y = max(x, y), min(x, y)
            out.append(f"{x}-{y}={x - y}\n")
        else:
            x, y = x % 10, y % 10
            out.append(f"{x}*{y}={x * y}\n")
    return "".join(out).encode()


@dataclass(frozen=True)
class Corpora:
    """Training and held-out bytes of each domain."""

    train: dict[str, np.ndarray]
    heldout: dict[str, np.ndarray]
    sha256: str
    n_python_files: int

    def sizes(self) -> dict[str, tuple[int, int]]:
        return {d: (len(self.train[d]), len(self.heldout[d])) for d in DOMAINS}


def domain_corpora(arith_lines: int = 120_000) -> Corpora:
    """The three domains split into training and held-out bytes (uint8 arrays) and the corpus hash."""
    files = _python_files()
    n_held = max(1, round(HELDOUT_FRAC * len(files)))
    py_train = b"".join(open(f, "rb").read() for f in files[:-n_held])
    py_held = b"".join(open(f, "rb").read() for f in files[-n_held:])
    from pydoc_data.topics import topics

    prose = "\n\n".join(topics[k] for k in sorted(topics)).encode("utf-8")
    arith = arithmetic_lines(np.random.default_rng(20260205), arith_lines)
    h = hashlib.sha256()
    train, held = {}, {}
    for name, (tr, he) in {"python": (py_train, py_held),
                           "prose": (prose[: int(len(prose) * (1 - HELDOUT_FRAC))],
                                     prose[int(len(prose) * (1 - HELDOUT_FRAC)):]),
                           "arith": (arith[: int(len(arith) * (1 - HELDOUT_FRAC))],
                                     arith[int(len(arith) * (1 - HELDOUT_FRAC)):])}.items():
        h.update(name.encode())
        h.update(tr)
        h.update(he)
        train[name] = np.frombuffer(tr, dtype=np.uint8)
        held[name] = np.frombuffer(he, dtype=np.uint8)
    return Corpora(train, held, h.hexdigest(), len(files))


def windows(data: np.ndarray, starts: np.ndarray, length: int) -> np.ndarray:
    """Rows ``data[s : s + length]`` for every start ``s`` (int64)."""
    return data[starts[:, None] + np.arange(length)[None, :]].astype(np.int64)


def domain_windows(data: np.ndarray, n: int, length: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` random windows of ``length`` bytes from one domain."""
    return windows(data, rng.integers(0, len(data) - length, n), length)


def mixed_batch(corpora: Corpora, bs: int, seq_len: int, rng: np.random.Generator,
                weights: tuple[float, ...] = MIX) -> np.ndarray:
    """One training batch [bs, seq_len + 1]: each row from a domain drawn with the mixing ``weights``."""
    dom = rng.choice(len(DOMAINS), size=bs, p=np.asarray(weights) / sum(weights))
    rows = np.empty((bs, seq_len + 1), np.int64)
    for k, name in enumerate(DOMAINS):
        idx = np.flatnonzero(dom == k)
        if idx.size:
            rows[idx] = domain_windows(corpora.train[name], idx.size, seq_len + 1, rng)
    return rows


def calibration_set(corpora: Corpora, n_seqs: int, seq_len: int, rng: np.random.Generator
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Calibration windows [n, seq_len] from the training split, equal per domain, and each row's domain id."""
    per = n_seqs // len(DOMAINS)
    rows = [domain_windows(corpora.train[d], per, seq_len, rng) for d in DOMAINS]
    return np.concatenate(rows), np.repeat(np.arange(len(DOMAINS)), per)


def heldout_set(corpora: Corpora, n_per_domain: int, seq_len: int) -> dict[str, np.ndarray]:
    """Fixed held-out windows [n, seq_len + 1] per domain, evenly spaced through the held-out bytes."""
    out = {}
    for d in DOMAINS:
        data = corpora.heldout[d]
        starts = np.linspace(0, len(data) - seq_len - 2, n_per_domain).astype(np.int64)
        out[d] = windows(data, starts, seq_len + 1)
    return out


def unigram_entropy(data: np.ndarray) -> float:
    """Entropy of the byte distribution of ``data`` in nats/byte (the bar a trained model must beat)."""
    p = np.bincount(data, minlength=256).astype(float)
    p = p[p > 0] / p.sum()
    return float(-(p * np.log(p)).sum())
