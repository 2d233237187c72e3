"""The backbone every method of chapter 19 shares: TS2Vec's dilated convolution encoder as PULSE uses it
(official ``pulse/encoder.py``, adapted there from REBAR / TS2Vec).

x (B, T, C) -> input linear -> ``depth`` residual blocks (GELU, two same-padded dilated convs, dilation 2^i)
-> a final block to the embedding size -> LayerNorm -> per-step features H (B, T, e); the *system code*
c = max_t H (B, e) is what every downstream probe reads.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class SamePadConv(nn.Module):
    """Conv1d whose output has the input's length (symmetric padding of the receptive field)."""

    def __init__(self, c_in: int, c_out: int, kernel_size: int = 3, dilation: int = 1) -> None:
        super().__init__()
        rf = (kernel_size - 1) * dilation + 1
        self.conv = nn.Conv1d(c_in, c_out, kernel_size, padding=rf // 2, dilation=dilation)
        self.remove = 1 if rf % 2 == 0 else 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv(x)
        return out[:, :, : -self.remove] if self.remove else out


class ConvBlock(nn.Module):
    """Residual block: x + conv2(gelu(conv1(gelu(x)))), with a 1x1 projection when shapes change or final."""

    def __init__(self, c_in: int, c_out: int, dilation: int, final: bool = False) -> None:
        super().__init__()
        self.conv1 = SamePadConv(c_in, c_out, 3, dilation)
        self.conv2 = SamePadConv(c_out, c_out, 3, dilation)
        self.projector = nn.Conv1d(c_in, c_out, 1) if (c_in != c_out or final) else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        res = x if self.projector is None else self.projector(x)
        return self.conv2(F.gelu(self.conv1(F.gelu(x)))) + res


class DilatedConvEncoder(nn.Module):
    """The shared encoder E: returns (pooled system code c (B, e), per-step features H (B, T, e))."""

    def __init__(self, in_ch: int, hidden: int = 16, emb: int = 32, depth: int = 4) -> None:
        super().__init__()
        self.in_ch, self.hidden, self.emb, self.depth = in_ch, hidden, emb, depth
        self.input_fc = nn.Linear(in_ch, hidden)
        chans = [hidden] * depth + [emb]
        self.blocks = nn.Sequential(*[
            ConvBlock(chans[i - 1] if i > 0 else hidden, chans[i], dilation=2 ** i, final=(i == len(chans) - 1))
            for i in range(len(chans))])
        self.norm = nn.LayerNorm(emb)

    def per_step(self, x: torch.Tensor) -> torch.Tensor:
        """H = LayerNorm(blocks(input_fc(x))), (B, T, e)."""
        h = self.input_fc(x).transpose(1, 2)
        return self.norm(self.blocks(h).transpose(1, 2))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        H = self.per_step(x)
        return H.max(dim=1).values, H
