"""Multi-round baselines on single-head models (card, *Baselines*): FedAvg (McMahan et al. 2017) and FairFed
(Ezzeldin et al., AAAI 2023), ``rounds`` rounds of ``round_steps`` local Adam steps (fresh optimiser state each
round; the card's risk section raised 10 to 50 steps so that 20-round FedAvg is not under-trained).

FairFed re-weights the sites every round. With F the equal-opportunity gap of the current global model
(max_g TPR_g − min_g TPR_g at 0.5) on the union of the training data (F_global) and on site k's data (F_k),
Δ_k = |F_k − F_global| — or, where F_k is undefined at a site (a group present in the federation has no
positive there), the accuracy gap |Acc_k − Acc_global|, as FairFed does. Then
w_k ← w_k − η_f (Δ_k − mean_k Δ_k), clipped at 0 and renormalised; the weights start at n_k / n.
"""
from __future__ import annotations

import numpy as np
import torch

from .aggregate import fedavg
from .local import Stacked, batch_indices, train_stack
from .models import Params, head_logits, stack


def _global_scores(p: Params, X: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        return torch.sigmoid(head_logits({n: t[None] for n, t in p.items()}, X[None]))[0].numpy()


def eo_gap(pred: np.ndarray, y: np.ndarray, g: np.ndarray, groups: list[int]) -> float:
    """max_g TPR_g − min_g TPR_g over ``groups``; NaN if one of them has no positive."""
    tpr = []
    for k in groups:
        m = (g == k) & (y == 1)
        if not m.any():
            return float("nan")
        tpr.append(pred[m].mean())
    return float(max(tpr) - min(tpr))


def fairfed_deltas(pred_sites, y_sites, g_sites, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Δ_k of FairFed for binary predictions at every site; also which sites used the accuracy fallback."""
    groups = list(range(n_groups))
    pred, y, g = (np.concatenate(a) for a in (pred_sites, y_sites, g_sites))
    present = [k for k in groups if ((g == k) & (y == 1)).any()]
    F_glob, acc_glob = eo_gap(pred, y, g, present), float((pred == y).mean())
    deltas, fallback = [], []
    for p, yy, gg in zip(pred_sites, y_sites, g_sites):
        F_k = eo_gap(p, yy, gg, present)
        if np.isnan(F_k):
            deltas.append(abs(float((p == yy).mean()) - acc_glob))
            fallback.append(True)
        else:
            deltas.append(abs(F_k - F_glob))
            fallback.append(False)
    return np.array(deltas), np.array(fallback)


def run_rounds(init: Params, sites, n_groups: int, rounds: int, round_steps: int, lr: float, seed: int,
               fairfed_eta: float | None = None) -> tuple[Params, dict]:
    """FedAvg (``fairfed_eta=None``) or FairFed over ``rounds`` rounds; returns the global model and a history
    (per-round site weights)."""
    data = Stacked.from_sites(sites)
    n = data.n.astype(float)
    w = n / n.sum()
    glob = {k: v.clone() for k, v in init.items()}
    history = {"weights": [w.copy()], "fallback": []}
    idx_all = batch_indices(data.n, rounds * round_steps, seed + 17)
    X_sites = [torch.as_tensor(s.X, dtype=torch.float32) for s in sites]
    for r in range(rounds):
        local = train_stack(stack(glob, len(sites)), data, idx_all[r * round_steps:(r + 1) * round_steps], "head", lr)
        if fairfed_eta is not None:
            preds = [(_global_scores(glob, X) >= 0.5).astype(int) for X in X_sites]
            deltas, fb = fairfed_deltas(preds, [s.y for s in sites], [s.g for s in sites], n_groups)
            w = np.clip(w - fairfed_eta * (deltas - deltas.mean()), 0, None)
            w = w / w.sum() if w.sum() > 0 else n / n.sum()
            history["weights"].append(w.copy())
            history["fallback"].append(fb.tolist())
        glob = fedavg(local, w)
    return glob, history
