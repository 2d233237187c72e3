"""Data, the autoencoder, the oracle "human" reward and the oracle-labelled preference pairs (card *Setting*).

* Digits: scikit-learn's ``load_digits`` (1,797 images of 8×8, pixels / 16), shipped inside the pinned package.
* Autoencoder 64 → 128 → 16 → 128 → 64 (sigmoid output), trained with light Gaussian noise on the code so that
  the decoder is smooth around it; the latents are standardized, which makes the generator a *latent* model.
* Oracle reward r*(x, y) = z(log p_O(y | x)) + 0.5 · z(q(x)): p_O is a CNN trained on real digits ("prompt
  alignment"), q the negative total variation ("stroke cleanliness"); z(·) standardizes over base-generator samples,
  so that the annotator noise s_h has a fixed meaning. It is differentiable (ReFL with the oracle itself).
* Pairs: two base-generator samples for one prompt; label a ≻ b with P = Φ((r*_a − r*_b)/s_h).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from repro.common.paths import cache_dir

from . import flow as flow_module
from .flow import LatentFlowMLP, sample, train_flow


def load_digits01() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits as float32 pixels in [0, 1], shape (1797, 64), and labels (1797,)."""
    from sklearn.datasets import load_digits

    d = load_digits()
    return (d.data / 16.0).astype(np.float32), d.target.astype(np.int64)


# ----------------------------------------------------------------------------- autoencoder

class AE(nn.Module):
    """64 → 16 → 64 MLP autoencoder; ``encode``/``decode`` work in the *standardized* latent."""

    def __init__(self, latent: int = 16, width: int = 128) -> None:
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(64, width), nn.SiLU(), nn.Linear(width, latent))
        self.dec = nn.Sequential(nn.Linear(latent, width), nn.SiLU(), nn.Linear(width, 64))
        self.register_buffer("mu", torch.zeros(latent))
        self.register_buffer("sd", torch.ones(latent))

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return (self.enc(x) - self.mu) / self.sd

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Pixels in (0, 1), shape (n, 64)."""
        return torch.sigmoid(self.dec(z * self.sd + self.mu))


def train_autoencoder(X: torch.Tensor, latent: int = 16, steps: int = 2000, seed: int = 0, batch: int = 256,
                      code_noise: float = 0.1, lr: float = 2e-3) -> AE:
    """MSE autoencoder with Gaussian noise of std ``code_noise`` (relative to the code's scale) on the code."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    ae = AE(latent)
    opt = torch.optim.Adam(ae.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(steps, 1))
    for _ in range(steps):
        x = X[torch.randint(0, X.shape[0], (batch,), generator=gen)]
        code = ae.enc(x)
        code = code + code_noise * code.detach().std(0) * torch.randn(code.shape, generator=gen)
        loss = F.binary_cross_entropy_with_logits(ae.dec(code), x)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
    with torch.no_grad():
        code = ae.enc(X)
        ae.mu.copy_(code.mean(0))
        ae.sd.copy_(code.std(0) + 1e-6)
    return ae.eval()


# ----------------------------------------------------------------------------- oracle

class DigitCNN(nn.Module):
    """The oracle's classifier p_O(y | x) on 8×8 images (two 3×3 convolutions, pooling, a linear layer)."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(1, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.silu(self.c1(x.view(-1, 1, 8, 8)))
        h = F.avg_pool2d(F.silu(self.c2(h)), 2)
        return self.fc(h.flatten(1))


def train_oracle_classifier(X: torch.Tensor, y: torch.Tensor, steps: int = 800, seed: int = 0,
                            batch: int = 256) -> DigitCNN:
    """Cross-entropy on real digits with light pixel noise (so that it also reads generated digits)."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    clf = DigitCNN()
    opt = torch.optim.Adam(clf.parameters(), lr=2e-3)
    for _ in range(steps):
        idx = torch.randint(0, X.shape[0], (batch,), generator=gen)
        x = (X[idx] + 0.05 * torch.randn(batch, 64, generator=gen)).clamp(0, 1)
        loss = F.cross_entropy(clf(x), y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return clf.eval()


def total_variation(x: torch.Tensor) -> torch.Tensor:
    """Anisotropic total variation of 8×8 images: Σ |x[i+1,j] − x[i,j]| + Σ |x[i,j+1] − x[i,j]|."""
    im = x.view(-1, 8, 8)
    return (im[:, 1:] - im[:, :-1]).abs().sum((1, 2)) + (im[:, :, 1:] - im[:, :, :-1]).abs().sum((1, 2))


class OracleReward(nn.Module):
    """r*(x, y) = z_y(log p_O(y|x)) + beta · z_y(−TV(x)), standardized over base-generator samples of prompt y.

    Decision: the standardization is per prompt. Pairs are always two samples of one prompt, so only the
    within-prompt spread of r* matters, and it is what gives the annotator noise s_h its fixed meaning; a global
    z-score would let between-digit differences in stroke length (a "1" has less total variation than an "8") set
    the scale. ``clip_logp`` clips log p_O before standardizing (card, Controls and risks).
    """

    def __init__(self, classifier: DigitCNN, beta: float = 0.5, clip_logp: float | None = None,
                 n_classes: int = 10) -> None:
        super().__init__()
        self.clf, self.beta, self.clip_logp = classifier, beta, clip_logp
        for p in self.clf.parameters():
            p.requires_grad_(False)
        self.register_buffer("stats", torch.tensor([[0.0, 1.0, 0.0, 1.0]] * n_classes))

    def parts(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logp = F.log_softmax(self.clf(x), dim=1).gather(1, y[:, None])[:, 0]
        if self.clip_logp is not None:
            logp = logp.clamp(min=self.clip_logp)
        return logp, -total_variation(x)

    def fit(self, x: torch.Tensor, y: torch.Tensor) -> "OracleReward":
        """Standardize both parts per prompt over the samples ``x`` (base-generator images of prompts ``y``)."""
        with torch.no_grad():
            a, q = self.parts(x, y)
            for c in range(self.stats.shape[0]):
                m = y == c
                if m.sum() > 1:
                    self.stats[c] = torch.stack([a[m].mean(), a[m].std() + 1e-8, q[m].mean(), q[m].std() + 1e-8])
        return self

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        a, q = self.parts(x, y)
        m1, s1, m2, s2 = self.stats[y].unbind(1)
        return (a - m1) / s1 + self.beta * (q - m2) / s2


# ----------------------------------------------------------------------------- shared models, cached

@dataclass
class Shared:
    """The models every seed shares: autoencoder, oracle, base generator (trained once with seed 0)."""

    ae: AE
    oracle: OracleReward
    gen: LatentFlowMLP
    info: dict


def _key(d: dict) -> str:
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def _save_atomic(obj: dict, path: Path) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.close(fd)
    torch.save(obj, tmp)
    os.replace(tmp, path)


def build_shared(ae_steps: int, oracle_steps: int, gen_steps: int, cfg_scale: float, n_sample_steps: int,
                 use_cache: bool = True, n_fit: int = 4096, small_dr: float = 0.25,
                 small_frac_max: float = 0.40) -> Shared:
    """Train (or load from ``data/cache/dina_lrm/``, keyed by the arguments and a hash of this module's and
    ``flow``'s code) the autoencoder, oracle classifier and generator.

    The oracle is standardized over ``n_fit`` base-generator samples. Clipping of log p_O is decided from those
    samples by the card's rule: if more than 40 % of random same-prompt pairs have |Δr*| < 0.25, clip at −5.
    """
    code = hashlib.sha256(b"".join(Path(m).read_bytes() for m in (__file__, flow_module.__file__))).hexdigest()[:12]
    conf = dict(ae_steps=ae_steps, oracle_steps=oracle_steps, gen_steps=gen_steps, cfg_scale=cfg_scale,
                n_sample_steps=n_sample_steps, n_fit=n_fit, code=code)
    path = cache_dir("dina_lrm") / f"shared-{_key(conf)}.pt"
    X, y = load_digits01()
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    if use_cache and path.exists():
        blob = torch.load(path, weights_only=False)
        ae, clf, gen = AE(), DigitCNN(), LatentFlowMLP()
        ae.load_state_dict(blob["ae"]), clf.load_state_dict(blob["clf"]), gen.load_state_dict(blob["gen"])
        oracle = OracleReward(clf, clip_logp=blob["clip_logp"])
        oracle.load_state_dict(blob["oracle"])
        info = dict(blob["info"], source="cache")
        return Shared(ae.eval(), oracle.eval(), gen.eval(), info)
    ae = train_autoencoder(Xt, steps=ae_steps, seed=0)
    clf = train_oracle_classifier(Xt, yt, steps=oracle_steps, seed=0)
    with torch.no_grad():
        z = ae.encode(Xt)
        recon_mse = float((ae.decode(z) - Xt).pow(2).mean())
        clf_acc = float((clf(Xt).argmax(1) == yt).float().mean())
    gen = train_flow(z, yt, steps=gen_steps, seed=0)
    g = torch.Generator().manual_seed(12345)
    yf = torch.randint(0, 10, (n_fit,), generator=g)
    with torch.no_grad():
        xf = ae.decode(sample(gen, yf, n_sample_steps, cfg_scale, gen=g)[0])
        oracle = OracleReward(clf).fit(xf, yf)
        r = oracle(xf, yf)
        order = torch.argsort(yf, stable=True)           # consecutive same-prompt samples form pairs
        rs, ys = r[order], yf[order]
        same = ys[0::2][: rs[1::2].shape[0]] == ys[1::2]
        small_unclipped = float(((rs[0::2][: rs[1::2].shape[0]] - rs[1::2]).abs()[same] < small_dr).float().mean())
        clip = -5.0 if small_unclipped > small_frac_max else None
        oracle = OracleReward(clf, clip_logp=clip).fit(xf, yf)
        gen_acc = float((clf(xf).argmax(1) == yf).float().mean())
    info = dict(recon_mse=recon_mse, oracle_train_acc=clf_acc, gen_oracle_acc=gen_acc,
                small_dr_frac_unclipped=small_unclipped, clip_logp=clip, source="trained")
    if use_cache:
        _save_atomic(dict(ae=ae.state_dict(), clf=clf.state_dict(), gen=gen.state_dict(),
                          oracle=oracle.state_dict(), clip_logp=clip, info=info), path)
    return Shared(ae, oracle, gen, info)


# ----------------------------------------------------------------------------- preference pairs

@dataclass
class PairSet:
    """Pairs (z_a, z_b) of one prompt y with oracle rewards and a sampled label (1: a ≻ b)."""

    z_a: torch.Tensor
    z_b: torch.Tensor
    y: torch.Tensor
    r_a: torch.Tensor
    r_b: torch.Tensor
    label: torch.Tensor

    def __len__(self) -> int:
        return int(self.y.shape[0])

    @property
    def dr(self) -> torch.Tensor:
        """Δr* = r*_a − r*_b."""
        return self.r_a - self.r_b


def make_preference_pairs(shared: Shared, n: int, s_h: float, seed: int, steps: int = 20,
                          cfg_scale: float = 1.5, pool_frac: float = 0.6, chunk: int = 4096) -> PairSet:
    """n pairs of base-generator samples of one prompt, labelled by Thurstone annotators, P = Φ(Δr*/s_h).

    Decision (budget): the pairs are drawn from a pool of ⌈pool_frac · n⌉ samples (two distinct samples of the
    same prompt per pair), as a preference data set holds several images per prompt; sampling two fresh latents
    per pair would cost 3× more.
    """
    g = torch.Generator().manual_seed(seed)
    m = max(20, int(math.ceil(pool_frac * n)))
    y_pool = torch.arange(m) % 10
    with torch.no_grad():
        z_pool = torch.cat([sample(shared.gen, y_pool[i:i + chunk], steps, cfg_scale, gen=g)[0]
                            for i in range(0, m, chunk)])
        r_pool = shared.oracle(shared.ae.decode(z_pool), y_pool)
    y = torch.randint(0, 10, (n,), generator=g)
    per = [torch.nonzero(y_pool == c)[:, 0] for c in range(10)]
    ia, ib = torch.empty(n, dtype=torch.long), torch.empty(n, dtype=torch.long)
    for c in range(10):
        sel = torch.nonzero(y == c)[:, 0]
        k = per[c].shape[0]
        a = torch.randint(0, k, (sel.shape[0],), generator=g)
        b = (a + torch.randint(1, k, (sel.shape[0],), generator=g)) % k     # a different sample of the prompt
        ia[sel], ib[sel] = per[c][a], per[c][b]
    r_a, r_b = r_pool[ia], r_pool[ib]
    p = torch.distributions.Normal(0.0, 1.0).cdf((r_a - r_b) / s_h)
    label = (torch.rand(n, generator=g) < p).float()
    return PairSet(z_pool[ia], z_pool[ib], y, r_a, r_b, label)
