"""UnHype's hypernetwork H(c, k) -> LoRA factors, and the machinery that plugs LoRA factors into the backbone.

Paper, Sec. 3 ("Hypernetwork", "Hypernet Fields"); the algorithm as written in the authors' development code
(``hyper_lora.py``). Per adapted layer l (d_in -> d_out), input z = [c ; Fourier(k)]:

    alpha(k) = alpha_b + (k/K) alpha_learn                 (alpha_b = alpha_learn = alpha_init at start)
    A_l(c,k) = alpha(k) (A0_l + (k/K) L_l(z))               A0_l ~ U(0,1)/sqrt(r), fixed
    B_l(c,k) = (k/K) R_l(z)                                  so B(c,0) = 0 exactly
    y = W_l c + b_l + (c A_l) B_l                            (per-sample cap on ||(c A) B||, optional)

L_l, R_l are Linear(d_ctx + 32 -> hidden) - ReLU - Linear(hidden -> d_in r | r d_out). The "generated tensors" of
a layer are the tuple (alpha, A, B) with A already scaled by alpha, as in the repository: the removal and
retention losses compare these tuples.

:class:`LoRAContext` holds the factors currently in force (one set shared by a batch, or one per sample);
:func:`inject` swaps the target ``nn.Linear`` modules of a model for :class:`AdaptedLinear` wrappers that read it.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Iterator

import torch
import torch.nn as nn

Factors = dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]  # layer -> (alpha, A, B)


class TimeFourier(nn.Module):
    """Fourier features of the pseudo-time k: frequencies 2^j 2 pi / (K + 1), j < L, cos and sin."""

    def __init__(self, K: int, L: int = 16) -> None:
        super().__init__()
        self.register_buffer("freqs", (2.0 * math.pi / (K + 1)) * 2.0 ** torch.arange(L, dtype=torch.float32),
                             persistent=False)

    @property
    def dim(self) -> int:
        return 2 * self.freqs.numel()

    def forward(self, k: torch.Tensor) -> torch.Tensor:
        ang = k.to(self.freqs.dtype).reshape(-1, 1) * self.freqs
        return torch.cat([ang.cos(), ang.sin()], dim=-1)


class HyperLoRA(nn.Module):
    """The hypernetwork head of one layer: (c, k) -> (alpha, A, B) with A (N, d_in, r), B (N, r, d_out)."""

    def __init__(self, d_in: int, d_out: int, rank: int, d_ctx: int, K: int, internal: int = 32,
                 alpha_init: float = 1.0, gen: torch.Generator | None = None) -> None:
        super().__init__()
        self.d_in, self.d_out, self.rank, self.K = d_in, d_out, rank, K
        self.time = TimeFourier(K)
        a0 = torch.rand(d_in * rank, generator=gen) / math.sqrt(rank)
        self.register_buffer("A0", a0)
        self.register_buffer("alpha_b", torch.tensor(float(alpha_init)))
        self.alpha_learn = nn.Parameter(torch.tensor(float(alpha_init)))
        z = d_ctx + self.time.dim
        self.left = nn.Sequential(nn.Linear(z, internal), nn.ReLU(), nn.Linear(internal, d_in * rank))
        self.right = nn.Sequential(nn.Linear(z, internal), nn.ReLU(), nn.Linear(internal, rank * d_out))
        if gen is not None:  # H's init is part of what a seed re-draws
            with torch.no_grad():
                for lin in (*self.left, *self.right):
                    if isinstance(lin, nn.Linear):
                        bound = 1 / math.sqrt(lin.in_features)
                        lin.weight.copy_(torch.rand(lin.weight.shape, generator=gen) * 2 * bound - bound)
                        lin.bias.copy_(torch.rand(lin.bias.shape, generator=gen) * 2 * bound - bound)

    def factors(self, c: torch.Tensor, k: torch.Tensor | int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(alpha (N, 1), A (N, d_in, r), B (N, r, d_out)) for prompts ``c`` (N, d_ctx) at pseudo-times ``k``."""
        n = c.shape[0]
        k = torch.as_tensor(k, dtype=c.dtype).reshape(-1).expand(n)
        s = (k / self.K)[:, None]                                    # k / K
        z = torch.cat([c, self.time(k)], dim=-1)
        alpha = self.alpha_b + s * self.alpha_learn                  # (N, 1)
        A = alpha * (self.A0 + s * self.left(z))                     # (N, d_in r)
        B = s * self.right(z)                                        # (N, r d_out); exactly 0 at k = 0
        return alpha, A.view(n, self.d_in, self.rank), B.view(n, self.rank, self.d_out)


class HyperNet(nn.Module):
    """One :class:`HyperLoRA` per target layer; ``factors(c, k)`` returns all layers' tuples."""

    def __init__(self, shapes: dict[str, tuple[int, int]], rank: int, d_ctx: int, K: int, internal: int = 32,
                 alpha_init: float = 1.0, seed: int = 0) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.names = list(shapes)
        self.K = K
        self.heads = nn.ModuleList(HyperLoRA(di, do, rank, d_ctx, K, internal, alpha_init, gen)
                                   for di, do in shapes.values())

    def factors(self, c: torch.Tensor, k: torch.Tensor | int) -> Factors:
        return {name: h.factors(c, k) for name, h in zip(self.names, self.heads)}


def flat(factors: Factors) -> torch.Tensor:
    """All layers' (alpha, A, B) flattened per sample: (N, P), the vector the removal/retain losses compare."""
    parts = []
    for alpha, A, B in factors.values():
        n = A.shape[0]
        parts += [alpha.reshape(n, -1), A.reshape(n, -1), B.reshape(n, -1)]
    return torch.cat(parts, dim=1)


def delta_norms(factors: Factors) -> torch.Tensor:
    """||A_l B_l||_F per sample, summed over layers in quadrature: (N,). The "adapter norm" of claim C3(a)."""
    tot = 0.0
    for _, A, B in factors.values():
        tot = tot + (A @ B).pow(2).sum(dim=(1, 2))
    return tot.sqrt()


class LoRAContext:
    """The LoRA factors in force: ``{layer: (A, B)}`` with A (1 or N, d_in, r), B (1 or N, r, d_out).

    ``cap`` (None = off) limits each sample's LoRA output to ``cap`` times the norm of the base output of the
    same layer; the repository caps at an absolute 80, which has no meaning at our scale.
    """

    def __init__(self, cap: float | None = 3.0) -> None:
        self.factors: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self.enabled = True
        self.cap = cap

    def set(self, factors: Factors | dict[str, tuple[torch.Tensor, torch.Tensor]] | None) -> "LoRAContext":
        """Install factors (tuples (alpha, A, B) or (A, B)); ``None`` removes them."""
        self.factors = {} if factors is None else {n: (f[-2], f[-1]) for n, f in factors.items()}
        return self

    @contextmanager
    def no_lora(self) -> Iterator["LoRAContext"]:
        """Temporarily run the base layers only (the unconditional CFG branch, references)."""
        old = self.enabled
        self.enabled = False
        try:
            yield self
        finally:
            self.enabled = old

    @contextmanager
    def using(self, factors) -> Iterator["LoRAContext"]:
        """Temporarily install ``factors``."""
        old = self.factors
        self.set(factors)
        try:
            yield self
        finally:
            self.factors = old


def lora_delta(c: torch.Tensor, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """(c A) B for a batch c (N, d_in) with shared (1, ., .) or per-sample (N, ., .) factors."""
    if A.shape[0] == 1:
        return (c @ A[0]) @ B[0]
    return torch.bmm(torch.bmm(c.unsqueeze(1), A), B).squeeze(1)


def cap_update(delta: torch.Tensor, base: torch.Tensor, cap: float, eps: float = 1e-8) -> torch.Tensor:
    """Shrink each row of ``delta`` to norm <= cap * ||base row|| (never amplify)."""
    limit = cap * base.norm(dim=-1, keepdim=True)
    scale = (limit / delta.norm(dim=-1, keepdim=True).clamp(min=eps)).clamp(max=1.0)
    return delta * scale


class AdaptedLinear(nn.Module):
    """A frozen ``nn.Linear`` plus the LoRA update that ``ctx`` currently holds for ``name``."""

    def __init__(self, base: nn.Linear, name: str, ctx: LoRAContext) -> None:
        super().__init__()
        self.base, self.name, self.ctx = base, name, ctx

    @property
    def weight(self) -> torch.Tensor:
        return self.base.weight

    @property
    def bias(self) -> torch.Tensor:
        return self.base.bias

    def forward(self, c: torch.Tensor) -> torch.Tensor:
        y = self.base(c)
        f = self.ctx.factors.get(self.name) if self.ctx.enabled else None
        if f is None:
            return y
        A, B = f
        if A.shape[0] not in (1, c.shape[0]):
            raise ValueError(f"{self.name}: LoRA factors for {A.shape[0]} samples, input has {c.shape[0]}")
        d = lora_delta(c, A, B)
        if self.ctx.cap is not None:
            d = cap_update(d, y, self.ctx.cap)
        return y + d


def inject(model: nn.Module, target_names: list[str], ctx: LoRAContext) -> dict[str, tuple[int, int]]:
    """Wrap the named ``nn.Linear`` modules of ``model`` in :class:`AdaptedLinear` (idempotent).

    Returns {name: (d_in, d_out)} of the targets, the shapes a hypernetwork or static LoRA needs.
    """
    shapes = {}
    for name in target_names:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        mod = getattr(parent, child)
        if isinstance(mod, AdaptedLinear):
            mod.ctx = ctx
            mod = mod.base
        elif not isinstance(mod, nn.Linear):
            raise TypeError(f"{name} is a {type(mod).__name__}, not nn.Linear")
        setattr(parent, child, AdaptedLinear(mod, name, ctx))
        shapes[name] = (mod.in_features, mod.out_features)
    return shapes


class StaticLoRA(nn.Module):
    """One LoRA per layer shared by every prompt (the LoRA-ESD baseline): A = alpha_b A0, B = 0 at start."""

    def __init__(self, shapes: dict[str, tuple[int, int]], rank: int, alpha_init: float = 1.0, seed: int = 0) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.names = list(shapes)
        self.A = nn.ParameterList(nn.Parameter(alpha_init * torch.rand(1, di, rank, generator=gen) / math.sqrt(rank))
                                  for di, _ in shapes.values())
        self.B = nn.ParameterList(nn.Parameter(torch.zeros(1, rank, do)) for _, do in shapes.values())

    def factors(self) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        return {n: (a, b) for n, a, b in zip(self.names, self.A, self.B)}


def sum_loras(loras: list[dict[str, tuple[torch.Tensor, torch.Tensor]]]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Several LoRAs applied at once: sum_i A_i B_i = [A_1 .. A_m][B_1; ..; B_m] (rank m r)."""
    names = loras[0].keys()
    return {n: (torch.cat([f[n][0] for f in loras], dim=2), torch.cat([f[n][1] for f in loras], dim=1)) for n in names}
