"""BiRoLF and every baseline of chapter 02, all with one interface: ``choose() -> (i, j)``, ``update(i, j, r)``.

Chapter 02 (BiRoLF, ICML 2026). :class:`BiRoLF` follows the card's *Method* steps 2–8 (the paper's
Algorithm; the constants are those of the authors' agents, ``cfg.py`` of github.com/zaalophus/BiRoLF):

2. greedy â = argmax (X̃Φ̂Ỹᵀ)_ij, uniform during the first ``explore_rounds`` (= 2MN) rounds;
3. a_t = â with probability 1 − 1/√t, otherwise uniform over the other MN − 1 pairs;
4. pseudo-action ã: redraw (ã = a_t w.p. p, else uniform over the others) at most ρ_t + 1 times,
   ρ_t = ⌊log(2(t+1)²/δ) / log(1/(1−p))⌋, stopping at the first match (:func:`resample_pseudo_action`);
   an unmatched round is observed but changes nothing;
5. imputation Lasso Φ̌ (λ_imp,t = c_imp·2σκ_xκ_y√(2t log(2MNt²/δ))), FISTA warm-started, ≤ 200 iterations;
6. DR pseudo-reward matrix R̃_t = X̃Φ̌Ỹᵀ + (1/p)(r_t − x̃_iᵀΦ̌ỹ_j) e_i e_jᵀ (:func:`dr_pseudo_rewards`);
7. B ← running mean of X̃ᵀR̃_τỸ = G_xΦ̌G_y + (1/p)(r − x̃_iᵀΦ̌ỹ_j) x̃_i ỹ_jᵀ (each term with that round's Φ̌, as
   the authors' code; ``reimpute=True`` is the ablation that rebuilds B from every matched round with the
   current Φ̌), μ = λ_main,t/Γ with λ_main,t = c_main·(4σκ_xκ_y/p)√(2t log(2MNt²/δ));
8. Φ̂ by :func:`~repro.birolf.solvers.solve_main_blockwise` (or the full-matrix FISTA, ``blockwise=False``),
   every FISTA loop run until the KKT residual is ≤ 1e-5·max|B_t| (the card's in-loop accuracy; the authors'
   fixed caps 100/50/50 leave some updates above it, ``kkt_rel=None`` restores them).

Baselines (card *Baselines*; each from its own paper, configured as in the authors' code):
:class:`RoLF` (the linear predecessor on Kronecker features of the augmented bases, dimension MN; its vector
Lassos are evaluated through the identity (A ⊗ C) vec Φ = vec(A Φ C), i.e. without forming the MN × MN
matrix, which gives the same iterates), :class:`LinUCB` (Li et al. 2010), :class:`OFUL` (Abbasi-Yadkori et
al. 2011), :class:`LinTS` (Agrawal & Goyal 2013), :class:`DRLassoBandit` (Kim & Paik 2019),
:class:`ESTRLowOFUL` (Jun et al. 2019), :class:`UCBDelta` (no features), :class:`UCBDeltaCode` (the
authors' ``UCBDelta``, whose bonuses live in an integer array and are truncated) and the :class:`Oracle`
(always the best pair; its regret is exactly zero — a test of the bookkeeping). ``oful_true`` is
:class:`OFUL` on the *true* Kronecker features x*_i ⊗ y*_j (a correctly specified model that knows the latent
features): a positive control, not a baseline of the paper.
"""
from __future__ import annotations

import math

import numpy as np

from .env import BilinearInstance, gram_blocks
from .solvers import (CODE_CAPS, ImputeLipschitz, fista_impute, fista_matrix, fista_vector_lasso,
                      solve_main_blockwise, solve_main_full)

__all__ = ["Agent", "BiRoLF", "RoLF", "LinUCB", "OFUL", "LinTS", "DRLassoBandit", "ESTRLowOFUL", "UCBDelta",
           "UCBDeltaCode", "Oracle", "rho_t", "resample_pseudo_action", "dr_pseudo_rewards", "dr_expected", "chosen_distribution", "kron_features", "make_agent",
           "AGENT_LABELS"]

KKT_CAP = 100_000   # iteration cap per FISTA loop when the main Lasso is solved to a KKT target

AGENT_LABELS = {
    "birolf": "BiRoLF", "birolf_full": "BiRoLF (full-matrix FISTA)", "rolf": "RoLF", "linucb": "LinUCB-Kron",
    "oful": "OFUL-Kron", "lints": "LinTS-Kron", "dr_lasso": "DR-Lasso-Kron", "estr_lowoful": "ESTR+LowOFUL",
    "ucb": "UCB(δ)", "ucb_code": "UCB(δ) as in the authors' code (integer bonus)",
    "oful_true": "OFUL on the true features (oracle features)", "oracle": "Oracle",
}


def _argmax_random(v: np.ndarray, rng: np.random.Generator) -> int:
    """Index of the maximum, ties broken uniformly at random (as the authors' agents do)."""
    m = v.max()
    idx = np.flatnonzero(v == m)
    return int(idx[0]) if idx.size == 1 else int(idx[rng.integers(idx.size)])


def _other_uniform(a: int, K: int, rng: np.random.Generator) -> int:
    """Uniform over {0..K−1} \\ {a}."""
    b = int(rng.integers(K - 1))
    return b + 1 if b >= a else b


def rho_t(t: int, p: float, delta: float) -> int:
    """ρ_t = ⌊log(2(t+1)²/δ) / log(1/(1−p))⌋: at most ρ_t + 1 pseudo-action draws in round t."""
    return int(math.floor(math.log(2.0 * (t + 1) ** 2 / delta) / math.log(1.0 / (1.0 - p))))


def resample_pseudo_action(a: int, K: int, p: float, rho: int, rng: np.random.Generator) -> tuple[int, int]:
    """Draw ã (= a w.p. p, else uniform over the other K − 1 actions) up to ρ + 1 times, stopping at ã = a.

    Returns (ã, number of draws). The round is *matched* when ã = a, which fails with probability
    (1 − p)^{ρ+1}.
    """
    for n in range(1, rho + 2):
        if rng.random() < p:
            return a, n
        b = _other_uniform(a, K, rng)
        if n == rho + 1:
            return b, n
    raise AssertionError("unreachable")  # pragma: no cover


def dr_pseudo_rewards(X_aug: np.ndarray, Y_aug: np.ndarray, Phi_check: np.ndarray, i: int, j: int, r: float,
                      p: float) -> np.ndarray:
    """R̃ = X̃Φ̌Ỹᵀ + (1/p)(r − x̃_iᵀΦ̌ỹ_j) e_i e_jᵀ: the model's prediction everywhere, DR-corrected at (i, j)."""
    R = X_aug @ Phi_check @ Y_aug.T
    R[i, j] += (r - R[i, j]) / p
    return R


def chosen_distribution(a_hat: int, K: int, t: int) -> np.ndarray:
    """π_t: probability 1 − 1/√t on â, 1/√t spread uniformly over the other K − 1 actions (card step 3)."""
    pi = np.full(K, (1.0 / math.sqrt(t)) / (K - 1))
    pi[a_hat] = 1.0 - 1.0 / math.sqrt(t)
    return pi


def dr_expected(X_aug: np.ndarray, Y_aug: np.ndarray, Phi_check: np.ndarray, R_bar: np.ndarray, pi: np.ndarray,
                p: float) -> np.ndarray:
    """E[R̃_t] for a fixed Φ̌ when a_t ~ π_t (card step 6): X̃Φ̌Ỹᵀ + (1/p)·π_t ⊙ (R̄ − X̃Φ̌Ỹᵀ).

    It equals R̄ when Φ̌ = Φ* (then R̄ − X̃Φ̌Ỹᵀ = 0), and in general only then: the DR matrix is not entrywise
    unbiased for a wrong Φ̌.
    """
    P = X_aug @ Phi_check @ Y_aug.T
    return P + (pi.reshape(P.shape) / p) * (R_bar - P)


def kron_features(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Rows z_{iN+j} = x_i ⊗ y_j for X (d_x × M), Y (d_y × N): the Kronecker linearisation (MN × d_x d_y)."""
    return np.kron(X.T, Y.T)


class Agent:
    """Interface: ``choose()`` returns the pair (i, j) to pull; ``update(i, j, r)`` receives its reward."""

    name = "agent"

    def choose(self) -> tuple[int, int]:  # pragma: no cover - interface
        raise NotImplementedError

    def update(self, i: int, j: int, r: float) -> None:  # pragma: no cover - interface
        raise NotImplementedError


# ============================================================================================ BiRoLF / RoLF
class _Matched(Agent):
    """Steps 2–4 shared by BiRoLF and RoLF: greedy / forced-uniform â, 1/√t exploration, pseudo-action matching."""

    def __init__(self, inst: BilinearInstance, p: float, delta: float, explore_rounds: int,
                 rng: np.random.Generator) -> None:
        self.inst, self.p, self.delta, self.rng = inst, p, delta, rng
        self.M, self.N = inst.M, inst.N
        self.K = self.M * self.N
        self.explore_rounds = explore_rounds
        self.t = 0
        self.scores = np.zeros((self.M, self.N))  # X̃ Φ̂ Ỹᵀ, the greedy rule
        self.matched = False
        self.n_matched = 0
        self.n_unmatched = 0

    def choose(self) -> tuple[int, int]:
        self.t += 1
        rng, K = self.rng, self.K
        if self.t <= self.explore_rounds:
            a_hat = int(rng.integers(K))
        else:
            a_hat = int(np.argmax(self.scores))
        a = a_hat if rng.random() < 1.0 - 1.0 / math.sqrt(self.t) else _other_uniform(a_hat, K, rng)
        pseudo, _ = resample_pseudo_action(a, K, self.p, rho_t(self.t, self.p, self.delta), rng)
        self.matched = pseudo == a
        if self.matched:
            self.n_matched += 1
        else:
            self.n_unmatched += 1
        return divmod(a, self.N)


class BiRoLF(_Matched):
    """BiRoLF (card *Method*): augmented bases, matching, DR pseudo-reward matrices, bilinear DR-Lasso."""

    name = "birolf"

    def __init__(self, inst: BilinearInstance, *, sigma: float, delta: float, p: float, lam_c_impute: float,
                 lam_c_main: float, explore_rounds: int, rng: np.random.Generator, blockwise: bool = True,
                 impute_iters: int = 200, tol: float = 1e-6, record: bool = False, backend: str = "auto",
                 reimpute: bool = False, kkt_rel: float | None = 1e-5) -> None:
        super().__init__(inst, p, delta, explore_rounds, rng)
        self.kkt_rel = kkt_rel
        self.sigma, self.c_imp, self.c_main = sigma, lam_c_impute, lam_c_main
        self.reimpute = reimpute
        self.blockwise, self.impute_iters, self.tol, self.backend = blockwise, impute_iters, tol, backend
        self.Xa, self.Ya, self.dx, self.dy = inst.X_aug, inst.Y_aug, inst.d_x, inst.d_y
        self.Gxo, self.Gyo = gram_blocks(self.Xa, self.dx), gram_blocks(self.Ya, self.dy)
        # exact block-diagonal Grams G_x = blockdiag(XXᵀ, I), G_y = blockdiag(YYᵀ, I)
        self.Gx = np.eye(self.M)
        self.Gx[:self.dx, :self.dx] = self.Gxo
        self.Gy = np.eye(self.N)
        self.Gy[:self.dy, :self.dy] = self.Gyo
        self.lam_x = float(np.linalg.eigvalsh(self.Gxo)[-1])
        self.lam_y = float(np.linalg.eigvalsh(self.Gyo)[-1])
        self.kappa = float(np.abs(self.Xa).max() * np.abs(self.Ya).max())  # κ_x κ_y: max |entry| of X̃, Ỹ
        self.Ncnt = np.zeros((self.M, self.N))
        self.S = np.zeros((self.M, self.N))
        self.lip = ImputeLipschitz(self.Xa, self.Ya)
        self.Phi_check = np.zeros((self.M, self.N))
        self.Phi_hat = np.zeros((self.M, self.N))
        self.B = np.zeros((self.M, self.N))
        self.Gamma = 0
        self.impute_iter_total = 0
        self.main_iter_total = 0
        self.main_kkt_max = 0.0      # largest in-loop KKT residual / max|B_t| reported by the solver
        self.record = record
        self.trace: list[tuple[np.ndarray, float]] = []

    def lambdas(self, t: int) -> tuple[float, float]:
        """(λ_imp,t, λ_main,t) of card steps 5 and 7."""
        root = math.sqrt(2.0 * t * math.log(2.0 * self.K * t * t / self.delta))
        lam_imp = self.c_imp * 2.0 * self.sigma * self.kappa * root
        lam_main = self.c_main * (4.0 * self.sigma * self.kappa / self.p) * root
        return lam_imp, lam_main

    def update(self, i: int, j: int, r: float) -> None:
        if not self.matched:
            return
        self.Ncnt[i, j] += 1.0
        self.S[i, j] += r
        L_imp = 2.0 * self.lip.add(i, j, self.Ncnt)
        lam_imp, lam_main = self.lambdas(self.t)
        self.Phi_check, it = fista_impute(self.Xa, self.Ya, self.Ncnt, self.S, lam_imp, self.Phi_check, L_imp,
                                          self.impute_iters, self.tol, self.backend)
        self.impute_iter_total += it
        # X̃ᵀ R̃_t Ỹ = G_x Φ̌ G_y + α x̃_i ỹ_jᵀ,  α = (r − x̃_iᵀΦ̌ỹ_j)/p
        self.Gamma += 1
        if self.reimpute:
            # ablation: every past matched round re-imputed with the current Φ̌ (as RoLF's main estimator does):
            # B = G_xΦ̌G_y + (1/(pΓ)) X̃ᵀ(S − N ⊙ X̃Φ̌Ỹᵀ)Ỹ
            P = self.Xa @ self.Phi_check @ self.Ya.T
            self.B = self.Gx @ self.Phi_check @ self.Gy \
                + (self.Xa.T @ (self.S - self.Ncnt * P) @ self.Ya) / (self.p * self.Gamma)
        else:
            xi, yj = self.Xa[i], self.Ya[j]
            alpha = (r - float(xi @ self.Phi_check @ yj)) / self.p
            term = self.Gx @ self.Phi_check @ self.Gy + alpha * np.outer(xi, yj)
            self.B += (term - self.B) / self.Gamma
        mu = lam_main / self.Gamma
        if self.record:
            self.trace.append((self.B.copy(), mu))
        if self.kkt_rel is None:     # the authors' fixed caps and step tolerance
            caps, full_cap, tol, ktol = (CODE_CAPS["oo"], CODE_CAPS["ou"], CODE_CAPS["uo"]), CODE_CAPS["full"], self.tol, 0.0
        else:                        # solved to KKT <= kkt_rel · max|B_t| (the card's in-loop accuracy)
            caps, full_cap, tol = (KKT_CAP,) * 3, KKT_CAP, 0.0
            ktol = self.kkt_rel * float(np.abs(self.B).max())
        if self.blockwise:
            self.Phi_hat, info = solve_main_blockwise(
                self.B, self.Gxo, self.Gyo, mu, self.dx, self.dy, self.Phi_hat, caps=caps, tol=tol, kkt_tol=ktol,
                lam_x=self.lam_x, lam_y=self.lam_y, backend=self.backend)
        else:
            self.Phi_hat, info = solve_main_full(self.B, self.Gx, self.Gy, mu, self.Phi_hat,
                                                 max_iter=full_cap, tol=tol, kkt_tol=ktol,
                                                 lam_x=max(self.lam_x, 1.0), lam_y=max(self.lam_y, 1.0),
                                                 backend=self.backend)
        self.main_kkt_max = max(self.main_kkt_max, info.kkt / max(float(np.abs(self.B).max()), 1e-300)) \
            if ktol > 0 else self.main_kkt_max
        self.main_iter_total += sum(info.iters.values())
        self.scores = self.Xa @ self.Phi_hat @ self.Ya.T


class RoLF(_Matched):
    """RoLF (linear predecessor): the same matching and DR-Lasso on Kronecker features k_ij = x̃_i ⊗ ỹ_j (dim MN).

    As in the authors' ``RoLFLasso``: λ_imp,t = c·2pσ√(2t log(2Kt²/δ)), λ_main,t = c·(1 + 2/p)σ√(…), K = MN;
    the main estimator re-imputes *all* matched rounds with the current Φ̌ (b = Γ G Φ̌ + (1/p)Σ(r − kᵀΦ̌)k) and is
    solved by vector FISTA with step 1/(2Γλ_max(KᵀK)), ≤ 200 iterations, tolerance 1e-6, warm-started.
    KᵀK = G_x ⊗ G_y, so every product with it is evaluated as G_x Φ G_y.
    """

    name = "rolf"

    def __init__(self, inst: BilinearInstance, *, sigma: float, delta: float, p: float, lam_c_impute: float,
                 lam_c_main: float, explore_rounds: int, rng: np.random.Generator, backend: str = "auto") -> None:
        super().__init__(inst, p, delta, explore_rounds, rng)
        self.sigma, self.c_imp, self.c_main, self.backend = sigma, lam_c_impute, lam_c_main, backend
        self.Xa, self.Ya = inst.X_aug, inst.Y_aug
        self.Gx, self.Gy = self.Xa.T @ self.Xa, self.Ya.T @ self.Ya
        self.L_main = 2.0 * float(np.linalg.eigvalsh(self.Gx)[-1] * np.linalg.eigvalsh(self.Gy)[-1])
        self.Ncnt = np.zeros((self.M, self.N))
        self.S = np.zeros((self.M, self.N))
        self.lip = ImputeLipschitz(self.Xa, self.Ya)
        self.Phi_check = np.zeros((self.M, self.N))
        self.Phi_hat = np.zeros((self.M, self.N))
        self.Gamma = 0

    def update(self, i: int, j: int, r: float) -> None:
        if not self.matched:
            return
        self.Ncnt[i, j] += 1.0
        self.S[i, j] += r
        L_imp = 2.0 * self.lip.add(i, j, self.Ncnt)
        root = math.sqrt(2.0 * self.t * math.log(2.0 * self.K * self.t ** 2 / self.delta))
        lam_imp = self.c_imp * 2.0 * self.p * self.sigma * root
        lam_main = self.c_main * (1.0 + 2.0 / self.p) * self.sigma * root
        self.Phi_check, _ = fista_impute(self.Xa, self.Ya, self.Ncnt, self.S, lam_imp, self.Phi_check, L_imp,
                                         200, 1e-6, self.backend)
        self.Gamma += 1
        P = self.Xa @ self.Phi_check @ self.Ya.T
        B_sum = self.Gamma * (self.Gx @ self.Phi_check @ self.Gy) \
            + (self.Xa.T @ (self.S - self.Ncnt * P) @ self.Ya) / self.p
        # dividing objective, step and threshold by Γ leaves the FISTA iterates unchanged
        self.Phi_hat, _, _ = fista_matrix(self.Gx, self.Gy, B_sum / self.Gamma, lam_main / self.Gamma, self.Phi_hat,
                                          self.L_main, 200, 1e-6, 0.0, 10, self.backend)
        self.scores = self.Xa @ self.Phi_hat @ self.Ya.T


# ============================================================================================ linear baselines
class _Ridge(Agent):
    """Ridge regression on fixed arm features Z (K × d) with V⁻¹ and the widths ‖z_a‖²_{V⁻¹} kept by Sherman–Morrison."""

    def __init__(self, Z: np.ndarray, N: int, lam: float, rng: np.random.Generator) -> None:
        self.Z, self.N, self.rng = Z, N, rng
        self.K, self.d = Z.shape
        self.lam = lam
        self.Vinv = np.eye(self.d) / lam
        self.xty = np.zeros(self.d)
        self.w2 = np.sum(Z * Z, axis=1) / lam      # diag(Z V⁻¹ Zᵀ)
        self.t = 0
        self.n = 0

    def theta(self) -> np.ndarray:
        return self.Vinv @ self.xty

    def update(self, i: int, j: int, r: float) -> None:
        z = self.Z[i * self.N + j]
        Vz = self.Vinv @ z
        den = 1.0 + float(z @ Vz)
        self.Vinv -= np.outer(Vz, Vz) / den
        self.w2 -= (self.Z @ Vz) ** 2 / den
        np.maximum(self.w2, 0.0, out=self.w2)
        self.xty += r * z
        self.n += 1

    def _pick(self, scores: np.ndarray) -> tuple[int, int]:
        return divmod(_argmax_random(scores, self.rng), self.N)


class LinUCB(_Ridge):
    """LinUCB (Li et al. 2010) on Kronecker features, as the authors configure it: λ = p and width
    α_t‖z‖_{V⁻¹} with α_t = (1 + √(ln(2/δ)/2))·√(ln t)."""

    name = "linucb"

    def __init__(self, Z: np.ndarray, N: int, *, lam: float, delta: float, rng: np.random.Generator) -> None:
        super().__init__(Z, N, lam, rng)
        self.alpha0 = 1.0 + math.sqrt(math.log(2.0 / delta) / 2.0)

    def choose(self) -> tuple[int, int]:
        self.t += 1
        alpha = self.alpha0 * math.sqrt(math.log(self.t))
        return self._pick(self.Z @ self.theta() + alpha * np.sqrt(self.w2))


class OFUL(_Ridge):
    """OFUL (Abbasi-Yadkori et al. 2011) on Kronecker features with the theory radius
    β_t = σ√(2 ln(1/δ) + d ln(1 + n/(λd))) + √λ·S (n observations so far; λ = 1, S = 1 as in the card)."""

    name = "oful"

    def __init__(self, Z: np.ndarray, N: int, *, sigma: float, delta: float, rng: np.random.Generator,
                 lam: float = 1.0, S: float = 1.0) -> None:
        super().__init__(Z, N, lam, rng)
        self.sigma, self.delta, self.S = sigma, delta, S

    def beta(self) -> float:
        return self.sigma * math.sqrt(2.0 * math.log(1.0 / self.delta)
                                      + self.d * math.log(1.0 + self.n / (self.lam * self.d))) + math.sqrt(self.lam) * self.S

    def choose(self) -> tuple[int, int]:
        self.t += 1
        return self._pick(self.Z @ self.theta() + self.beta() * np.sqrt(self.w2))


class LinTS(_Ridge):
    """Linear Thompson sampling (Agrawal & Goyal 2013): θ̃ ~ N(θ̂, v²V⁻¹), v = σ√(24/ε · d · ln(1/δ)), ε = 0.5,
    ridge λ = p (the authors' constants)."""

    name = "lints"

    def __init__(self, Z: np.ndarray, N: int, *, lam: float, sigma: float, delta: float, rng: np.random.Generator,
                 eps: float = 0.5) -> None:
        super().__init__(Z, N, lam, rng)
        self.v = sigma * math.sqrt(24.0 / eps * self.d * math.log(1.0 / delta))

    def choose(self) -> tuple[int, int]:
        self.t += 1
        C = np.linalg.cholesky(self.Vinv + 1e-12 * np.eye(self.d))
        theta = self.theta() + self.v * (C @ self.rng.standard_normal(self.d))
        return self._pick(self.Z @ theta)


class DRLassoBandit(Agent):
    """DR-Lasso bandit (Kim & Paik 2019), as configured in the authors' code.

    Each round: with probability λ₁(t) = min(1, λ₁√((log t + log d)/t)) a uniform arm, else the greedy
    argmax z_aᵀβ̂ (uniform during the first z_T = 10 rounds); DR pseudo-reward
    r̂ = mean_a(z_aᵀβ̂) + (r − z_{a_t}ᵀβ̂)/(K π_{a_t}), truncated to [−3, 3]; Lasso of r̂_τ on the *averaged*
    context x̄_τ = mean_a z_a with λ₂(t) = λ₂√((log t + log d)/t), solved by FISTA (the code uses SLSQP).
    With fixed arm features, as here, x̄_τ is the same every round: the algorithm was designed for
    stochastic contexts and its regression sees a single design point.
    """

    name = "dr_lasso"

    def __init__(self, Z: np.ndarray, N: int, *, rng: np.random.Generator, lam1: float = 1.0, lam2: float = 0.5,
                 zT: int = 10, trunc: float = 3.0) -> None:
        self.Z, self.N, self.rng = Z, N, rng
        self.K, self.d = Z.shape
        self.lam1, self.lam2, self.zT, self.trunc = lam1, lam2, zT, trunc
        self.beta = np.zeros(self.d)
        self.G = np.zeros((self.d, self.d))
        self.b = np.zeros(self.d)
        self.t = 0
        self.pi = 1.0 / self.K
        self.zbar = Z.mean(axis=0)

    def choose(self) -> tuple[int, int]:
        self.t += 1
        est = self.Z @ self.beta
        self.rhat_mean = float(est.mean())
        if self.t <= self.zT:
            a = int(self.rng.integers(self.K))
            self.pi = 1.0 / self.K
        else:
            l1 = min(1.0, max(0.0, self.lam1 * math.sqrt((math.log(self.t) + math.log(self.d)) / self.t)))
            greedy = int(np.argmax(est))
            a = int(self.rng.integers(self.K)) if self.rng.random() < l1 else greedy
            self.pi = l1 / self.K + (1.0 - l1) * (a == greedy)
        return divmod(a, self.N)

    def update(self, i: int, j: int, r: float) -> None:
        a = i * self.N + j
        rhat = self.rhat_mean + (r - float(self.Z[a] @ self.beta)) / (self.K * self.pi)
        rhat = min(self.trunc, max(-self.trunc, rhat))
        self.G += np.outer(self.zbar, self.zbar)
        self.b += rhat * self.zbar
        lam2 = self.lam2 * math.sqrt((math.log(self.t) + math.log(self.d)) / self.t)
        L = 2.0 * max(float(np.linalg.eigvalsh(self.G)[-1]), 1e-12)
        self.beta, _ = fista_vector_lasso(self.G, self.b, lam2, self.beta, L, 1000, 1e-8)


class ESTRLowOFUL(Agent):
    """ESTR + LowOFUL (Jun et al. 2019) on the observed features, configured as in the authors' code.

    Stage 1 (T₁ = MN rounds): pick d_x users and d_y items by pivoted QR (well-conditioned), pull the
    d_x × d_y grid as evenly as possible, estimate Θ̂ = X_sel⁻¹ K̃ Y_sel⁻ᵀ from the average rewards K̃, and
    take its SVD. Stage 2: rotate features by [Û Û⊥], [V̂ V̂⊥], vectorise x'y'ᵀ with the first
    k = r(d_x + d_y) − r² coordinates the "low-rank" block, and run LowOFUL with Λ = diag(λ·1_k, λ⊥·1_{p−k})
    and radius σ√(log(|V_t|/|Λ|) + 2 ln(1/δ)) + √λ·B + √λ⊥·B⊥. Code values: r = min(d_x, d_y), λ = λ⊥ = p,
    B = B⊥ = 1. With r = min(d_x, d_y) = d_x = d_y the "low-rank" block is everything (k = p), so stage 2 is
    OFUL in a rotated basis.
    """

    name = "estr_lowoful"

    def __init__(self, X: np.ndarray, Y: np.ndarray, *, T1: int, lam: float, lam_perp: float, sigma: float,
                 delta: float, rng: np.random.Generator, r: int | None = None, B: float = 1.0,
                 B_perp: float = 1.0) -> None:
        from scipy.linalg import qr

        self.Xr, self.Yr = X.T.copy(), Y.T.copy()      # rows = arms: (M, d1), (N, d2)
        self.M, self.d1 = self.Xr.shape
        self.N, self.d2 = self.Yr.shape
        self.r = min(self.d1, self.d2) if r is None else r
        self.T1, self.lam, self.lam_perp, self.sigma, self.delta = T1, lam, lam_perp, sigma, delta
        self.Bn, self.Bp, self.rng = B, B_perp, rng
        self.sel_x = qr(self.Xr.T, mode="economic", pivoting=True)[2][: self.d1]
        self.sel_y = qr(self.Yr.T, mode="economic", pivoting=True)[2][: self.d2]
        self.K_sum = np.zeros((self.d1, self.d2))
        self.K_cnt = np.zeros((self.d1, self.d2), dtype=int)
        self.t = 0
        self.ready = False

    def _features(self) -> np.ndarray:
        r = self.r
        Xq, Yq = self.Xr @ self.Qx, self.Yr @ self.Qy
        blocks = []
        for xs, ys in ((slice(0, r), slice(0, r)), (slice(r, None), slice(0, r)),
                       (slice(0, r), slice(r, None)), (slice(r, None), slice(r, None))):
            # vec of x[xs] y[ys]ᵀ (column-major), for every pair (i, j), row i·N + j
            outer = Xq[:, None, xs, None] * Yq[None, :, None, ys]          # (M, N, a, b)
            blocks.append(outer.transpose(0, 1, 3, 2).reshape(self.M * self.N, -1))
        return np.hstack(blocks)

    def _finalize(self) -> None:
        Kt = np.divide(self.K_sum, np.maximum(self.K_cnt, 1))
        Theta = np.linalg.pinv(self.Xr[self.sel_x]) @ Kt @ np.linalg.pinv(self.Yr[self.sel_y].T)
        U, _, Vt = np.linalg.svd(Theta)
        self.Qx, self.Qy = U, Vt.T           # [Û Û⊥] and [V̂ V̂⊥] (full SVD bases)
        self.A = self._features()
        p = self.A.shape[1]
        k = min(p, (self.d1 + self.d2) * self.r - self.r ** 2)
        lam_diag = np.r_[np.full(k, self.lam), np.full(p - k, self.lam_perp)]
        self.Vinv = np.diag(1.0 / lam_diag)
        self.logdet_ratio = 0.0              # log |V_t| − log |Λ|
        self.xty = np.zeros(p)
        self.w2 = np.einsum("kd,d,kd->k", self.A, 1.0 / lam_diag, self.A)
        self.ready = True

    def choose(self) -> tuple[int, int]:
        self.t += 1
        if self.t <= self.T1:
            cells = np.argwhere(self.K_cnt == self.K_cnt.min())
            il, jl = cells[self.rng.integers(len(cells))]
            self._cell = (int(il), int(jl))
            return int(self.sel_x[il]), int(self.sel_y[jl])
        if not self.ready:
            self._finalize()
        radius = self.sigma * math.sqrt(self.logdet_ratio + 2.0 * math.log(1.0 / self.delta)) \
            + math.sqrt(self.lam) * self.Bn + math.sqrt(self.lam_perp) * self.Bp
        scores = self.A @ (self.Vinv @ self.xty) + radius * np.sqrt(self.w2)
        return divmod(_argmax_random(scores, self.rng), self.N)

    def update(self, i: int, j: int, r: float) -> None:
        if self.t <= self.T1:
            self.K_sum[self._cell] += r
            self.K_cnt[self._cell] += 1
            return
        a = self.A[i * self.N + j]
        Va = self.Vinv @ a
        den = 1.0 + float(a @ Va)
        self.logdet_ratio += math.log(den)
        self.Vinv -= np.outer(Va, Va) / den
        self.w2 -= (self.A @ Va) ** 2 / den
        np.maximum(self.w2, 0.0, out=self.w2)
        self.xty += r * a


class UCBDelta(Agent):
    """UCB(δ) over the MN pairs, no features: index q_a + √(2 ln(1/δ)/n_a), unpulled pairs first."""

    name = "ucb"

    def __init__(self, M: int, N: int, *, delta: float, rng: np.random.Generator) -> None:
        self.N, self.rng = N, rng
        self.q = np.zeros(M * N)
        self.n = np.zeros(M * N)
        self.w = math.sqrt(2.0 * math.log(1.0 / delta))

    def choose(self) -> tuple[int, int]:
        with np.errstate(divide="ignore"):
            idx = np.where(self.n > 0, self.q + self.w / np.sqrt(self.n), np.inf)
        return divmod(_argmax_random(idx, self.rng), self.N)

    def update(self, i: int, j: int, r: float) -> None:
        a = i * self.N + j
        self.n[a] += 1
        self.q[a] += (r - self.q[a]) / self.n[a]


class UCBDeltaCode(UCBDelta):
    """UCB(δ) exactly as the authors' code computes it (``UCBDelta`` in their ``models.py``).

    Their bonuses live in an *integer* array (initialised with ``np.iinfo(np.int32).max``, the "unpulled" value),
    so each assignment of √(2 ln(1/δ)/n_a) is truncated towards zero: at δ = 0.1 the bonus after n = 1, 2, 3, 4
    pulls is 2, 1, 1, 1 and from n = 5 on it is 0 — the policy is greedy on the sample means after about five
    pulls per arm. Kept as a separate agent so that the chapter can be held against the authors' numbers; the
    correct index policy is :class:`UCBDelta`.
    """

    name = "ucb_code"

    def __init__(self, M: int, N: int, *, delta: float, rng: np.random.Generator) -> None:
        super().__init__(M, N, delta=delta, rng=rng)
        self.delta = delta
        self.bonus = np.full(M * N, np.iinfo(np.int32).max, dtype=np.int64)

    @staticmethod
    def truncated_bonus(n: int, delta: float) -> int:
        """The value the authors' integer array stores after the n-th pull: int(√(2 ln(1/δ)/n))."""
        return int(math.sqrt(2.0 * math.log(1.0 / delta) / n))

    def choose(self) -> tuple[int, int]:
        return divmod(_argmax_random(self.q + self.bonus, self.rng), self.N)

    def update(self, i: int, j: int, r: float) -> None:
        a = i * self.N + j
        super().update(i, j, r)
        self.bonus[a] = self.truncated_bonus(int(self.n[a]), self.delta)


class Oracle(Agent):
    """Always pulls argmax R̄ (knows the answer): zero regret by construction."""

    name = "oracle"

    def __init__(self, inst: BilinearInstance) -> None:
        self.best = divmod(int(np.argmax(inst.R_bar)), inst.N)

    def choose(self) -> tuple[int, int]:
        return self.best

    def update(self, i: int, j: int, r: float) -> None:
        pass


def make_agent(name: str, inst: BilinearInstance, rng: np.random.Generator, *, p: float, delta: float,
               sigma: float, lam_c_impute: float, lam_c_main: float, explore_mult: int,
               backend: str = "auto", reimpute: bool = False, kkt_rel: float | None = 1e-5) -> Agent:
    """Build agent ``name`` for ``inst`` with the chapter's constants (card *Baselines*).

    BiRoLF's own options: ``reimpute`` (ablation: rebuild B_t from every matched round with the current Φ̌)
    and ``kkt_rel`` (solve the main Lasso to KKT ≤ kkt_rel·max|B_t|; ``None``: the authors' fixed caps).
    """
    explore = explore_mult * inst.M * inst.N
    if name in ("birolf", "birolf_full"):
        return BiRoLF(inst, sigma=sigma, delta=delta, p=p, lam_c_impute=lam_c_impute, lam_c_main=lam_c_main,
                      explore_rounds=explore, rng=rng, blockwise=name == "birolf", backend=backend,
                      reimpute=reimpute, kkt_rel=kkt_rel)
    if name == "rolf":
        return RoLF(inst, sigma=sigma, delta=delta, p=p, lam_c_impute=lam_c_impute, lam_c_main=lam_c_main,
                    explore_rounds=explore, rng=rng, backend=backend)
    if name == "ucb":
        return UCBDelta(inst.M, inst.N, delta=delta, rng=rng)
    if name == "ucb_code":
        return UCBDeltaCode(inst.M, inst.N, delta=delta, rng=rng)
    if name == "oful_true":
        return OFUL(kron_features(inst.X_star, inst.Y_star), inst.N, sigma=sigma, delta=delta, rng=rng)
    if name == "oracle":
        return Oracle(inst)
    if name == "estr_lowoful":
        return ESTRLowOFUL(inst.X, inst.Y, T1=inst.M * inst.N, lam=p, lam_perp=p, sigma=sigma, delta=delta, rng=rng)
    Z = kron_features(inst.X, inst.Y)
    if name == "linucb":
        return LinUCB(Z, inst.N, lam=p, delta=delta, rng=rng)
    if name == "oful":
        return OFUL(Z, inst.N, sigma=sigma, delta=delta, rng=rng)
    if name == "lints":
        return LinTS(Z, inst.N, lam=p, sigma=sigma, delta=delta, rng=rng)
    if name == "dr_lasso":
        return DRLassoBandit(Z, inst.N, rng=rng)
    raise ValueError(f"unknown agent {name!r}; known: {', '.join(AGENT_LABELS)}")
