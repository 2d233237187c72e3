"""The toy two-tower CLIP of chapter 07 and its contrastive pre-training (the stand-in for OpenAI CLIP).

Image tower: a small CNN (conv 3×3, 32 → conv 3×3 stride 2, 64 → FC 64; ≈85k parameters) on 8×8 digits.
Text tower: frozen all-MiniLM-L6-v2 sentence embeddings (384-d, :class:`~repro.dirichlet_clip.data.TextBank`)
followed by a trainable linear map 384 → 64. Both towers' outputs are L2-normalised; the zero-shot logits
are ``s · cos`` with ``s = exp(logit_scale)``, exactly CLIP's head (Radford et al. 2021), so the paper's
Dirichlet reparameterisation of the cosines (Sec. 4 of the UCAT paper) applies unchanged.

Pre-training is CLIP's symmetric InfoNCE over (image, caption) pairs, with a learnable temperature
initialised at 1/0.07 and clamped at 100, trained once and cached under ``data/cache/dirichlet_clip/``
keyed by a hash of everything it depends on.
"""
from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from repro.common.paths import cache_dir

from .data import SLUG, Splits, TextBank, caption_table

EMBED_DIM = 64
PRETRAIN_SEED = 0  # the toy CLIP is pre-trained once, whatever the chapter's seed (card: "cached")
PRETRAIN = dict(batch=256, lr=2e-3, init_scale=1 / 0.07, max_scale=100.0, shift=1, noise=0.05, caption_noise=0.15)
"""``caption_noise`` η: the probability that an image's caption names a uniformly drawn class instead of its own
(it may draw its own). Web alt-text is noisy; without it the toy CLIP is near-certain on clean digits (mean
normalised entropy ≈ 0.06 on T1/T2), so "an attack lowers the entropy" and a calibration anchor have nothing to
act on. With η the data itself carries aleatoric uncertainty: the Bayes posterior over the 10 captions' classes
puts 1 − η + η/10 on the true one."""
_VERSION = 2  # bump when the architecture or the training loop changes


class ImageEncoder(nn.Module):
    """φ_θ: (B, 1, 8, 8) in [0, 1] → (B, width) unnormalised image embedding."""

    def __init__(self, width: int = EMBED_DIM) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, stride=2, padding=1)
        self.fc = nn.Linear(64 * 4 * 4, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.conv1(x))
        h = F.relu(self.conv2(h))
        return self.fc(h.flatten(1))


class ToyCLIP(nn.Module):
    """Two towers and a logit scale: ``cos(x, G) = ⟨normalize(φ(x)), G⟩``, ``logits = s · cos``.

    ``G`` are the class prompts' normalised text embeddings (:meth:`text_features`), computed once per task.
    """

    def __init__(self, image_enc: ImageEncoder | None = None, text_dim: int = 384, width: int = EMBED_DIM,
                 logit_scale: float = PRETRAIN["init_scale"]) -> None:
        super().__init__()
        self.image_enc = image_enc or ImageEncoder(width)
        self.text_proj = nn.Linear(text_dim, width, bias=False)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(logit_scale)))

    @property
    def scale(self) -> float:
        """s = exp(logit_scale), as a Python float."""
        return float(self.logit_scale.detach().exp())

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Unnormalised image embedding φ(x) (what FARE matches)."""
        return self.image_enc(x)

    def image_features(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.image_enc(x), dim=-1)

    def text_features(self, text_emb: torch.Tensor) -> torch.Tensor:
        """g = normalize(W_txt · MiniLM(t)) for (C, 384) sentence embeddings."""
        return F.normalize(self.text_proj(text_emb), dim=-1)

    def cos(self, x: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
        """(B, C) cosine similarities cos_k = ⟨f, g_k⟩."""
        return self.image_features(x) @ G.T

    def logits(self, x: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
        """(B, C) zero-shot logits s · cos."""
        return self.logit_scale.exp() * self.cos(x, G)


def frozen_copy(model: ToyCLIP) -> ToyCLIP:
    """θ0: a deep copy with every parameter frozen (the anchor of UCAT, PMG-AFT, FARE)."""
    m0 = copy.deepcopy(model)
    for p in m0.parameters():
        p.requires_grad_(False)
    return m0


def augment(x: torch.Tensor, gen: torch.Generator, shift: int = 1, noise: float = 0.05) -> torch.Tensor:
    """Random ±``shift``-pixel translations (zero fill) and Gaussian noise σ=``noise``, clipped to [0, 1]."""
    B, _, H, W = x.shape
    padded = F.pad(x, (shift, shift, shift, shift))
    k = 2 * shift + 1
    off = torch.randint(0, k * k, (B,), generator=gen)
    out = torch.empty_like(x)
    for o in range(k * k):
        idx = (off == o).nonzero(as_tuple=True)[0]
        if len(idx):
            dy, dx = divmod(o, k)
            out[idx] = padded[idx, :, dy:dy + H, dx:dx + W]
    if noise > 0:
        out = out + noise * torch.randn(out.shape, generator=gen)
    return out.clamp(0.0, 1.0)


def noisy_caption_classes(y: torch.Tensor, eta: float, gen: torch.Generator, n_classes: int = 10) -> torch.Tensor:
    """The class each caption names: ``y``, except with probability ``eta`` a uniform draw over the classes."""
    flip = torch.rand(y.shape, generator=gen) < eta
    other = torch.randint(0, n_classes, y.shape, generator=gen)
    return torch.where(flip, other, y)


@dataclass
class PretrainResult:
    model: ToyCLIP
    losses: np.ndarray       # InfoNCE loss per step
    scales: np.ndarray       # logit scale s per step
    seconds: float           # CPU-free wall time of the training (0 when loaded from the cache)
    from_cache: bool
    path: str


def pretrain_key(steps: int) -> str:
    """Hash of everything the pre-trained model depends on (the cache key)."""
    spec = dict(steps=steps, seed=PRETRAIN_SEED, version=_VERSION, width=EMBED_DIM, captions=caption_table(),
                **PRETRAIN)
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def pretrain_clip(splits: Splits, bank: TextBank, steps: int, *, use_cache: bool = True) -> PretrainResult:
    """Contrastive pre-training on the train split (all 10 classes, every caption template), or the cached model.

    Each step draws 256 training images (with replacement), one random template per image, and minimises
    CLIP's symmetric InfoNCE ½[CE(s·F Gᵀ, I) + CE(s·G Fᵀ, I)] with Adam (lr 2e-3); s is learned and clamped at 100.
    """
    key = pretrain_key(steps)
    path = cache_dir(SLUG) / f"toyclip-{key}.pt"
    table = caption_table()
    n_t = len(table)
    text_emb = bank.embed([c for row in table for c in row]).reshape(n_t, 10, -1)  # (templates, classes, 384)
    with torch.random.fork_rng():
        torch.manual_seed(PRETRAIN_SEED)
        model = ToyCLIP(text_dim=text_emb.shape[-1])
    if use_cache and path.exists():
        state = torch.load(path, weights_only=True)
        model.load_state_dict(state["model"])
        return PretrainResult(model, state["losses"].numpy(), state["scales"].numpy(), 0.0, True, str(path))

    gen = torch.Generator().manual_seed(PRETRAIN_SEED)
    x_all, y_all = torch.from_numpy(splits.x_train), torch.from_numpy(splits.y_train)
    opt = torch.optim.Adam(model.parameters(), lr=PRETRAIN["lr"])
    max_log = math.log(PRETRAIN["max_scale"])
    losses, scales = np.empty(steps), np.empty(steps)
    t0 = time.perf_counter()
    target = torch.arange(PRETRAIN["batch"])
    for step in range(steps):
        idx = torch.randint(0, len(y_all), (PRETRAIN["batch"],), generator=gen)
        tmpl = torch.randint(0, n_t, (PRETRAIN["batch"],), generator=gen)
        x = augment(x_all[idx], gen, PRETRAIN["shift"], PRETRAIN["noise"])
        y_cap = noisy_caption_classes(y_all[idx], PRETRAIN["caption_noise"], gen)
        f = model.image_features(x)
        g = model.text_features(text_emb[tmpl, y_cap])
        logits = model.logit_scale.exp() * f @ g.T
        loss = 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        with torch.no_grad():
            model.logit_scale.clamp_(max=max_log)
        losses[step], scales[step] = loss.item(), model.scale
    seconds = time.perf_counter() - t0
    state = {"model": model.state_dict(), "losses": torch.from_numpy(losses), "scales": torch.from_numpy(scales)}
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
    return PretrainResult(model, losses, scales, seconds, False, str(path))
