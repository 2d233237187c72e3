"""What chapter 07 measures: accuracy, calibration (ECE, reliability bins) and uncertainty, clean and under attack.

* ECE (Guo et al. 2017): 15 equal-width bins of the softmax confidence max_k p_k, Σ_b (n_b/n)|acc_b − conf_b|.
* Predictive entropy H(p) of the softmax of s·cos, divided by log C so tasks with 2, 5 and 10 classes share
  one scale (the repo's ``entropy_from_logits`` does the same). This is the chapter's main "uncertainty".
* Dirichlet aleatoric uncertainty AU = E_{p~Dir(α)}[H(p)] = −Σ_k (α_k/α₀)(ψ(α_k+1) − ψ(α₀+1)), also / log C,
  with the repo's evaluation parameterisation α = exp(softplus(s·cos)) — float64, since exp overflows float32
  once s·cos > 88.
* Dirichlet strength α₀ = Σ_k α_k under the *training* parameterisation α = exp((cos+1)/τ) (figure 5).

:func:`evaluate_task` attacks the model it evaluates (white-box PGD on CE, fresh per model) and returns the
per-example arrays the figures need; :func:`summarize` turns them into one row of numbers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from .attacks import pgd_ce
from .losses import dirichlet_alpha


def ece(conf: np.ndarray, correct: np.ndarray, n_bins: int = 15) -> float:
    """Expected calibration error with ``n_bins`` equal-width confidence bins on [0, 1]."""
    conf, correct = np.asarray(conf, float), np.asarray(correct, float)
    bins = np.minimum((conf * n_bins).astype(int), n_bins - 1)  # bin b holds conf in [b/n, (b+1)/n)
    total = 0.0
    for b in range(n_bins):
        m = bins == b
        if m.any():
            total += m.mean() * abs(correct[m].mean() - conf[m].mean())
    return float(total)


def reliability_bins(conf: np.ndarray, correct: np.ndarray, n_bins: int = 15) -> dict[str, np.ndarray]:
    """Per-bin counts, mean confidence and accuracy (NaN for empty bins) for reliability diagrams."""
    conf, correct = np.asarray(conf, float), np.asarray(correct, float)
    bins = np.minimum((conf * n_bins).astype(int), n_bins - 1)
    count = np.bincount(bins, minlength=n_bins).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.bincount(bins, weights=correct, minlength=n_bins) / count
        mconf = np.bincount(bins, weights=conf, minlength=n_bins) / count
    edges = np.linspace(0, 1, n_bins + 1)
    return {"edges": edges, "count": count, "acc": acc, "conf": mconf}


def entropy(p: torch.Tensor | np.ndarray, normalize: bool = True) -> np.ndarray:
    """Shannon entropy of each row of probabilities, in nats, divided by log C when ``normalize``."""
    p = torch.as_tensor(p, dtype=torch.float64)
    h = -(p * torch.log(p.clamp_min(1e-300))).sum(-1)
    if normalize:
        h = h / math.log(p.shape[-1])
    return h.numpy()


def dirichlet_expected_entropy(alpha: torch.Tensor) -> torch.Tensor:
    """E_{p~Dir(α)}[H(p)] = −Σ_k (α_k/α₀)(ψ(α_k+1) − ψ(α₀+1)), in nats, float64, per row."""
    a = alpha.double()
    a0 = a.sum(-1, keepdim=True)
    return -((a / a0) * (torch.digamma(a + 1) - torch.digamma(a0 + 1))).sum(-1)


def eval_alpha(logits: torch.Tensor) -> torch.Tensor:
    """The repo's evaluation concentration α = 1e-6 + exp(softplus(s·cos)), in float64."""
    return 1e-6 + torch.exp(F.softplus(logits.double()))


@dataclass
class TaskEval:
    """Per-example outputs of one model on one task, clean and under the evaluation attack."""

    task: str
    n_classes: int
    labels: np.ndarray
    cos_clean: np.ndarray
    cos_adv: np.ndarray
    scale: float

    def _probs(self, cos: np.ndarray) -> np.ndarray:
        return torch.softmax(torch.as_tensor(self.scale * cos, dtype=torch.float64), -1).numpy()

    def view(self, which: str) -> dict[str, np.ndarray]:
        """Confidence, correctness, normalised entropy and AU of the ``clean`` or ``adv`` predictions."""
        cos = self.cos_clean if which == "clean" else self.cos_adv
        p = self._probs(cos)
        au = dirichlet_expected_entropy(eval_alpha(torch.as_tensor(self.scale * cos))).numpy()
        return {"conf": p.max(1), "correct": p.argmax(1) == self.labels, "entropy": entropy(p),
                "au": au / math.log(self.n_classes)}

    def strength(self, which: str, tau: float) -> np.ndarray:
        """Dirichlet strength α₀ = Σ_k exp((cos_k+1)/τ) of each example (training parameterisation)."""
        cos = self.cos_clean if which == "clean" else self.cos_adv
        return dirichlet_alpha(torch.as_tensor(cos), tau).sum(-1).numpy()


def evaluate_task(model, images: torch.Tensor, labels: torch.Tensor, G: torch.Tensor, *, eps: float, steps: int,
                  generator: torch.Generator | None, name: str = "") -> TaskEval:
    """Clean and PGD-``steps`` (L∞ ``eps``, step ε/4, random start) outputs of ``model`` on one task."""
    x_adv = pgd_ce(model, images, labels, G, eps=eps, steps=steps, step_size=eps / 4, generator=generator)
    with torch.no_grad():
        cos_clean = model.cos(images, G).numpy()
        cos_adv = model.cos(x_adv, G).numpy()
    return TaskEval(name, G.shape[0], labels.numpy(), cos_clean, cos_adv, model.scale)


def summarize(ev: TaskEval) -> dict[str, float]:
    """One row: clean/robust accuracy, ECE, mean normalised entropy and mean normalised AU, clean and adv."""
    c, a = ev.view("clean"), ev.view("adv")
    return {
        "clean_acc": float(c["correct"].mean()), "rob_acc": float(a["correct"].mean()),
        "ece_clean": ece(c["conf"], c["correct"]), "ece_adv": ece(a["conf"], a["correct"]),
        "H_clean": float(c["entropy"].mean()), "H_adv": float(a["entropy"].mean()),
        "AU_clean": float(c["au"].mean()), "AU_adv": float(a["au"].mean()),
        "conf_clean": float(c["conf"].mean()), "conf_adv": float(a["conf"].mean()),
    }
