"""Ergodic tabular MDPs and the quantities that measure how fast a policy's chain mixes.

Chapter 04 (FMSS, "Fast Mixing Steady-State Control in Markov Decision Processes", ICML 2026).
A transition model is an array ``P[s, a, s']``; a Markovian policy an array ``pi[s, a]``; a target
steady state a vector ``mu[s] > 0``. This module holds

* the generators of the chapter's instances: random ergodic MDPs (the card's *Setting*), random
  targets that are achievable by construction (the stationary law of a random policy), the
  5×5 "thermostat" grid world and the "free move on a graph" MDP whose uniform-target problem is the
  fastest-mixing Markov chain problem of Boyd, Diaconis and Xiao (2004);
* the induced chain ``P_pi(s, s') = Σ_a pi(a|s) P(s'|s,a)`` and its stationary law;
* the two rates the chapter compares: the true second-largest eigenvalue modulus (SLEM) and the
  convex surrogate σ(π) = ‖D^{1/2}(P_π − 1μᵀ)D^{−1/2}‖₂, D = diag(μ) (our reconstruction; see
  :func:`surrogate`);
* the worst-start total-variation and χ² curves, computed by repeated multiplication.

Nothing here is random except through a ``numpy.random.Generator`` passed in.
"""
from __future__ import annotations

import numpy as np

__all__ = [
    "random_ergodic_mdp", "random_policy", "random_target", "gridworld", "biased_grid_policy", "graph_mdp",
    "path_graph", "induced_chain", "stationary", "slem", "surrogate", "surrogate_matrix", "tv_curve",
    "chi2_curve", "reversible_chain", "eigen_condition", "max_inflow", "boundary_target", "reversibility_defect",
]


# ---------------------------------------------------------------------------------------------- instances
def random_ergodic_mdp(S: int, A: int, k: int, eps: float, rng: np.random.Generator) -> np.ndarray:
    """``P[s, a, :] = (1 − ε)·Dirichlet(1) on k random states + ε·uniform`` (card, *Setting*).

    The ε-uniform part makes every policy's chain irreducible and aperiodic, so every policy is ergodic.
    """
    if not 1 <= k <= S:
        raise ValueError(f"support size k must be in [1, S={S}]; got {k}")
    P = np.zeros((S, A, S))
    for s in range(S):
        for a in range(A):
            support = rng.choice(S, size=k, replace=False)
            P[s, a, support] = rng.dirichlet(np.ones(k))
    return (1.0 - eps) * P + eps / S


def random_policy(S: int, A: int, rng: np.random.Generator) -> np.ndarray:
    """A policy with Dirichlet(1) rows (an interior point of the policy simplex)."""
    return rng.dirichlet(np.ones(A), size=S)


def random_target(P: np.ndarray, rng: np.random.Generator, *, min_mu: float = 1e-3,
                  mixed: bool = False, max_tries: int = 1000, certificate: bool = False):
    """An achievable target: the stationary law of a random policy π₀ (resampled until min μ ≥ ``min_mu``).

    ``mixed=True`` returns ½(μ_{π₀} + μ_{π₀'}) for two random policies: achievable too, because the set
    of achievable steady states is convex (it is a projection of the occupation polytope).
    ``certificate=True`` returns ``(μ, x)`` with x an occupation measure that achieves μ (x = μ_{π₀}·π₀, or the
    average of the two for a mixture): a witness of achievability that does not rely on any solver. The random
    draws are the same either way.
    """
    S, A, _ = P.shape

    def one() -> tuple[np.ndarray, np.ndarray]:
        for _ in range(max_tries):
            pi0 = random_policy(S, A, rng)
            mu = stationary(induced_chain(P, pi0))
            if mu.min() >= min_mu:
                return mu, (mu[:, None] * pi0).ravel()
        raise RuntimeError(f"no random policy gave min μ >= {min_mu} in {max_tries} tries")

    mu, x = one()
    if mixed:
        mu2, x2 = one()
        mu, x = 0.5 * (mu + mu2), 0.5 * (x + x2)
    return (mu, x) if certificate else mu


def boundary_target(P: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A target on the *boundary* of the achievable set: the steady state maximising cᵀμ for a Gaussian c.

    It is the stationary law of a deterministic policy (a vertex of the stationary occupation polytope
    {x ≥ 0 : Σ_a x(s',a) = Σ_{s,a} x(s,a)P(s'|s,a), 1ᵀx = 1}), found by an LP (HiGHS dual simplex). A perturbed
    model P̂ then usually cannot sustain it, which is the regime where FMSS-SV's min-slack phase is exercised
    (ε̂ > 0); with the ε-uniform mixing of :func:`random_ergodic_mdp` every μ(s) ≥ ε/S. Returns (μ, x).
    """
    import scipy.sparse as sp
    from scipy.optimize import linprog

    S, A, _ = P.shape
    c = rng.standard_normal(S)
    E = sp.kron(sp.eye(S), np.ones((1, A)), format="csr")
    T = sp.csr_matrix(P.reshape(S * A, S).T)
    A_eq = sp.vstack([E - T, sp.csr_matrix(np.ones((1, S * A)))]).tocsr()
    res = linprog(-np.repeat(c, A), A_eq=A_eq, b_eq=np.r_[np.zeros(S), 1.0], bounds=(0, None), method="highs-ds")
    if res.status != 0:
        raise RuntimeError(f"boundary-target LP failed: {res.message}")
    x = np.clip(res.x, 0.0, None)
    x = x / x.sum()
    return x.reshape(S, A).sum(axis=1), x


def gridworld(n: int = 5, slip: float = 0.1) -> np.ndarray:
    """The n×n "thermostat" grid: actions stay, up, down, left, right; state index ``row * n + col``.

    The intended move happens with probability 1 − slip; with probability ``slip`` one of the five
    moves is taken uniformly at random. A move into a wall stays put. Every policy is ergodic
    (the slip reaches every neighbour, and "stay" has positive probability, so the chain is aperiodic).
    """
    moves = [(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)]
    S, A = n * n, len(moves)

    def target(s: int, m: tuple[int, int]) -> int:
        r, c = divmod(s, n)
        r2, c2 = r + m[0], c + m[1]
        return r2 * n + c2 if 0 <= r2 < n and 0 <= c2 < n else s

    P = np.zeros((S, A, S))
    for s in range(S):
        for a, m in enumerate(moves):
            P[s, a, target(s, m)] += 1.0 - slip
            for m2 in moves:
                P[s, a, target(s, m2)] += slip / A
    return P


def biased_grid_policy(n: int, goal: tuple[int, int], strength: float = 0.6) -> np.ndarray:
    """A policy that moves toward ``goal`` with probability ``strength`` (uniform otherwise): the
    narrative example's "old controller", whose stationary law is the thermostat's target."""
    A = 5
    pi = np.full((n * n, A), (1.0 - strength) / A)
    for s in range(n * n):
        r, c = divmod(s, n)
        dr, dc = goal[0] - r, goal[1] - c
        if dr == 0 and dc == 0:
            best = 0
        elif abs(dr) >= abs(dc):
            best = 1 if dr < 0 else 2
        else:
            best = 3 if dc < 0 else 4
        pi[s, best] += strength
    return pi


def graph_mdp(adj: np.ndarray) -> np.ndarray:
    """Free move on a graph: action a moves deterministically to the a-th neighbour, action 0 stays.

    States with fewer neighbours repeat "stay" to pad to A = max degree + 1. With a uniform target
    every doubly stochastic matrix supported on the graph (plus self-loops) is an induced chain, so
    FMSS on this MDP is the fastest-mixing Markov chain problem (Boyd, Diaconis and Xiao 2004).
    """
    adj = np.asarray(adj, bool)
    n = len(adj)
    nbrs = [np.flatnonzero(adj[i] & (np.arange(n) != i)) for i in range(n)]
    A = 1 + max(len(v) for v in nbrs)
    P = np.zeros((n, A, n))
    for i in range(n):
        P[i, :, i] = 1.0                      # "stay", also the padding actions
        for a, j in enumerate(nbrs[i], start=1):
            P[i, a, :] = 0.0
            P[i, a, j] = 1.0
    return P


def path_graph(n: int) -> np.ndarray:
    """Adjacency matrix of the path 0 – 1 – … – n−1."""
    adj = np.zeros((n, n), bool)
    idx = np.arange(n - 1)
    adj[idx, idx + 1] = adj[idx + 1, idx] = True
    return adj


def reversible_chain(S: int, rng: np.random.Generator, density: float = 0.5,
                     max_tries: int = 1000) -> tuple[np.ndarray, np.ndarray]:
    """A μ-reversible chain ``P = D⁻¹W`` with W symmetric non-negative (random sparsity plus the diagonal),
    D = diag(W1); its stationary law is μ = W1 / 1ᵀW1. Returns (P, μ).

    W is resampled until its graph is connected: a disconnected W gives a reducible chain with SLEM = σ = 1,
    an equality that tests nothing (C1's control K3 checks that every chain is ergodic)."""
    for _ in range(max_tries):
        W = rng.exponential(size=(S, S)) * (rng.random((S, S)) < density)
        W = np.triu(W, 1)
        W = W + W.T + np.diag(rng.exponential(size=S))
        if _connected(W > 0):                 # irreducible (the diagonal makes it aperiodic): SLEM < 1
            d = W.sum(axis=1)
            return W / d[:, None], d / d.sum()
    raise RuntimeError(f"no connected random graph with density {density} in {max_tries} tries")


def _connected(adj: np.ndarray) -> bool:
    """Whether the undirected graph ``adj`` is connected (breadth-first search from node 0)."""
    seen, frontier = np.zeros(len(adj), bool), np.zeros(len(adj), bool)
    seen[0] = frontier[0] = True
    while frontier.any():
        frontier = adj[frontier].any(axis=0) & ~seen
        seen |= frontier
    return bool(seen.all())


# ---------------------------------------------------------------------------------------------- chains
def induced_chain(P: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """``P_π(s, s') = Σ_a π(a|s) P(s'|s, a)``."""
    return np.einsum("sa,sat->st", pi, P)


def stationary(Ppi: np.ndarray) -> np.ndarray:
    """The stationary law μ with μᵀP = μᵀ of an ergodic chain (a linear solve, not a power iteration).

    Solves (Pᵀ − I)μ = 0 with one equation replaced by 1ᵀμ = 1.
    """
    S = len(Ppi)
    M = Ppi.T - np.eye(S)
    M[-1, :] = 1.0
    b = np.zeros(S)
    b[-1] = 1.0
    mu = np.linalg.solve(M, b)
    return mu / mu.sum()


def slem(Ppi: np.ndarray, mu: np.ndarray | None = None) -> float:
    """Second-largest eigenvalue modulus: the spectral radius of ``P − 1μᵀ`` with μ the chain's *own*
    stationary law (computed when not given). This is the asymptotic rate of convergence to μ."""
    if mu is None:
        mu = stationary(Ppi)
    return float(np.max(np.abs(np.linalg.eigvals(Ppi - np.outer(np.ones(len(mu)), mu)))))


def surrogate_matrix(Ppi: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """``D^{1/2}(P_π − 1μᵀ)D^{−1/2} = D^{1/2} P_π D^{−1/2} − √μ√μᵀ``, D = diag(μ)."""
    sq = np.sqrt(mu)
    return sq[:, None] * Ppi / sq[None, :] - np.outer(sq, sq)


def surrogate(Ppi: np.ndarray, mu: np.ndarray) -> float:
    """σ(π) = ‖D^{1/2}(P_π − 1μᵀ)D^{−1/2}‖₂ — the chapter's reconstruction of the paper's convex surrogate.

    When μ is stationary for P_π the matrix is similar to P_π − 1μᵀ, so σ ≥ SLEM, with equality when
    P_π is μ-reversible (the matrix is then symmetric). σ is also the worst one-step contraction factor
    of the χ²(·‖μ) distance: χ²(νP_π‖μ) ≤ σ² χ²(ν‖μ).
    """
    return float(np.linalg.norm(surrogate_matrix(Ppi, mu), 2))


TOP_GROUP_RTOL = 0.01   # eigenvalues within 1 % of the SLEM's modulus act as one group on a window of k ≤ 30 steps


def eigen_condition(Ppi: np.ndarray, mu: np.ndarray | None = None, rtol: float = TOP_GROUP_RTOL) -> float:
    """Largest eigenvalue condition number 1/|yᴴx| (unit left/right eigenvectors) among the eigenvalues
    of P − 1μᵀ whose modulus is within ``rtol`` (relative) of the SLEM. Large values flag near-defective
    (Jordan-like) eigenvalues at the top, whose transient k·λᵏ distorts a rate fitted over a finite window.

    The group is not only the eigenvalues that attain the SLEM: over k ≤ 30 steps, powers of moduli 1 % apart
    differ by at most 0.99³⁰ ≈ 0.74, so a near-defective cluster just below the top (a minimiser of the SLEM
    equalises several moduli, and coalescing eigenvalues turn Jordan-like) shapes the fitted window as much as
    the top eigenvalue itself."""
    if mu is None:
        mu = stationary(Ppi)
    M = Ppi - np.outer(np.ones(len(mu)), mu)
    w, vl, vr = _eig_left_right(M)
    mods = np.abs(w)
    top = np.flatnonzero(mods >= mods.max() * (1 - rtol) - 1e-9)
    kappa = [1.0 / max(abs(np.vdot(vl[:, i], vr[:, i])), 1e-300) for i in top]
    return float(max(kappa))


def _eig_left_right(M: np.ndarray):
    from scipy.linalg import eig

    w, vl, vr = eig(M, left=True, right=True)
    vl = vl / np.linalg.norm(vl, axis=0)
    vr = vr / np.linalg.norm(vr, axis=0)
    return w, vl, vr


def reversibility_defect(Ppi: np.ndarray, mu: np.ndarray) -> float:
    """max |μ(s)P(s,s') − μ(s')P(s',s)|: zero exactly for μ-reversible chains (detailed balance)."""
    F = mu[:, None] * Ppi
    return float(np.abs(F - F.T).max())


def max_inflow(P: np.ndarray) -> np.ndarray:
    """``max_{s', a} P(s | s', a)`` for every s: no achievable steady state can put more mass on s,
    because μ(s) = Σ_{s',a} x(s',a) P(s|s',a) is an average of these numbers (C7's construction)."""
    return P.max(axis=(0, 1))


# ---------------------------------------------------------------------------------------------- curves
def _powers(Ppi: np.ndarray, K: int) -> np.ndarray:
    """Rows of P^k for k = 0..K, i.e. the law after k steps from every start state: shape (K+1, S, S)."""
    S = len(Ppi)
    out = np.empty((K + 1, S, S))
    out[0] = np.eye(S)
    for k in range(1, K + 1):
        out[k] = out[k - 1] @ Ppi
    return out


def tv_curve(Ppi: np.ndarray, mu: np.ndarray, K: int) -> np.ndarray:
    """Total-variation distance ‖e_sᵀP^k − μ‖_TV for k = 0..K and every start s: shape (K+1, S).
    The worst start is ``.max(axis=1)``."""
    return 0.5 * np.abs(_powers(Ppi, K) - mu[None, None, :]).sum(axis=2)


def chi2_curve(Ppi: np.ndarray, mu: np.ndarray, K: int) -> np.ndarray:
    """χ²(e_sᵀP^k ‖ μ) = Σ_{s'} (P^k(s,s') − μ(s'))² / μ(s') for k = 0..K and every start s: shape (K+1, S)."""
    return ((_powers(Ppi, K) - mu[None, None, :]) ** 2 / mu[None, None, :]).sum(axis=2)
