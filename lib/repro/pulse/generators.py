"""Signal generators of chapter 19: the dynamical systems whose *parameters* define a class and whose
*initial state* and noise are window-specific nuisances (the setting of PULSE's theory, Sec. 3 of the paper).

Three families, all seeded from numpy ``Generator``s:

* :func:`lorenz_sde` -- the paper's synthetic study (official ``data/process/analysis``): the Lorenz system
  dx = s f_rho(x) dt + g dW with class = rho, nuisance = the N(0, I) initial condition, additive process
  noise g = level x RMS of the clean trajectories, z-scored per system.
* :func:`ecgsyn` -- the McSharry et al. (2003) ECGSYN ODE, driven by an RR process with respiratory sinus
  arrhythmia and Mayer waves; :func:`sample_subjects` draws subjects of four morphology/rhythm classes,
  :func:`add_nuisance` adds phase, gain, baseline wander and EMG-like noise.
* :func:`ppg_like` -- a two-Gaussian pulse wave driven by the same RR process, three "vascular" classes that
  differ in dicrotic-notch depth and timing (the transfer target).

Both ODEs are integrated by a compiled batched RK4 (``_kernels.cpp``) with a numpy reference here that
consumes identical inputs (``backend="numpy"``); the two agree to ~1e-13.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

try:  # the compiled kernel; the numpy reference below is the fallback
    from . import _kernels
    HAVE_KERNEL = True
except ImportError:  # pragma: no cover - exercised only when the extension is not built
    _kernels = None
    HAVE_KERNEL = False

Backend = Literal["auto", "cpp", "numpy"]

# ----------------------------------------------------------------------------------------------- Lorenz
LORENZ_SIGMA, LORENZ_BETA = 10.0, 8.0 / 3.0
#: the official sweep: rho grid and speeds linspace(16, 8) over it (configs/lorenz-base.yaml)
OFFICIAL_RHO_GRID = np.array([28, 41, 55, 69, 83, 96, 110, 124, 138, 152], float)
OFFICIAL_SPEEDS = np.linspace(16.0, 8.0, 10)
LORENZ_DT = 12.0 / 10_000  # the official 10,000 points over 12 time units


def lorenz_speed(rho: float) -> float:
    """Speed s of the official sweep for ``rho`` (exact on its grid, linear in between)."""
    return float(np.interp(rho, OFFICIAL_RHO_GRID, OFFICIAL_SPEEDS))


def _resolve(backend: Backend) -> str:
    if backend == "auto":
        return "cpp" if HAVE_KERNEL else "numpy"
    if backend == "cpp" and not HAVE_KERNEL:
        raise RuntimeError("the compiled kernel repro.pulse._kernels is not built; "
                           "run `python setup.py build_ext --inplace` or use backend='numpy'")
    if backend not in ("cpp", "numpy"):
        raise ValueError(f"backend must be 'auto', 'cpp' or 'numpy'; got {backend!r}")
    return backend


def lorenz_drift(s: np.ndarray, rho: np.ndarray, speed: np.ndarray) -> np.ndarray:
    """s f_rho(x) for a batch of states ``s`` (B, 3); ``rho`` and ``speed`` are (B,)."""
    x, y, z = s[:, 0], s[:, 1], s[:, 2]
    return np.stack([speed * (LORENZ_SIGMA * (y - x)),
                     speed * (x * (rho - z) - y),
                     speed * (x * y - LORENZ_BETA * z)], axis=1)


def lorenz_sde_numpy(x0: np.ndarray, noise: np.ndarray, rho: np.ndarray, speed: np.ndarray,
                     g: np.ndarray, h: float) -> np.ndarray:
    """Reference: X_{n+1} = RK4_h(X_n; s f_rho) + g sqrt(h) xi_n, vectorised over rows. (B, N+1, 3)."""
    B, N, _ = noise.shape
    out = np.empty((B, N + 1, 3))
    s = x0.astype(float).copy()
    out[:, 0] = s
    gs = (g * np.sqrt(h))[:, None]
    for n in range(N):
        k1 = lorenz_drift(s, rho, speed)
        k2 = lorenz_drift(s + 0.5 * h * k1, rho, speed)
        k3 = lorenz_drift(s + 0.5 * h * k2, rho, speed)
        k4 = lorenz_drift(s + h * k3, rho, speed)
        s = s + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4) + gs * noise[:, n]
        out[:, n + 1] = s
    return out


def integrate_lorenz(x0: np.ndarray, noise: np.ndarray, rho, speed, g, h: float,
                     backend: Backend = "auto") -> np.ndarray:
    """Batched Lorenz SDE with the noise passed in (so both backends consume identical randomness)."""
    B = len(x0)
    as_row = lambda v: np.ascontiguousarray(np.broadcast_to(np.asarray(v, float), (B,)))
    rho, speed, g = as_row(rho), as_row(speed), as_row(g)
    x0 = np.ascontiguousarray(x0, dtype=float)
    noise = np.ascontiguousarray(noise, dtype=float)
    if _resolve(backend) == "cpp":
        return _kernels.lorenz_sde(x0, noise, rho, speed, g, LORENZ_SIGMA, LORENZ_BETA, float(h))
    return lorenz_sde_numpy(x0, noise, rho, speed, g, h)


def lorenz_sde(rho: float, speed: float | None = None, n_traj: int = 20, n_keep: int = 1000,
               noise: float = 0.1, dt: float = LORENZ_DT, seed: int | np.random.Generator = 0,
               backend: Backend = "auto", burn_in: int = 200, z_score: bool = True
               ) -> tuple[np.ndarray, dict]:
    """``n_traj`` trajectories of one Lorenz system (official ``generate_fullts``), shape (n_traj, n_keep, 3).

    A clean run (g = 0) from the same N(0, I) initial conditions sets the noise scale
    g = ``noise`` x sqrt(mean ||x - mean||^2) (the RMS of the centred clean trajectories); the noisy run keeps
    ``n_keep`` points after ``burn_in`` and, if ``z_score``, subtracts the per-dimension mean over
    trajectories and time and divides by one scalar std (the official per-system normalisation).
    Returns the data and a dict with ``x0``, ``g``, ``rho``, ``speed``, ``mean``, ``std``.
    """
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    speed = lorenz_speed(rho) if speed is None else float(speed)
    n_steps = burn_in + n_keep - 1
    x0 = rng.standard_normal((n_traj, 3))
    xi = rng.standard_normal((n_traj, n_steps, 3))
    clean = integrate_lorenz(x0, np.zeros_like(xi), rho, speed, 0.0, dt, backend)[:, burn_in:]
    rms = float(np.sqrt((np.linalg.norm(clean - clean.mean((0, 1)), axis=2) ** 2).mean()))
    g = noise * rms
    ys = integrate_lorenz(x0, xi, rho, speed, g, dt, backend)[:, burn_in:] if g > 0 else clean
    if not np.all(np.isfinite(ys)):
        raise FloatingPointError(f"Lorenz SDE diverged at rho={rho}, speed={speed}, dt={dt}")
    mean, std = ys.mean((0, 1)), float(ys.std())
    if z_score:
        ys = (ys - mean) / std
    return ys, dict(x0=x0, g=g, rho=float(rho), speed=speed, mean=mean, std=std, rms=rms)


# ----------------------------------------------------------------------------------------------- ECGSYN
#: McSharry et al. (2003), Table 1: angles (rad), amplitudes and widths of the P, Q, R, S, T waves
ECG_THETA = np.array([-np.pi / 3, -np.pi / 12, 0.0, np.pi / 12, np.pi / 2])
ECG_A = np.array([1.2, -5.0, 30.0, -7.5, 0.75])
ECG_B = np.array([0.25, 0.1, 0.1, 0.1, 0.4])
ECG_CLASSES = ("normal", "wide QRS", "inverted T", "irregular rhythm")
PPG_CLASSES = ("deep late notch", "shallow notch", "no notch")
QRS = [1, 2, 3]
WIDE_QRS_FACTOR = 2.2


@dataclass
class Subjects:
    """Per-subject parameters of the ECG (or PPG) generator; every array has one row per subject."""

    label: np.ndarray            # (n,) class index
    rr0: np.ndarray              # (n,) mean RR interval, s
    rr_cv: np.ndarray            # (n,) per-beat jitter (std/mean); 0.2 for the irregular class
    irregular: np.ndarray        # (n,) bool: RR iid (AF-like) instead of the modulated process
    f_rsa: np.ndarray            # (n,) respiratory frequency (RSA and z0 wander), Hz
    f_mayer: np.ndarray          # (n,) Mayer-wave frequency, Hz
    phases: np.ndarray           # (n, 3) phases of RSA, Mayer wave and z0 wander
    a: np.ndarray                # (n, 5) wave amplitudes (ECG) / pulse parameters (PPG)
    b: np.ndarray                # (n, 5) wave widths
    theta: np.ndarray            # (n, 5) wave angles
    extra: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.label)

    def take(self, idx) -> "Subjects":
        pick = lambda v: v[idx] if isinstance(v, np.ndarray) else v
        return Subjects(**{k: pick(getattr(self, k)) for k in
                           ("label", "rr0", "rr_cv", "irregular", "f_rsa", "f_mayer", "phases", "a", "b", "theta")},
                        extra={k: pick(v) for k, v in self.extra.items()})


def sample_subjects(n_subjects: int, rng: np.random.Generator, n_classes: int = 4,
                    jitter: bool = True, wide_factor: float = WIDE_QRS_FACTOR, t_factor: float = -0.7) -> Subjects:
    """Balanced subjects of the four ECG classes: normal; wide QRS (b_Q, b_R, b_S x 2.2); inverted T
    (a_T -> -0.7 a_T); irregular rhythm (RR iid, CV 0.2). Each subject: +-8% on every a_i, b_i, theta_i and
    RR0 ~ U[0.65, 1.1] s. ``jitter=False`` removes the per-beat RR jitter (for the convergence test).
    ``wide_factor`` and ``t_factor`` move the two morphology classes closer to normal (the ECG difficulty rule's
    candidates, :data:`ECG_SETTINGS`); their defaults are the card's 2.2 and -0.7.

    Widening a Gaussian of ECGSYN's z-equation multiplies its deflection by b^2 (the drive integrates to
    ~ a b^2 / omega); we divide a_Q, a_R, a_S by 2.2^2 so that the wide-QRS class differs in *width*, not in a
    five-fold taller R wave that a gain-invariant reader would find trivially (a choice the card leaves open).
    """
    label = np.arange(n_subjects) % n_classes
    rng.shuffle(label)
    u = lambda lo, hi, size=None: rng.uniform(lo, hi, size=size)
    a = ECG_A * u(0.92, 1.08, (n_subjects, 5))
    b = ECG_B * u(0.92, 1.08, (n_subjects, 5))
    theta = ECG_THETA * u(0.92, 1.08, (n_subjects, 5))
    wide = label == 1
    b[np.ix_(wide, QRS)] *= wide_factor
    a[np.ix_(wide, QRS)] /= wide_factor ** 2
    a[label == 2, 4] *= t_factor
    irregular = label == 3
    rr_cv = np.where(irregular, 0.2, 0.02 if jitter else 0.0)
    return Subjects(label=label, rr0=u(0.65, 1.1, n_subjects), rr_cv=rr_cv, irregular=irregular,
                    f_rsa=u(0.2, 0.35, n_subjects), f_mayer=u(0.08, 0.12, n_subjects),
                    phases=u(0, 2 * np.pi, (n_subjects, 3)), a=a, b=b, theta=theta)


def rr_modulation(subj: Subjects, i: int, t: np.ndarray) -> np.ndarray:
    """RR0 (1 + 0.04 sin 2 pi f_rsa t + 0.03 sin 2 pi f_mayer t) for subject ``i`` at times ``t`` (s)."""
    ph = subj.phases[i]
    return subj.rr0[i] * (1 + 0.04 * np.sin(2 * np.pi * subj.f_rsa[i] * t + ph[0])
                          + 0.03 * np.sin(2 * np.pi * subj.f_mayer[i] * t + ph[1]))


def beat_times(subj: Subjects, i: int, seconds: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Beat onsets t_k and intervals RR_k covering [0, seconds]: the modulated RR process times
    (1 + CV ξ_k) per beat, or iid Gamma intervals with CV 0.2 for the irregular rhythm (clipped to [0.3, 2] s)."""
    return extend_beats(subj, i, [], [], 0.0, seconds, rng)


def extend_beats(subj: Subjects, i: int, ts: list, rrs: list, t: float, seconds: float,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Append beats (onset, interval) of subject ``i`` to ``ts``, ``rrs`` from onset ``t`` until past ``seconds`` + 2."""
    while t <= seconds + 2.0:
        rr = _next_rr(subj, i, t, rng)
        ts.append(t)
        rrs.append(rr)
        t += rr
    return np.array(ts), np.array(rrs)


def _next_rr(subj: Subjects, i: int, t: float, rng: np.random.Generator) -> float:
    """The interval RR_k of subject ``i``'s beat at onset ``t`` (one draw from ``rng``; see :func:`beat_times`)."""
    if subj.irregular[i]:
        k = 1.0 / subj.rr_cv[i] ** 2
        return float(np.clip(rng.gamma(k, subj.rr0[i] / k), 0.3, 2.0))
    return float(rr_modulation(subj, i, np.array([t]))[0] * (1 + subj.rr_cv[i] * rng.standard_normal()))


def rr_on_grid(subj: Subjects, i: int, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """RR(t) on a time grid: smooth when the subject has no per-beat randomness, else piecewise constant per beat."""
    if subj.rr_cv[i] == 0 and not subj.irregular[i]:
        return rr_modulation(subj, i, t)
    tk, rr = beat_times(subj, i, float(t[-1]), rng)
    return rr[np.searchsorted(tk, t, side="right") - 1]


def ecg_rhs(s: np.ndarray, w: np.ndarray, z0: np.ndarray, a: np.ndarray, b: np.ndarray,
            theta: np.ndarray) -> np.ndarray:
    """The ECGSYN right-hand side for a batch of states ``s`` (B, 3)."""
    x, y, z = s[:, 0], s[:, 1], s[:, 2]
    alpha = 1.0 - np.sqrt(x * x + y * y)
    th = np.arctan2(y, x)
    d = np.mod(th[:, None] - theta + np.pi, 2 * np.pi) - np.pi
    dz = np.zeros_like(z)
    for i in range(5):  # same summation order as the kernel
        dz = dz - a[:, i] * d[:, i] * np.exp(-d[:, i] * d[:, i] / (2.0 * b[:, i] * b[:, i]))
    dz = dz - (z - z0)
    return np.stack([alpha * x - w * y, alpha * y + w * x, dz], axis=1)


def ecgsyn_rk4_numpy(x0, omega_half, z0_half, a, b, theta, h) -> np.ndarray:
    """Reference RK4 on ECGSYN, vectorised over subjects; inputs as in the kernel. (B, N+1, 3)."""
    N = (omega_half.shape[1] - 1) // 2
    out = np.empty((len(x0), N + 1, 3))
    s = x0.astype(float).copy()
    out[:, 0] = s
    for n in range(N):
        w0, wm, w1 = omega_half[:, 2 * n], omega_half[:, 2 * n + 1], omega_half[:, 2 * n + 2]
        z00, z0m, z01 = z0_half[:, 2 * n], z0_half[:, 2 * n + 1], z0_half[:, 2 * n + 2]
        k1 = ecg_rhs(s, w0, z00, a, b, theta)
        k2 = ecg_rhs(s + 0.5 * h * k1, wm, z0m, a, b, theta)
        k3 = ecg_rhs(s + 0.5 * h * k2, wm, z0m, a, b, theta)
        k4 = ecg_rhs(s + h * k3, w1, z01, a, b, theta)
        s = s + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        out[:, n + 1] = s
    return out


def integrate_ecg(x0, omega_half, z0_half, a, b, theta, h: float, backend: Backend = "auto") -> np.ndarray:
    """Batched RK4 on ECGSYN; ``omega_half``, ``z0_half`` are (B, 2N+1) samples on the half-step grid."""
    c = lambda v: np.ascontiguousarray(v, dtype=float)
    args = [c(v) for v in (x0, omega_half, z0_half, a, b, theta)]
    if _resolve(backend) == "cpp":
        return _kernels.ecgsyn_rk4(*args, float(h))
    return ecgsyn_rk4_numpy(*args, h)


def ecg_drive(subj: Subjects, seconds: float, h: float, rng: np.random.Generator,
              z0_amp: float = 0.005) -> tuple[np.ndarray, np.ndarray]:
    """omega(t) = 2 pi / RR(t) and the respiratory baseline z0(t) = A sin(2 pi f_rsa t) on the half-step grid.

    A = 0.005 in ECGSYN's raw z units is McSharry's 0.15 mV once z is rescaled to the [-0.4, 1.2] mV range."""
    n_steps = int(round(seconds / h))
    t_half = np.arange(2 * n_steps + 1) * (h / 2)
    omega = np.stack([2 * np.pi / rr_on_grid(subj, i, t_half, rng) for i in range(len(subj))])
    z0 = z0_amp * np.sin(2 * np.pi * subj.f_rsa[:, None] * t_half + subj.phases[:, 2:3])
    return omega, z0


def ecgsyn(subj: Subjects, seconds: float, fs_int: int = 500, fs: int = 50,
           seed: int | np.random.Generator = 0, backend: Backend = "auto",
           return_internal: bool = False):
    """Noise-free ECGSYN z(t) of every subject: RK4 at ``fs_int`` Hz from a random phase on the limit cycle,
    block-averaged by fs_int/fs. Returns (n_subjects, seconds*fs) (and the internal-rate trajectories)."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    if fs_int % fs:
        raise ValueError(f"fs_int ({fs_int}) must be a multiple of fs ({fs})")
    h = 1.0 / fs_int
    omega, z0 = ecg_drive(subj, seconds, h, rng)
    phi = rng.uniform(-np.pi, np.pi, len(subj))
    x0 = np.stack([np.cos(phi), np.sin(phi), np.zeros_like(phi)], axis=1)
    traj = integrate_ecg(x0, omega, z0, subj.a, subj.b, subj.theta, h, backend)
    z = traj[:, 1:, 2]
    n_out = int(round(seconds * fs))
    k = fs_int // fs
    out = z[:, : n_out * k].reshape(len(subj), n_out, k).mean(axis=2)
    return (out, traj) if return_internal else out


def two_channels(z: np.ndarray) -> np.ndarray:
    """(n, L) -> (n, L, 2): the signal and a 0.6/0.4 mix of it with its per-sample derivative."""
    dz = np.gradient(z, axis=1)
    return np.stack([z, 0.6 * z + 0.4 * dz], axis=-1)


def add_nuisance(x: np.ndarray, fs: int, rng: np.random.Generator, noise: float = 0.05,
                 wander: tuple[float, float] = (0.05, 0.2), gain: tuple[float, float] = (0.7, 1.3)) -> np.ndarray:
    """Window-independent nuisances of each recording (n, L, C): gain in ``gain`` ([0.7, 1.3]), baseline wander
    at 0.1-0.4 Hz (amplitude ``wander`` x the recording's std) and white EMG-like noise (``noise`` x std)."""
    n, L, C = x.shape
    t = np.arange(L) / fs
    scale = x.std(axis=(1, 2), keepdims=True)
    gain = rng.uniform(*gain, (n, 1, 1))
    f = rng.uniform(0.1, 0.4, (n, 1, 1))
    amp = rng.uniform(*wander, (n, 1, 1)) * scale
    ph = rng.uniform(0, 2 * np.pi, (n, 1, 1))
    base = amp * np.sin(2 * np.pi * f * t[None, :, None] + ph)
    return gain * x + base + noise * scale * rng.standard_normal((n, L, C))


def qrs_peaks(z: np.ndarray, fs: float, refractory: float = 0.25, window: float = 0.08) -> np.ndarray:
    """Sample indices of QRS complexes in one ECG trace ``z`` (1-d), by their *slope energy* (a Pan-Tompkins-style
    detector): the squared derivative, integrated over ``window`` seconds, peaks at each QRS; the peak of |z - median|
    within +-``window`` of it is returned.

    A height threshold on z itself is fragile here: the T wave reaches about half the R wave in some subjects of
    every class (ECGSYN's T is broad), and with gain, wander and noise it crosses a "half of the maximum" line, so
    such a detector counts T waves and doubles the rate. The QRS is the steepest part of the beat even when
    widened 2.2x (its slope falls 2.2x, the T wave's is smaller still), so slope energy separates them."""
    z = np.asarray(z, float)
    d = np.gradient(z) * fs
    w = max(1, int(round(window * fs)))
    energy = np.convolve(d * d, np.ones(w) / w, mode="same")
    from scipy.signal import find_peaks

    cand, _ = find_peaks(energy, height=0.3 * np.quantile(energy, 0.99), distance=max(1, int(refractory * fs)))
    dev = np.abs(z - np.median(z))
    return np.array([max(0, c - w) + int(np.argmax(dev[max(0, c - w):c + w + 1])) for c in cand], dtype=int)


def heart_rate_bpm(z: np.ndarray, fs: float) -> float:
    """Mean heart rate (beats per minute) of one ECG trace from the intervals between :func:`qrs_peaks`."""
    p = qrs_peaks(z, fs)
    return float(60.0 / (np.diff(p).mean() / fs)) if len(p) > 1 else float("nan")


# ----------------------------------------------------------------------------------------------- PPG
def sample_ppg_subjects(n_subjects: int, rng: np.random.Generator) -> Subjects:
    """Three balanced 'vascular' classes of a two-Gaussian pulse (systolic + diastolic wave): the diastolic
    wave's relative amplitude and delay set the dicrotic notch -- deep and late, shallow, or absent."""
    label = np.arange(n_subjects) % 3
    rng.shuffle(label)
    u = lambda lo, hi, size=None: rng.uniform(lo, hi, size=size)
    dia_amp = np.array([0.6, 0.38, 0.18])[label] * u(0.92, 1.08, n_subjects)
    dia_delay = np.array([0.36, 0.28, 0.2])[label] * u(0.92, 1.08, n_subjects)
    a = np.stack([np.ones(n_subjects), dia_amp, np.zeros(n_subjects), np.zeros(n_subjects),
                  np.zeros(n_subjects)], 1)
    b = np.stack([0.07 * u(0.92, 1.08, n_subjects), 0.1 * u(0.92, 1.08, n_subjects)] + [np.zeros(n_subjects)] * 3, 1)
    theta = np.stack([0.16 * u(0.92, 1.08, n_subjects), 0.16 + dia_delay] + [np.zeros(n_subjects)] * 3, 1)
    return Subjects(label=label, rr0=u(0.65, 1.1, n_subjects), rr_cv=np.full(n_subjects, 0.02),
                    irregular=np.zeros(n_subjects, bool), f_rsa=u(0.2, 0.35, n_subjects),
                    f_mayer=u(0.08, 0.12, n_subjects), phases=u(0, 2 * np.pi, (n_subjects, 3)),
                    a=a, b=b, theta=theta)


def ppg_like(subj: Subjects, seconds: float, fs: int = 50, fs_int: int = 500,
             seed: int | np.random.Generator = 0) -> np.ndarray:
    """Pulse waves sum_k [A_s G(t - t_k - mu_s RR_k; sigma_s RR_k) + A_d G(t - t_k - mu_d RR_k; sigma_d RR_k)]
    driven by the same RR process as the ECG, computed at ``fs_int`` and block-averaged to ``fs``. (n, L)."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    n_out = int(round(seconds * fs))
    k = fs_int // fs
    t = np.arange(n_out * k) / fs_int
    out = np.zeros((len(subj), n_out * k))
    for i in range(len(subj)):
        tk, rr = beat_times(subj, i, seconds, rng)
        tk = tk - rng.uniform(0, rr[0])  # random phase
        for w in range(2):
            mu = tk + subj.theta[i, w] * rr
            sd = subj.b[i, w] * rr
            out[i] += subj.a[i, w] * np.exp(-0.5 * ((t[None, :] - mu[:, None]) / sd[:, None]) ** 2).sum(0)
    return out.reshape(len(subj), n_out, k).mean(axis=2)


# ----------------------------------------------------------------------------------------------- windows
@dataclass
class WindowSet:
    """Windows cut from recordings: X (N, T, C), labels y, the recording each came from and its start."""

    X: np.ndarray
    y: np.ndarray
    rec: np.ndarray
    start: np.ndarray
    recordings: np.ndarray        # (R, L, C): the full recordings (for cross-window partners and shifts)
    rec_label: np.ndarray         # (R,)
    targets: dict = field(default_factory=dict)   # per-window analysis targets (Lorenz state, log rho)

    def __len__(self) -> int:
        return len(self.y)

    def subset(self, idx: np.ndarray) -> "WindowSet":
        return WindowSet(self.X[idx], self.y[idx], self.rec[idx], self.start[idx], self.recordings,
                         self.rec_label, {k: v[idx] for k, v in self.targets.items()})


@dataclass
class Dataset:
    """A train/val/test split by recording (subject or trajectory), with class names."""

    name: str
    train: WindowSet
    val: WindowSet
    test: WindowSet
    classes: tuple[str, ...]
    info: dict = field(default_factory=dict)

    @property
    def n_channels(self) -> int:
        return self.train.X.shape[2]


def make_windows(recordings: np.ndarray, rec_ids: np.ndarray, rec_label: np.ndarray, window: int,
                 stride: int) -> WindowSet:
    """Every window of length ``window`` and stride ``stride`` of the recordings ``rec_ids``."""
    L = recordings.shape[1]
    starts = np.arange(0, L - window + 1, stride)
    rec = np.repeat(rec_ids, len(starts))
    start = np.tile(starts, len(rec_ids))
    X = np.stack([recordings[r, s:s + window] for r, s in zip(rec, start)]).astype(np.float32)
    return WindowSet(X, rec_label[rec].astype(np.int64), rec, start, recordings, rec_label)


def subject_split(rec_label: np.ndarray, rng: np.random.Generator, fracs=(0.7, 0.15, 0.15)
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Recording ids of train / val / test, stratified by class: per class max(1, round(frac n)) go to val and
    to test, the rest to train. No recording is in two splits (no leakage between windows of one subject)."""
    parts = ([], [], [])
    for c in np.unique(rec_label):
        ids = rng.permutation(np.flatnonzero(rec_label == c))
        n_test = max(1, int(round(fracs[2] * len(ids))))
        n_val = max(1, int(round(fracs[1] * len(ids))))
        if len(ids) - n_test - n_val < 1:
            raise ValueError(f"class {c} has {len(ids)} recordings: too few for a three-way split")
        parts[2].extend(ids[:n_test])
        parts[1].extend(ids[n_test:n_test + n_val])
        parts[0].extend(ids[n_test + n_val:])
    return tuple(np.sort(np.array(p, int)) for p in parts)


def cap_windows(ws: WindowSet, max_windows: int, rng: np.random.Generator) -> WindowSet:
    """At most ``max_windows`` windows, the same fraction of every class (stratified subsample)."""
    if len(ws) <= max_windows:
        return ws
    keep = []
    for c in np.unique(ws.y):
        idx = np.flatnonzero(ws.y == c)
        k = max(1, int(round(max_windows * len(idx) / len(ws))))
        keep.extend(rng.choice(idx, size=min(k, len(idx)), replace=False))
    return ws.subset(np.sort(np.array(keep[:max_windows] if len(keep) > max_windows else keep)))


def _standardise(recordings: np.ndarray, train_ids: np.ndarray) -> np.ndarray:
    mu = recordings[train_ids].mean(axis=(0, 1))
    sd = recordings[train_ids].std(axis=(0, 1))
    return ((recordings - mu) / sd).astype(np.float32)


def _split_windows(name, recordings, rec_label, window, stride, max_train, rng, classes, targets_fn=None, info=None):
    tr, va, te = subject_split(rec_label, rng)
    parts = []
    for ids in (tr, va, te):
        ws = make_windows(recordings, ids, rec_label, window, stride)
        if targets_fn is not None:
            ws.targets = targets_fn(ws)
        parts.append(ws)
    parts[0] = cap_windows(parts[0], max_train, rng)
    return Dataset(name, *parts, classes=classes, info=dict(info or {}, split_ids=(tr, va, te)))


def lorenz_dataset(rhos, traj_per_class: int, noise: float, window: int = 100, stride: int = 50,
                   max_train: int = 800, n_keep: int = 1000, seed: int = 0, backend: Backend = "auto") -> Dataset:
    """The Lorenz classification set: one class per rho, windows split 70/15/15 *by trajectory*.

    Window targets for the mechanism test (C2): the state at the window's first step, the window-mean state
    (both set by the trajectory's initial condition and noise) and log rho (the system parameter).
    """
    rng = np.random.default_rng([seed, 19, 1])
    recs, labels, infos = [], [], []
    for c, rho in enumerate(rhos):
        ys, info = lorenz_sde(rho, n_traj=traj_per_class, n_keep=n_keep, noise=noise,
                              seed=np.random.default_rng([seed, 19, 2, c]), backend=backend)
        recs.append(ys)
        labels += [c] * traj_per_class
        infos.append(info)
    recordings = np.concatenate(recs).astype(np.float32)
    rec_label = np.array(labels)
    log_rho = np.log(np.asarray(rhos, float))

    def targets(ws: WindowSet) -> dict:
        return {"x_t0": ws.X[:, 0, :].astype(float), "x_mean": ws.X.mean(axis=1).astype(float),
                "log_rho": log_rho[ws.y]}

    return _split_windows("lorenz", recordings, rec_label, window, stride, max_train, rng,
                          tuple(f"rho={r:g}" for r in rhos), targets,
                          dict(noise=noise, g=[i["g"] for i in infos], speed=[i["speed"] for i in infos]))


#: The ECG difficulty rule's candidate settings, in the rule's order (the first is the card's): the wide-QRS
#: widening, the inverted-T factor on a_T, and the nuisances (white noise and wander as fractions of the
#: recording's std, the gain range). Each later one moves the morphology classes closer to normal and/or adds
#: nuisance; the rhythm class is never changed.
ECG_SETTINGS = {
    "card": dict(wide_factor=2.2, t_factor=-0.7, noise=0.05, wander=(0.05, 0.2), gain=(0.7, 1.3)),
    "closer": dict(wide_factor=1.6, t_factor=-0.35, noise=0.05, wander=(0.05, 0.2), gain=(0.7, 1.3)),
    "closer+nuisance": dict(wide_factor=1.6, t_factor=-0.35, noise=0.15, wander=(0.1, 0.4), gain=(0.5, 1.5)),
    "closest+nuisance": dict(wide_factor=1.4, t_factor=-0.2, noise=0.15, wander=(0.1, 0.4), gain=(0.5, 1.5)),
}


def ecg_dataset(n_subjects: int, seconds: float, fs: int = 50, window: int = 100, max_train: int = 800,
                seed: int = 0, backend: Backend = "auto", setting: str = "card") -> Dataset:
    """Synthetic ECG of four morphology/rhythm classes, 2 channels, 2 s windows with 1 s stride, split by subject;
    ``setting`` names one of :data:`ECG_SETTINGS` (class parameters and nuisances)."""
    st = ECG_SETTINGS[setting]
    rng = np.random.default_rng([seed, 19, 3])
    subj = sample_subjects(n_subjects, rng, wide_factor=st["wide_factor"], t_factor=st["t_factor"])
    z = ecgsyn(subj, seconds, fs=fs, seed=rng, backend=backend)
    x = add_nuisance(two_channels(z), fs, rng, noise=st["noise"], wander=st["wander"], gain=st["gain"])
    tr, _, _ = subject_split(subj.label, np.random.default_rng([seed, 19, 4]))
    recordings = _standardise(x, tr)
    return _split_windows("ecg", recordings, subj.label, window, window // 2, max_train,
                          np.random.default_rng([seed, 19, 4]), ECG_CLASSES, info=dict(subjects=subj))


def ppg_dataset(n_subjects: int, seconds: float, fs: int = 50, window: int = 100, max_train: int = 800,
                seed: int = 0) -> Dataset:
    """PPG-like pulse waves of three classes (the transfer target), same channels and windowing as the ECG."""
    rng = np.random.default_rng([seed, 19, 5])
    subj = sample_ppg_subjects(n_subjects, rng)
    x = add_nuisance(two_channels(ppg_like(subj, seconds, fs=fs, seed=rng)), fs, rng)
    tr, _, _ = subject_split(subj.label, np.random.default_rng([seed, 19, 6]))
    recordings = _standardise(x, tr)
    return _split_windows("ppg", recordings, subj.label, window, window // 2, max_train,
                          np.random.default_rng([seed, 19, 6]), PPG_CLASSES, info=dict(subjects=subj))
