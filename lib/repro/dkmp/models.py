"""The learned force fields of chapter 15: our reading of DKMP, and the SchNet baselines (card, "Method").

Every model is an energy model: E = Σ_i s·MLP(h_i) + Σ_i e_ref[species_i], forces F = −∂E/∂x by autograd
(through r_ij, r_ic and the star weights w_ic; the centre *selection* is held constant, it is piecewise).

* :class:`CFConv` — SchNet's continuous-filter convolution (Schütt et al. 2017) on a radius graph:
  h_i += lin3(ssp(lin2( Σ_j W(e(r_ij)) φ_c(r_ij) ⊙ lin1(h_j) ))).
* :class:`StarLayer` — one dilated star layer, **our reading of the abstract** (the paper's code is not
  public). Centres c ∈ C_l come from a greedy Poisson-disk selection at scale s_l; atom i is a leaf of every
  centre with r_ic < R_l = 1.5 s_l, with weight w_ic = φ_{R_l}(r_ic) (cosine cutoff). Then
      gather   g_c = Σ_i w_ic W_g(e_l(r_ic)) ⊙ V h_i / (Σ_i w_ic + 1)
      centre   u_c = ssp(W_c [h_c, g_c])
      scatter  h_i += ssp(W_o Σ_c w_ic W_s(e_l(r_ic)) ⊙ u_c)
  with e_l Gaussian RBFs spanning [0, R_l]. No centre–centre edges (card's decision). The MLPs are one
  layer each so that DKMP's parameter count stays within ±15% of a SchNet of the same width and depth.
* :class:`DKMP` — n_local CFConv layers at r_local, then n_star star layers at s_l = s_1 d^(l−1).
  ``dilation=1`` gives the non-dilated ablation (all star layers at s_1).
* :class:`SchNet` — n_layers CFConv layers at one cutoff (SchNet-local 2.5 σ, SchNet-wide 8 σ);
  ``cutoff=None`` is the all-pairs reference (every pair, no cutoff function).

Graphs are built from numpy positions (:mod:`.neighbors`: radius graphs by scipy's cKDTree, the fastest
builder we benchmarked; centres and star memberships by our compiled kernels) and stay fixed while
autograd differentiates through the positions: :meth:`EnergyModel.build_graph` → :class:`Graph`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from .neighbors import poisson_disk_centres, radius_pairs, star_membership

__all__ = ["RBF", "CFConv", "StarLayer", "EnergyModel", "SchNet", "DKMP", "Graph", "StarGraph", "collate",
           "n_params", "cosine_cutoff", "ssp"]

LOG2 = math.log(2.0)


def ssp(x: torch.Tensor) -> torch.Tensor:
    """Shifted softplus, SchNet's activation: ln(1 + eˣ) − ln 2 (zero at zero)."""
    return nn.functional.softplus(x) - LOG2


def cosine_cutoff(r: torch.Tensor, c: float) -> torch.Tensor:
    """φ_c(r) = ½(cos(πr/c) + 1) for r < c, else 0."""
    return torch.where(r < c, 0.5 * (torch.cos(math.pi * r / c) + 1.0), torch.zeros_like(r))


class RBF(nn.Module):
    """``n`` Gaussians exp(−(r − μ_k)² / (2Δ²)) with centres μ_k evenly spaced on [0, r_max], Δ the spacing."""

    def __init__(self, n: int, r_max: float) -> None:
        super().__init__()
        mu = torch.linspace(0.0, r_max, n, dtype=torch.float64)
        self.register_buffer("mu", mu)
        self.gamma = 0.5 / float(mu[1] - mu[0]) ** 2

    def forward(self, r: torch.Tensor) -> torch.Tensor:
        return torch.exp(-self.gamma * (r[:, None] - self.mu.to(r.dtype)) ** 2)


# ----------------------------------------------------------------------------- graphs

@dataclass
class StarGraph:
    """One star layer's graph: ``centres`` (C,) atom indices; memberships ``atom`` (E,) → ``slot`` (E,)."""

    centres: torch.Tensor
    atom: torch.Tensor
    slot: torch.Tensor

    @property
    def n_edges(self) -> int:
        return int(self.atom.numel())


@dataclass
class Graph:
    """Graphs of one or more clusters (concatenated): directed radius-graph edges src → dst, star layers,
    and ``batch`` (atom → cluster). ``pair_layers``/``pair_cutoff`` say how many layers use the pairs."""

    n_atoms: int
    batch: torch.Tensor
    n_graphs: int
    src: torch.Tensor
    dst: torch.Tensor
    stars: list[StarGraph] = field(default_factory=list)
    pair_layers: int = 1

    def edges_per_layer(self) -> list[int]:
        """Message edges of every layer (directed pairs for a radius graph, memberships for a star)."""
        return [int(self.src.numel())] * self.pair_layers + [s.n_edges for s in self.stars]

    def n_edges(self) -> int:
        return int(sum(self.edges_per_layer()))


def _directed(i: np.ndarray, j: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.from_numpy(np.concatenate([i, j]))
    dst = torch.from_numpy(np.concatenate([j, i]))
    return src, dst


def collate(graphs: list[Graph]) -> Graph:
    """One disjoint graph from several clusters' graphs (atom indices offset)."""
    if len(graphs) == 1:
        return graphs[0]
    off, b_off = 0, 0
    src, dst, batch = [], [], []
    stars: list[list[StarGraph]] = [[] for _ in graphs[0].stars]
    c_off = [0] * len(graphs[0].stars)
    for g in graphs:
        src.append(g.src + off)
        dst.append(g.dst + off)
        batch.append(g.batch + b_off)
        for l, s in enumerate(g.stars):
            stars[l].append(StarGraph(s.centres + off, s.atom + off, s.slot + c_off[l]))
            c_off[l] += int(s.centres.numel())
        off += g.n_atoms
        b_off += g.n_graphs
    return Graph(off, torch.cat(batch), b_off, torch.cat(src), torch.cat(dst),
                 [StarGraph(torch.cat([s.centres for s in ls]), torch.cat([s.atom for s in ls]),
                            torch.cat([s.slot for s in ls])) for ls in stars],
                 graphs[0].pair_layers)


def n_params(model: nn.Module) -> int:
    """Trainable parameters."""
    return int(sum(p.numel() for p in model.parameters() if p.requires_grad))


# ----------------------------------------------------------------------------- layers

class CFConv(nn.Module):
    """SchNet interaction block on a radius graph with cutoff ``cutoff`` (None: every pair, no cutoff function)."""

    def __init__(self, hidden: int, n_rbf: int, cutoff: float | None, rbf_range: float) -> None:
        super().__init__()
        self.cutoff = cutoff
        self.rbf = RBF(n_rbf, rbf_range)
        self.filter = nn.Sequential(nn.Linear(n_rbf, hidden), nn.Softplus(), nn.Linear(hidden, hidden))
        self.lin1 = nn.Linear(hidden, hidden, bias=False)
        self.lin2 = nn.Linear(hidden, hidden)
        self.lin3 = nn.Linear(hidden, hidden)
        # messages are summed, then divided by the mean in-degree of the training graphs (set by ``fit``,
        # like MACE's avg_num_neighbors): keeps a 2.5 σ and an 8 σ filter sum on the same scale at init
        self.register_buffer("avg_degree", torch.ones((), dtype=torch.float64))

    def expand(self, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """RBF expansion e(r) and cutoff φ_c(r) of the edges (shared by layers with the same RBF and cutoff)."""
        return self.rbf(r), (cosine_cutoff(r, self.cutoff) if self.cutoff is not None else None)

    def forward(self, h: torch.Tensor, r: torch.Tensor, src: torch.Tensor, dst: torch.Tensor,
                expanded: tuple[torch.Tensor, torch.Tensor | None] | None = None) -> torch.Tensor:
        e, fc = expanded if expanded is not None else self.expand(r)
        W = self.filter(e)
        if fc is not None:
            W = W * fc[:, None]
        m = self.lin1(h)[src] * W
        agg = torch.zeros_like(h).index_add(0, dst, m) / self.avg_degree.to(h.dtype)
        return self.lin3(ssp(self.lin2(agg)))


class StarLayer(nn.Module):
    """One dilated star layer (gather leaves → centre, update centre, scatter centre → leaves)."""

    def __init__(self, hidden: int, n_rbf: int, radius: float) -> None:
        super().__init__()
        self.radius = radius
        self.rbf = RBF(n_rbf, radius)
        self.V = nn.Linear(hidden, hidden, bias=False)
        self.W_g = nn.Linear(n_rbf, hidden)
        self.W_c = nn.Linear(2 * hidden, hidden)
        self.W_s = nn.Linear(n_rbf, hidden)
        self.W_o = nn.Linear(hidden, hidden)

    def forward(self, h: torch.Tensor, pos: torch.Tensor, star: StarGraph) -> torch.Tensor:
        c_atom = star.centres[star.slot]
        d = pos[star.atom] - pos[c_atom]
        d2 = (d * d).sum(-1)
        own = star.atom == c_atom  # the centre is a leaf of its own star at r = 0 (no gradient there)
        r = torch.where(own, torch.zeros_like(d2), torch.sqrt(torch.where(own, torch.ones_like(d2), d2)))
        w = cosine_cutoff(r, self.radius)
        e = self.rbf(r)
        C = star.centres.numel()
        # gather: g_c = Σ_i w_ic W_g(e) ⊙ V h_i / (Σ_i w_ic + 1)
        num = h.new_zeros(C, h.shape[1]).index_add(0, star.slot, w[:, None] * self.W_g(e) * self.V(h)[star.atom])
        den = h.new_zeros(C).index_add(0, star.slot, w) + 1.0
        g = num / den[:, None]
        # centre update: u_c = ssp(W_c [h_c, g_c])
        u = ssp(self.W_c(torch.cat([h[star.centres], g], dim=1)))
        # scatter: h_i += ssp(W_o Σ_c w_ic W_s(e) ⊙ u_c)
        s = torch.zeros_like(h).index_add(0, star.atom, w[:, None] * self.W_s(e) * u[star.slot])
        return ssp(self.W_o(s))


# ----------------------------------------------------------------------------- models

class EnergyModel(nn.Module):
    """Species embedding → layers → per-atom readout; energies per cluster and forces by autograd."""

    def __init__(self, hidden: int, n_species: int = 2) -> None:
        super().__init__()
        self.hidden = hidden
        self.embed = nn.Embedding(n_species, hidden)
        self.readout = nn.Sequential(nn.Linear(hidden, max(hidden // 2, 1)), nn.Softplus(),
                                     nn.Linear(max(hidden // 2, 1), 1))
        self.register_buffer("e_ref", torch.zeros(n_species, dtype=torch.float64))
        self.register_buffer("scale", torch.ones((), dtype=torch.float64))

    def set_avg_degree(self, graphs: list[Graph]) -> float:
        """Mean in-degree of the radius graphs in ``graphs``; every CFConv divides its message sum by it."""
        deg = float(np.mean([g.src.numel() / g.n_atoms for g in graphs])) if graphs else 1.0
        for m in self.modules():
            if isinstance(m, CFConv):
                m.avg_degree.fill_(max(deg, 1.0))
        return deg

    # subclasses: build_graph(pos) and _features(h, pos, graph)
    def build_graph(self, pos: np.ndarray, centres: list[np.ndarray] | None = None) -> Graph:  # pragma: no cover
        raise NotImplementedError

    def _features(self, h: torch.Tensor, pos: torch.Tensor, graph: Graph) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError

    def energy(self, pos: torch.Tensor, species: torch.Tensor, graph: Graph) -> torch.Tensor:
        """Energies (n_graphs,) of the clusters in ``graph``; ``pos`` (M, 3), ``species`` (M,) int64."""
        h = self.embed(species).to(pos.dtype)
        h = self._features(h, pos, graph)
        e_atom = self.readout(h).squeeze(-1) * self.scale.to(pos.dtype) + self.e_ref.to(pos.dtype)[species]
        return pos.new_zeros(graph.n_graphs).index_add(0, graph.batch, e_atom)

    def energy_forces(self, pos: torch.Tensor, species: torch.Tensor, graph: Graph,
                      create_graph: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Energies (n_graphs,) and forces F = −∂E/∂x (M, 3)."""
        if not pos.requires_grad:
            pos = pos.detach().requires_grad_(True)
        E = self.energy(pos, species, graph)
        (g,) = torch.autograd.grad(E.sum(), pos, create_graph=create_graph)
        return E, -g


def _pair_r(pos: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    d = pos[src] - pos[dst]
    return torch.sqrt((d * d).sum(-1))


class SchNet(EnergyModel):
    """SchNet with ``n_layers`` interaction blocks on one radius graph (``cutoff=None``: all pairs)."""

    def __init__(self, hidden: int = 32, n_layers: int = 3, cutoff: float | None = 2.5, n_rbf: int = 16,
                 rbf_range: float | None = None) -> None:
        super().__init__(hidden)
        self.cutoff = cutoff
        rng_ = rbf_range or cutoff
        if rng_ is None:
            raise ValueError("the all-pairs SchNet (cutoff=None) needs rbf_range")
        self.layers = nn.ModuleList(CFConv(hidden, n_rbf, cutoff, rng_) for _ in range(n_layers))

    def build_graph(self, pos: np.ndarray, centres: list[np.ndarray] | None = None) -> Graph:
        n = len(pos)
        if self.cutoff is None:
            i, j = np.triu_indices(n, k=1)
            i, j = i.astype(np.int64), j.astype(np.int64)
        else:
            i, j = radius_pairs(pos, self.cutoff)
        src, dst = _directed(i, j)
        return Graph(n, torch.zeros(n, dtype=torch.long), 1, src, dst, [], len(self.layers))

    def _features(self, h, pos, graph):
        r = _pair_r(pos, graph.src, graph.dst)
        ex = self.layers[0].expand(r)  # every layer has the same RBF and cutoff: expand once
        for layer in self.layers:
            h = h + layer(h, r, graph.src, graph.dst, ex)
        return h


class DKMP(EnergyModel):
    """Our reading of DKMP: ``n_local`` local CFConv layers at ``r_local``, then ``n_star`` star layers whose
    region scales dilate, s_l = s1·dilation^(l−1), with stars of radius 1.5 s_l."""

    def __init__(self, hidden: int = 32, n_local: int = 1, n_star: int = 2, r_local: float = 2.5,
                 s1: float = 2.7, dilation: float = 2.0, n_rbf: int = 16) -> None:
        super().__init__(hidden)
        self.r_local = r_local
        self.scales = [s1 * dilation ** l for l in range(n_star)]
        self.local = nn.ModuleList(CFConv(hidden, n_rbf, r_local, r_local) for _ in range(n_local))
        self.stars = nn.ModuleList(StarLayer(hidden, n_rbf, 1.5 * s) for s in self.scales)

    def select_centres(self, pos: np.ndarray) -> list[np.ndarray]:
        """C_l for every star layer (Poisson-disk at s_l)."""
        return [poisson_disk_centres(pos, s) for s in self.scales]

    def build_graph(self, pos: np.ndarray, centres: list[np.ndarray] | None = None) -> Graph:
        """Radius graph at r_local and one star graph per layer; ``centres`` fixes C_l (else re-selected)."""
        n = len(pos)
        i, j = radius_pairs(pos, self.r_local)
        src, dst = _directed(i, j)
        centres = self.select_centres(pos) if centres is None else centres
        stars = []
        for s, c in zip(self.scales, centres):
            a, k, _ = star_membership(pos, c, 1.5 * s)
            stars.append(StarGraph(torch.from_numpy(np.asarray(c, np.int64)), torch.from_numpy(a),
                                   torch.from_numpy(k)))
        return Graph(n, torch.zeros(n, dtype=torch.long), 1, src, dst, stars, len(self.local))

    def _features(self, h, pos, graph):
        r = _pair_r(pos, graph.src, graph.dst)
        ex = self.local[0].expand(r) if len(self.local) else None
        for layer in self.local:
            h = h + layer(h, r, graph.src, graph.dst, ex)
        for layer, star in zip(self.stars, graph.stars):
            h = h + layer(h, pos, star)
        return h
