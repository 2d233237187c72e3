"""Greedy decoding of the two tasks and the per-count / per-regime metrics of the chapter."""
from __future__ import annotations

import numpy as np
import torch

from .tasks import DIGITS, F_ID, T_ID, Batch

REGIMES = ("ID", "VX", "FX")


def _forward(model, ids, patches):
    """Decoder logits and states for a string batch (``model`` a Decoder) or an image batch (a VLM)."""
    if patches is None:
        dec = getattr(model, "decoder", model)
        return dec(ids)
    return model(ids, patches)


@torch.no_grad()
def generate_count(model, batch: Batch, chunk: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """Greedy two-digit answer (argmax over the ten digit tokens at each step) for a NUM batch.
    Returns (predicted counts ``[B]``, decoder state at the answer position ``[B, d]``: the ``<SEP>`` state
    from which the first digit is read)."""
    model.eval()
    preds, states = [], []
    dig = torch.as_tensor(DIGITS)
    for s in range(0, batch.ids.shape[0], chunk):
        ids = batch.ids[s:s + chunk, :-1].clone()           # up to <SEP>
        pt = None if batch.patches is None else batch.patches[s:s + chunk]
        logits, h = _forward(model, ids, pt)
        d1 = logits[:, -1, dig].argmax(-1)
        ids2 = torch.cat([ids, dig[d1][:, None]], 1)
        logits2, _ = _forward(model, ids2, pt)
        d2 = logits2[:, -1, dig].argmax(-1)
        preds.append((10 * d1 + d2).numpy())
        states.append(h[:, -1].numpy())
    return np.concatenate(preds), np.concatenate(states)


@torch.no_grad()
def answer_equal(model, batch: Batch, chunk: int = 512) -> np.ndarray:
    """Greedy T/F (argmax over the two answer tokens) for an EQ batch: True means "equal"."""
    model.eval()
    out = []
    for s in range(0, batch.ids.shape[0], chunk):
        pt = None if batch.patches is None else batch.patches[s:s + chunk]
        logits, _ = _forward(model, batch.ids[s:s + chunk], pt)
        out.append((logits[:, -1, T_ID] > logits[:, -1, F_ID]).numpy())
    return np.concatenate(out)


def regime_of(n: np.ndarray, vision_boundary: int, text_boundary: int) -> np.ndarray:
    """'ID' (≤ vision boundary), 'VX' (≤ text boundary), 'FX' (beyond)."""
    n = np.asarray(n)
    return np.where(n <= vision_boundary, "ID", np.where(n <= text_boundary, "VX", "FX"))


def accuracy_by_count(n: np.ndarray, pred: np.ndarray, max_count: int) -> np.ndarray:
    """Exact-count accuracy for each count 0..max_count (NaN where no sample)."""
    out = np.full(max_count + 1, np.nan)
    for k in range(max_count + 1):
        m = n == k
        if m.any():
            out[k] = float((pred[m] == k).mean())
    return out


def regime_summary(n: np.ndarray, pred: np.ndarray, vision_boundary: int, text_boundary: int) -> dict:
    """Exact accuracy and MAE per regime: ``{"ID": {"acc":…, "mae":…}, …}`` (regimes with samples only)."""
    reg = regime_of(n, vision_boundary, text_boundary)
    out = {}
    for r in REGIMES:
        m = reg == r
        if m.any():
            out[r] = {"acc": float((pred[m] == n[m]).mean()), "mae": float(np.abs(pred[m] - n[m]).mean())}
    return out


def eq_accuracy_by_gap(n_board: np.ndarray, n_text: np.ndarray, said_equal: np.ndarray,
                       bins=((0, 0), (1, 1), (2, 2), (3, 4), (5, 8), (9, 99))) -> dict[str, float]:
    """Comparison accuracy by |count_text − count_board| bin (label 'lo–hi')."""
    gap = np.abs(np.asarray(n_text) - np.asarray(n_board))
    correct = said_equal == (gap == 0)
    out = {}
    for lo, hi in bins:
        m = (gap >= lo) & (gap <= hi)
        if m.any():
            out[f"{lo}" if lo == hi else f"{lo}–{hi}"] = float(correct[m].mean())
    return out
