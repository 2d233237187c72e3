"""The chapter's data: byte-level text of CPython's own standard library (card, "Setting at book scale").

The corpus is every top-level ``*.py`` file of ``sysconfig.get_paths()["stdlib"]`` (sorted by name) plus the
English help texts of ``pydoc_data.topics.topics`` as one extra "file". Nothing is downloaded; the content
differs across Python versions, so :func:`corpus_info` records ``sys.version`` and a SHA-256 of the corpus.
Files are split about 90 / 5 / 5 % of the bytes into train / calibration / test by a seeded permutation of the
files (:func:`split_by_file`; the test split also holds enough of each probe byte), so no file contributes to two
splits. Each split is one byte stream; windows of
``seq_len + 1`` bytes are cut from it (inputs and next-byte targets).
"""
from __future__ import annotations

import hashlib
import sys
import sysconfig
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

#: The two multiple-choice pairs of the structural-completion probe (card, Controls and risks: C3).
PROBE_PAIRS = ((ord(")"), ord("]")), (ord("'"), ord('"')))


@lru_cache(maxsize=1)
def load_stdlib_corpus() -> tuple[tuple[str, bytes], ...]:
    """(name, bytes) of every top-level ``*.py`` file of this Python's stdlib, sorted by name, then the pydoc
    help topics as one extra file named ``pydoc_data.topics``."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = [(p.name, p.read_bytes()) for p in sorted(root.glob("*.py"))]
    from pydoc_data.topics import topics
    text = "\n\n".join(f"{k}\n{topics[k]}" for k in sorted(topics))
    files.append(("pydoc_data.topics", text.encode("utf-8")))
    return tuple(files)


def corpus_info(files=None) -> dict:
    """Size, file count, SHA-256 (first 16 hex digits) of the corpus, and the Python version it came from."""
    files = load_stdlib_corpus() if files is None else files
    h = hashlib.sha256()
    for name, data in files:
        h.update(name.encode() + b"\0" + data + b"\0")
    return {"files": len(files), "bytes": int(sum(len(d) for _, d in files)), "sha256": h.hexdigest()[:16],
            "python": sys.version.split()[0]}


def split_by_file(files, seed: int = 0, fractions=(0.90, 0.05, 0.05), min_probe: int = 0
                  ) -> dict[str, np.ndarray]:
    """Train / calib / test byte streams (uint8) of whole files, from a seeded permutation of the files.

    Walking the permutation, the test split takes files until it holds at least ``fractions[2]`` of the corpus bytes
    *and* at least ``min_probe`` occurrences of each probe byte (``)`` ``]`` ``'`` ``"``); the calibration split then
    takes files until it holds ``fractions[1]`` of the bytes; the rest is train. (Until issue 47 the split counted
    files, 5 % of 169 files; their sizes differ 1,000-fold, so a seed's test split held 85-860 kB and as few as 170
    ``]``, and the probe of control K3 came out with half its 1,600 items.)"""
    files = list(files)
    perm = np.random.default_rng(seed).permutation(len(files))
    total = sum(len(d) for _, d in files)
    probe = [c for pair in PROBE_PAIRS for c in pair]
    parts: dict[str, list[int]] = {"test": [], "calib": [], "train": []}
    size, counts = 0, np.zeros(len(probe), dtype=np.int64)
    it = iter(perm)
    for i in it:                                   # test: bytes and probe counts
        parts["test"].append(int(i))
        size += len(files[i][1])
        counts += [files[i][1].count(bytes([c])) for c in probe]
        if size >= fractions[2] * total and counts.min() >= min_probe:
            break
    size = 0
    for i in it:                                   # calibration: bytes
        parts["calib"].append(int(i))
        size += len(files[i][1])
        if size >= fractions[1] * total:
            break
    parts["train"] = [int(i) for i in it]
    if not all(parts.values()):
        raise ValueError(f"split_by_file: {len(files)} files cannot fill train, calib and test "
                         f"(fractions={fractions}, min_probe={min_probe})")
    return {k: np.frombuffer(b"\n".join(files[i][1] for i in sorted(idx)), dtype=np.uint8).copy()
            for k, idx in (("train", parts["train"]), ("calib", parts["calib"]), ("test", parts["test"]))}


def batches(data: np.ndarray, seq_len: int, bs: int, rng: np.random.Generator) -> torch.Tensor:
    """``bs`` random windows of ``seq_len + 1`` bytes (int64 tensor [bs, seq_len + 1])."""
    starts = rng.integers(0, len(data) - seq_len - 1, size=bs)
    return torch.from_numpy(np.stack([data[s:s + seq_len + 1] for s in starts]).astype(np.int64))


def eval_windows(data: np.ndarray, seq_len: int, n: int) -> torch.Tensor:
    """``n`` evenly spaced windows of ``seq_len + 1`` bytes (deterministic; the same for every model)."""
    starts = np.linspace(0, len(data) - seq_len - 2, n).astype(np.int64)
    return torch.from_numpy(np.stack([data[s:s + seq_len + 1] for s in starts]).astype(np.int64))


def closing_probe(data: np.ndarray, n: int, seq_len: int = 64, seed: int = 0
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The structural-completion probe as multiple choice (card, Controls and risks: C3).

    Positions of the test stream whose next byte is one of ``)``, ``]``, ``'``, ``"``; for each, the ``seq_len``
    bytes before it, the right byte and its alternative in the same pair (``)``↔``]``, ``'``↔``"``). Class-balanced:
    the same number of items of each of the four bytes, at most ``n // 4`` each (the rarest byte may give fewer),
    drawn with a seeded generator. Returns (contexts [N, seq_len], targets [N], alternatives [N])."""
    rng = np.random.default_rng(seed)
    per = n // 4
    avail = {}
    for a, b in PROBE_PAIRS:
        for c in (a, b):
            pos = np.flatnonzero(data[seq_len:] == c) + seq_len
            avail[c] = pos
    per = min(per, *(len(p) for p in avail.values()))
    ctx, tgt, alt = [], [], []
    for a, b in PROBE_PAIRS:
        for c, other in ((a, b), (b, a)):
            pos = np.sort(rng.choice(avail[c], size=per, replace=False))
            ctx += [data[p - seq_len:p] for p in pos]
            tgt += [c] * per
            alt += [other] * per
    return (torch.from_numpy(np.stack(ctx).astype(np.int64)), torch.tensor(tgt), torch.tensor(alt))


def unigram_entropy(data: np.ndarray) -> float:
    """Entropy of the byte frequencies of ``data`` in nats/byte (the loss of the best context-free model)."""
    p = np.bincount(data, minlength=256).astype(float)
    p = p[p > 0] / p.sum()
    return float(-(p * np.log(p)).sum())
