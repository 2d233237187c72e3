"""PULSE: pretraining by cross-reconstruction from a system code (the paper's Sec. 4; official
``trainers/pulse.py``, ``trainers/pulse_oracle.py`` and ``pulse/*.py``).

A window x (B, T, C) is encoded once, H = E(x) (B, T, e), and its *system code* c = max_t H is the only
thing the downstream probe sees. A small decoder must rebuild a trajectory from

* c, repeated at every step (it cannot tell *when* or *where* the trajectory is),
* a low-dimensional time-varying drive d = pool(Conv(H)) (``tv_dim`` channels, max-pooled to
  ``T // pool_denom`` steps and upsampled: it carries slow non-stationarity only),
* an initial state h0 = InitConv(x)[t0] read from a tiny neighbourhood of x(t0) (receptive field t0 +- 3),

by a GRU started at h0 whose input at step k is [c, d_{t0+1+k}] and whose output predicts x_{t0+1+k}.
Because c must serve reconstructions from other starts t0 (the "relaxed" cross-reconstruction the released
code trains: ``n_init_samples`` random t0 in {0 .. T-R-1} plus t0 = 0), storing the window's own state in c
does not help; the dynamics (the system) does.

Variants (``variant=``):
  ``"pulse"``  -- the released objective above; loss = 1/2 [mean over random-start passes + the t0 = 0 pass].
  ``"xwin"``   -- label-free cross-window: c from window w1, h0, d and the target from a non-overlapping window
                  w2 of the same recording.
  ``"oracle"`` -- analysis upper bound (uses labels): c from window A, h0, d and the target from a window B of
                  the same class but another trajectory; one t0 = 0 pass and no input dropout, as the official
                  oracle trainer. The official default reads h0 from A's raw window (only its ``shared_f_init``
                  variant reads B); we read it from B, the ideal cross-reconstruction of the theory.

Masking follows ``utils/common.py`` (``get_pred_true``, ``shift_and_mask``): targets rolled by t0+1, the padded
tail masked, and the mean of each pass taken over its B x (T-1-min t0) x C entries *including* the masked
zeros, as the released code does. Exact speed-ups: E(x), the drive d and InitConv(x) are computed once per
batch (the repo recomputes E per pass; none of them has dropout or depends on t0 before its output is
indexed) and all passes run as one GRU call (a GRU is causal, so padding a shorter pass to T-1 steps does
not change its valid outputs).
"""
from __future__ import annotations

import math
from typing import Literal

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .encoders import DilatedConvEncoder
from .generators import WindowSet
from .training import TrainLog, fit

Variant = Literal["pulse", "xwin", "oracle"]


class Conv1D(nn.Module):
    """Two convolutions with a ReLU between, channel-last in and out (official ``pulse/conv.py``).

    ``causal=True`` pads on the left only, so the output at t sees x[t - rf + 1 .. t] (the offered fix of the
    look-ahead: the symmetric version's h0 at t0 reads x[t0+1 .. t0+3], part of the target)."""

    def __init__(self, c_in: int, c_hidden: int, c_out: int, kernel_size: int = 3, dilation: int = 1,
                 groups: int = 1, padding_mode: str = "replicate", causal: bool = False) -> None:
        super().__init__()
        self.causal, self.mode = causal, padding_mode
        self.k, self.dil = kernel_size, dilation
        self.conv1 = nn.Conv1d(c_in, c_hidden, kernel_size)
        self.conv2 = nn.Conv1d(c_hidden, c_out, kernel_size, dilation=dilation, groups=groups)

    def _pad(self, x: torch.Tensor, dil: int) -> torch.Tensor:
        total = (self.k - 1) * dil
        left, right = (total, 0) if self.causal else (total // 2, total - total // 2)
        return F.pad(x, (left, right), mode=self.mode)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.transpose(1, 2)
        x = self.conv2(self._pad(torch.relu(self.conv1(self._pad(x, 1))), self.dil))
        return x.transpose(1, 2)


class InitConditionEncoder(nn.Module):
    """h0 = InitConv(x)[t0]: conv(k=3) -> ReLU -> grouped conv(k=3, dilation 2); receptive field t0 +- 3."""

    def __init__(self, in_ch: int, hidden: int, out: int, dilation: int = 2, causal: bool = False) -> None:
        super().__init__()
        self.proj = Conv1D(in_ch, hidden, out, 3, dilation, groups=math.gcd(hidden, out),
                           padding_mode="replicate", causal=causal)

    def forward(self, x: torch.Tensor, t0: torch.Tensor) -> torch.Tensor:
        feats = self.proj(x)  # (B, T, out)
        return feats[torch.arange(len(x)), t0]


class TimeVarying(nn.Module):
    """d = upsample(adaptive_maxpool(Conv(H), T // pool_denom)): a ``tv_dim``-channel slow drive."""

    def __init__(self, emb: int, tv_dim: int = 1, pool_denom: int = 50) -> None:
        super().__init__()
        self.conv = Conv1D(emb, tv_dim, tv_dim, 3, 1, groups=tv_dim, padding_mode="reflect")
        self.pool_denom = pool_denom

    def forward(self, H: torch.Tensor) -> torch.Tensor:
        x = self.conv(H).transpose(1, 2)  # (B, tv, T)
        T = x.shape[-1]
        n = max(1, T // self.pool_denom)
        o = F.adaptive_max_pool1d(x, n)
        if n != T:
            o = F.interpolate(o, size=T, mode="nearest")
        return o.transpose(1, 2)


class ReconstructionGRU(nn.Module):
    """GRU (``layers`` layers) over inputs [c, d_{t0+1+k}], then an MLP to x_{t0+1+k}. The first layer starts at
    h0, the others at 0 (the official ``pulse/gru.py``)."""

    def __init__(self, in_dim: int, hidden: int, out_ch: int, layers: int = 1) -> None:
        super().__init__()
        self.layers = layers
        self.gru = nn.GRU(in_dim, hidden, num_layers=layers, batch_first=True)
        self.out = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, out_ch))

    def forward(self, inputs: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
        h = h0.unsqueeze(0)
        if self.layers > 1:
            h = torch.cat([h, h.new_zeros(self.layers - 1, *h0.shape)])
        hs, _ = self.gru(inputs, h.contiguous())
        return self.out(hs)


def shift_and_mask(x: torch.Tensor, t0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of ``x`` (B, T, C) rolled so step k holds x[t0 + 1 + k], for k = 0 .. T-2, and the mask of
    valid steps (k < T - 1 - t0); invalid (padded) steps are zero. Returns (B, T-1, C) and (B, T-1, 1)."""
    B, T, C = x.shape
    k = torch.arange(T - 1)
    src = t0[:, None] + 1 + k[None, :]
    valid = (src <= T - 1)
    gathered = torch.gather(x, 1, src.clamp(max=T - 1)[:, :, None].expand(B, T - 1, C))
    m = valid[:, :, None].to(x.dtype)
    return gathered * m, m


class PULSE(nn.Module):
    """PULSE's encoder and pretraining heads; ``loss(idx, data, gen)`` is the training objective."""

    def __init__(self, in_ch: int, hidden: int = 16, emb: int = 32, depth: int = 4, gru_hidden: int = 32,
                 init_hidden: int = 32, tv_dim: int = 1, pool_denom: int = 50, n_init_samples: int = 2,
                 sample_right_boundary: int = 50, variant: Variant = "pulse", dropout: float = 0.1,
                 causal_init: bool = False, gru_layers: int = 1) -> None:
        super().__init__()
        if variant not in ("pulse", "xwin", "oracle"):
            raise ValueError(f"variant must be 'pulse', 'xwin' or 'oracle'; got {variant!r}")
        self.encoder = DilatedConvEncoder(in_ch, hidden, emb, depth)
        self.init_encoder = InitConditionEncoder(in_ch, init_hidden, gru_hidden, dilation=2, causal=causal_init)
        self.tv = TimeVarying(emb, tv_dim, pool_denom)
        self.recon = ReconstructionGRU(emb + tv_dim, gru_hidden, in_ch, gru_layers)
        self.dropout = nn.Dropout(dropout if variant != "oracle" else 0.0)
        self.n_init_samples, self.R, self.variant = n_init_samples, sample_right_boundary, variant

    # ------------------------------------------------------------------ the objective
    def reconstruct(self, c: torch.Tensor, H_drive: torch.Tensor, x_target: torch.Tensor,
                    t0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Predictions, targets and mask (each (B, T-1, ·)) of one batched pass with starts ``t0``."""
        return self.decode(c, self.tv(H_drive), self.init_encoder.proj(x_target), x_target, t0)

    def decode(self, c: torch.Tensor, drive: torch.Tensor, init_feats: torch.Tensor, x_target: torch.Tensor,
               t0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`reconstruct` from the drive d = TimeVarying(H) (B, T, tv) and the initial-condition features
        InitConv(x_target) (B, T, gru) of whole windows, already computed: h0 is the row of ``init_feats`` at t0,
        d is rolled by t0 + 1 like the target."""
        d, _ = shift_and_mask(drive, t0)
        h0 = init_feats[torch.arange(len(t0)), t0]
        T = x_target.shape[1]
        inputs = torch.cat([c[:, None, :].expand(-1, T - 1, -1), d], dim=-1)
        pred = self.recon(self.dropout(inputs), h0)
        true, m = shift_and_mask(x_target, t0)
        return pred, true, m

    def draw_starts(self, B: int, T: int, gen: torch.Generator) -> list[torch.Tensor]:
        """t0 = 0 for the first pass, then ``n_init_samples`` passes with t0 ~ U{0 .. T-R-1} per window."""
        if self.variant == "oracle":
            return [torch.zeros(B, dtype=torch.long)]
        if T - self.R < 1:
            raise ValueError(f"sample_right_boundary ({self.R}) must be < the window length ({T})")
        return [torch.zeros(B, dtype=torch.long)] + [
            torch.randint(T - self.R, (B,), generator=gen) for _ in range(self.n_init_samples)]

    def objective(self, x_code: torch.Tensor, x_target: torch.Tensor, starts: list[torch.Tensor],
                  per_pass: bool = False) -> torch.Tensor:
        """1/2 [mean of the random-start pass losses + the t0 = 0 pass loss]; c from ``x_code``, h0, d and the
        target from ``x_target`` (the same tensor for the released objective). ``per_pass=True`` recomputes the
        encoder and runs one GRU call per pass, as the official code does (a check of the batched version)."""
        B, T, C = x_target.shape
        losses = []
        if per_pass:
            for t0 in starts:
                c, _ = self.encoder(x_code)
                H = self.encoder(x_target)[1] if x_target is not x_code else self.encoder(x_code)[1]
                pred, true, m = self.reconstruct(c, H, x_target, t0)
                L = int(T - 1 - t0.min())
                losses.append(((pred * m - true) ** 2).sum() / (B * L * C))
        else:
            c, H = self.encoder(x_code)
            if x_target is not x_code:
                H = self.encoder(x_target)[1]
            P = len(starts)
            t0 = torch.cat(starts)
            # the drive and InitConv read whole windows, so they are computed once per batch and each pass
            # picks its rows (the passes differ only by t0)
            drive, feats = self.tv(H), self.init_encoder.proj(x_target)
            rep = torch.arange(B).repeat(P)
            pred, true, m = self.decode(c[rep], drive[rep], feats[rep], x_target[rep], t0)
            sse = ((pred * m - true) ** 2).sum(dim=(1, 2)).view(P, B).sum(dim=1)
            L = torch.stack([T - 1 - s.min() for s in starts]).to(sse.dtype)
            losses = list(sse / (B * L * C))
        first = losses[0]
        rest = torch.stack(losses[1:]).mean() if len(losses) > 1 else torch.zeros(())
        if self.variant == "oracle":
            return first
        return 0.5 * (rest + first)

    def partners(self, idx: np.ndarray, data: WindowSet, gen: torch.Generator) -> torch.Tensor:
        """The window that supplies h0, d and the target for each window ``idx`` of ``data``."""
        T = data.X.shape[1]
        if self.variant == "xwin":  # a non-overlapping window of the same recording
            L = data.recordings.shape[1]
            if L < 2 * T:
                raise ValueError(f"PULSE-xwin needs recordings of >= 2 windows ({2 * T} samples); got {L}")
            out = []
            for i in idx:
                s1 = int(data.start[i])
                ok = np.r_[np.arange(0, max(0, s1 - T + 1)), np.arange(s1 + T, L - T + 1)]
                s2 = int(ok[torch.randint(len(ok), (1,), generator=gen)])
                out.append(data.recordings[data.rec[i], s2:s2 + T])
            return torch.as_tensor(np.stack(out))
        # oracle: a window of the same class from another recording
        out = []
        for i in idx:
            pool = np.flatnonzero((data.y == data.y[i]) & (data.rec != data.rec[i]))
            out.append(data.X[pool[int(torch.randint(len(pool), (1,), generator=gen))]])
        return torch.as_tensor(np.stack(out))

    def loss(self, idx: np.ndarray, data: WindowSet, gen: torch.Generator) -> torch.Tensor:
        x = torch.as_tensor(data.X[idx])
        target = x if self.variant == "pulse" else self.partners(idx, data, gen)
        return self.objective(x, target, self.draw_starts(len(idx), x.shape[1], gen))

    @torch.no_grad()
    def reconstruct_windows(self, X: np.ndarray, t0: int = 0, X_target: np.ndarray | None = None) -> np.ndarray:
        """x_hat[t0+1 ..] of windows X (no dropout): c from X, the rest from ``X_target`` (default X)."""
        self.eval()
        x = torch.as_tensor(X)
        xt = x if X_target is None else torch.as_tensor(X_target)
        c, _ = self.encoder(x)
        H = self.encoder(xt)[1]
        pred, _, m = self.reconstruct(c, H, xt, torch.full((len(x),), t0, dtype=torch.long))
        return (pred * m).numpy()


def train_pulse(data: WindowSet, variant: Variant = "pulse", *, epochs: int = 5, batch_size: int = 64,
                lr: float = 1e-3, seed: int = 0, **model_kw) -> tuple[PULSE, TrainLog]:
    """Build and train a PULSE model of the given variant on ``data`` (the training windows)."""
    torch.manual_seed(seed)
    model = PULSE(data.X.shape[2], variant=variant, **model_kw)
    log = fit(model, data, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed)
    return model, log
