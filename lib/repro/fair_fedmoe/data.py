"""Synthetic multi-site "medical imaging" federations standing for frozen foundation-model features (card,
*Setting at book scale*).

A raw "image" of group g, label y, at site k is

    u = R_g (y Δμ + z) + b_g + s_k + 0.3 ξ,        z, ξ ~ N(0, I_32),

where ‖Δμ‖ = 2, R_g rotates by g·θ in the plane spanned by Δμ and one random orthogonal direction (so the
groups' decision directions really differ; a random plane would hold ~2/32 of Δμ), b_g ~ N(0, σ_b² I) is a
group offset (the card's σ_b = 0.5 raised to
``group_offset_sd`` = 1.0: at 0.5 even a linear probe on φ(u) identifies the group of only ~87 % of samples, below
the routing control K2's 85 % for a cosine router; at 0.75 K2 still failed at one master seed), and s_k a site ("scanner") shift of norm 0.5 — except the last site, planted with norm
``outlier_shift`` (the card's risk "nothing to filter"; the card's 3 is raised to 10 in the chapter's config, see
``Config.outlier_shift``). The frozen foundation model φ is a random 2-layer tanh
MLP R^32 → R^64, fixed by the seed; φ(u) is computed once, and every model trains on φ(u) only.

Site k's group mix is Dirichlet(β·1) ⊙ π renormalised, with global frequencies π ∝ (1, .6, .35, .2, .12, .08,
.05, .03); its size is U[400, 1200]; its label rate 0.35 + U[−0.1, 0.1]. Each site is split 70/30; the test set
is the pooled 30 %. A federation is redrawn until every group has ≥ 20 positives and ≥ 20 negatives in the
pooled test set (per-group AUC is undefined otherwise).

Blinded federations (``blind``, for the negative twins of the controls, issue 41): ``"labels"`` permutes the
training labels within each site (nothing left to learn), ``"groups"`` permutes the training group labels within
each site (nothing left to route on), ``"mixes"`` gives every site the global mix π whatever β (no heterogeneity).
The pooled test set is never blinded.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

PI_FULL = np.array([1.0, 0.6, 0.35, 0.2, 0.12, 0.08, 0.05, 0.03])
D_IN, D_FEAT = 32, 64
DELTA_MU_NORM, GROUP_OFFSET_SD, SITE_SHIFT_NORM, XI_SD = 2.0, 1.0, 0.5, 0.3
MIN_PER_CLASS = 20
BLINDS = (None, "labels", "groups", "mixes")
TRAIN_FRAC = 0.7


def group_frequencies(n_groups: int) -> np.ndarray:
    """π: the global group frequencies (minorities), normalised."""
    if not 1 <= n_groups <= len(PI_FULL):
        raise ValueError(f"n_groups must be in 1..{len(PI_FULL)}; got {n_groups}")
    p = PI_FULL[:n_groups]
    return p / p.sum()


class FMFeatureExtractor:
    """The frozen "foundation model" φ: u ↦ tanh(W2 tanh(W1 u + c1) + c2), R^32 → R^64, fixed by ``seed``."""

    def __init__(self, d_in: int = D_IN, d_out: int = D_FEAT, seed: int = 0, d_hidden: int = 64) -> None:
        rng = np.random.default_rng([seed, 101])
        self.W1 = rng.normal(0, 1 / np.sqrt(d_in), (d_in, d_hidden))
        self.c1 = rng.normal(0, 0.1, d_hidden)
        self.W2 = rng.normal(0, 1 / np.sqrt(d_hidden), (d_hidden, d_out))
        self.c2 = rng.normal(0, 0.1, d_out)

    def __call__(self, u: np.ndarray) -> np.ndarray:
        return np.tanh(np.tanh(u @ self.W1 + self.c1) @ self.W2 + self.c2)


def rotation_in_plane(e1: np.ndarray, e2: np.ndarray, angle: float) -> np.ndarray:
    """The rotation of R^d by ``angle`` (radians) in the plane of the orthonormal e1, e2; identity elsewhere."""
    d = e1.size
    c, s = np.cos(angle), np.sin(angle)
    return (np.eye(d) + (c - 1) * (np.outer(e1, e1) + np.outer(e2, e2))
            + s * (np.outer(e2, e1) - np.outer(e1, e2)))


@dataclass
class Geometry:
    """What does not depend on β: φ, Δμ, the rotation plane, group offsets b_g and site shifts s_k."""

    phi: FMFeatureExtractor
    delta_mu: np.ndarray
    rotations: np.ndarray         # [G, d, d]
    offsets: np.ndarray           # [G, d]
    site_shifts: np.ndarray       # [K, d]


def make_geometry(n_sites: int, n_groups: int, seed: int, theta_deg: float = 45.0,
                  outlier_shift: float = 3.0, group_offset_sd: float = GROUP_OFFSET_SD,
                  site_shift: float = SITE_SHIFT_NORM) -> Geometry:
    rng = np.random.default_rng([seed, 202])
    e1 = rng.normal(size=D_IN)
    e1 /= np.linalg.norm(e1)
    e2 = rng.normal(size=D_IN)
    e2 -= (e2 @ e1) * e1
    e2 /= np.linalg.norm(e2)
    rot = np.stack([rotation_in_plane(e1, e2, np.deg2rad(g * theta_deg)) for g in range(n_groups)])
    offsets = rng.normal(0, group_offset_sd, (n_groups, D_IN))
    dirs = rng.normal(size=(n_sites, D_IN))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    norms = np.full(n_sites, site_shift)
    norms[-1] = outlier_shift
    return Geometry(FMFeatureExtractor(seed=seed), DELTA_MU_NORM * e1, rot, offsets, dirs * norms[:, None])


@dataclass
class SiteData:
    """One site's (or the pooled test set's) FM features X = φ(u), labels y ∈ {0,1}, groups g."""

    X: np.ndarray
    y: np.ndarray
    g: np.ndarray

    def __len__(self) -> int:
        return len(self.y)

    def group_counts(self, n_groups: int) -> np.ndarray:
        return np.bincount(self.g, minlength=n_groups)


@dataclass
class Federation:
    sites: list[SiteData]          # training splits
    test: SiteData                 # pooled held-out 30 % of every site
    mixes: np.ndarray              # [K, G] drawn group mixes
    pi: np.ndarray                 # [G]
    beta: float
    n_draws: int                   # federations drawn until the test rule held
    test_site: np.ndarray = field(default=None)  # site of each test sample

    @property
    def n_groups(self) -> int:
        return len(self.pi)

    def counts(self) -> np.ndarray:
        """n_g^k of the training splits, [K, G]."""
        return np.stack([s.group_counts(self.n_groups) for s in self.sites])

    def pooled(self) -> SiteData:
        return SiteData(*(np.concatenate([getattr(s, a) for s in self.sites]) for a in ("X", "y", "g")))


def sample_site(geo: Geometry, k: int, n: int, mix: np.ndarray, label_rate: float,
                rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Raw u, features φ(u), labels and groups of n samples of site k."""
    g = rng.choice(len(mix), size=n, p=mix)
    y = (rng.random(n) < label_rate).astype(np.int64)
    z = rng.normal(size=(n, D_IN))
    xi = rng.normal(size=(n, D_IN))
    core = y[:, None] * geo.delta_mu + z
    u = np.einsum("nij,nj->ni", geo.rotations[g], core) + geo.offsets[g] + geo.site_shifts[k] + XI_SD * xi
    return u, geo.phi(u), y, g


def make_federation(n_sites: int, n_groups: int, beta: float, seed: int, theta_deg: float = 45.0,
                    outlier_shift: float = 3.0, group_offset_sd: float = GROUP_OFFSET_SD,
                    site_shift: float = SITE_SHIFT_NORM, max_draws: int = 200,
                    blind: str | None = None) -> Federation:
    """Draw the federation of replicate ``seed`` at heterogeneity β (redrawn until the test rule holds);
    ``blind`` in ``BLINDS`` removes one structure from the training splits (see the module docstring)."""
    if blind not in BLINDS:
        raise ValueError(f"blind must be one of {BLINDS}; got {blind!r}")
    geo = make_geometry(n_sites, n_groups, seed, theta_deg, outlier_shift, group_offset_sd, site_shift)
    pi = group_frequencies(n_groups)
    rng = np.random.default_rng([seed, 303, int(round(1e6 * beta))])
    for draw in range(1, max_draws + 1):
        mixes = rng.dirichlet(np.full(n_groups, beta), size=n_sites) * pi
        mixes = np.maximum(mixes, 0)
        mixes /= mixes.sum(1, keepdims=True)
        if blind == "mixes":
            mixes = np.tile(pi, (n_sites, 1))
        sites, tests, tsite = [], [], []
        for k in range(n_sites):
            n = int(rng.integers(400, 1201))
            rate = 0.35 + rng.uniform(-0.1, 0.1)
            _, X, y, g = sample_site(geo, k, n, mixes[k], rate, rng)
            n_tr = int(round(TRAIN_FRAC * n))
            y_tr, g_tr = y[:n_tr].copy(), g[:n_tr].copy()
            blind_rng = np.random.default_rng([seed, 505, k])   # its own stream: the draws stay the real ones
            if blind == "labels":
                y_tr = blind_rng.permutation(y_tr)
            elif blind == "groups":
                g_tr = blind_rng.permutation(g_tr)
            sites.append(SiteData(X[:n_tr], y_tr, g_tr))
            tests.append(SiteData(X[n_tr:], y[n_tr:], g[n_tr:]))
            tsite.append(np.full(n - n_tr, k))
        test = SiteData(*(np.concatenate([getattr(t, a) for t in tests]) for a in ("X", "y", "g")))
        pos = np.bincount(test.g[test.y == 1], minlength=n_groups)
        neg = np.bincount(test.g[test.y == 0], minlength=n_groups)
        if pos.min() >= MIN_PER_CLASS and neg.min() >= MIN_PER_CLASS:
            return Federation(sites, test, mixes, pi, beta, draw, np.concatenate(tsite))
    raise RuntimeError(f"no federation with >= {MIN_PER_CLASS} positives and negatives per group in "
                       f"{max_draws} draws (n_sites={n_sites}, n_groups={n_groups}, beta={beta})")


def mix_tv_to_pi(mixes: np.ndarray, pi: np.ndarray) -> float:
    """Mean over sites of the total-variation distance between a site's group mix and π."""
    return float(0.5 * np.abs(mixes - pi).sum(1).mean())


def expected_mix_tv(beta: float, n_groups: int, n_sites: int, draws: int = 4000, seed: int = 0) -> float:
    """Monte-Carlo expectation of :func:`mix_tv_to_pi` over the generator's drawn site mixes at β
    (the quantity control K5 thresholds)."""
    rng = np.random.default_rng([seed, 707])
    pi = group_frequencies(n_groups)
    m = rng.dirichlet(np.full(n_groups, beta), size=(draws, n_sites)) * pi
    m /= m.sum(-1, keepdims=True)
    return float((0.5 * np.abs(m - pi).sum(-1)).mean())
