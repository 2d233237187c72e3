"""The weather source of chapter 18: forced-dissipative rotating shallow water on a mid-latitude β-plane channel.

The paper forecasts ERA5; we forecast a toy atmosphere we can integrate on a laptop (card, *Setting*). One layer
of fluid of depth h on an Arakawa C-grid (h and the tracer T at cell centres, u on west faces, v on south faces,
vorticity at corners), periodic in longitude x, free-slip walls at the two latitude edges:

    ∂h/∂t = −∇·(h u) + (h_eq − h)/τ_h + F_h                         (flux-form continuity)
    ∂u/∂t = q (h v) − ∂B/∂x − u/τ_d − ν₄ ∇⁴u,  ∂v/∂t = −q (h u) − ∂B/∂y − v/τ_d − ν₄ ∇⁴v
    ∂T/∂t = −∇·(u T) + (T_eq − T)/τ_T + F_T − ν₄ ∇⁴T                  (flux-form tracer)

with potential vorticity q = (ζ + f)/h, f = f₀ + β y, Bernoulli function B = g h + |u|²/2, the vector-invariant
energy-conserving averaging of Sadourny (1975), and SSP-RK3 in time. h relaxes to h_eq = H₀ − ΔH tanh(y/L_jet),
whose geostrophic flow is an unstable eastward jet; random Gaussian "heating pulses" (Poisson in number, one
6-hour frame long) make the flow unpredictable — without them the jet settles into a regular wave.

``step(..., backend="numpy")`` is the reference; ``backend="cpp"`` calls the fused kernel of ``_kernels.cpp``
(same arithmetic, one pass per RK stage, looping over trajectories).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

try:  # the compiled kernel; the numpy reference below works without it
    from . import _kernels
    HAVE_KERNEL = True
except ImportError:  # pragma: no cover - only when the extension is not built
    _kernels = None
    HAVE_KERNEL = False

DAY = 86400.0
CHANNELS = ("h", "u", "v", "T")   # the model's input channels, all at cell centres


@dataclass(frozen=True)
class ShallowWaterConfig:
    """Every number of the card's *Setting*; τ = 0 switches a relaxation or drag off, ν₄ = 0 the hyperdiffusion."""

    ny: int = 32                    # cells in latitude (labelled −60°..60°)
    nx: int = 64                    # cells in longitude (0..360°)
    dx: float = 375e3               # m
    dy: float = 375e3               # m
    g: float = 9.81                 # m s⁻²
    H0: float = 1000.0              # mean depth, m (gravity-wave speed ≈ 99 m/s)
    f0: float = 1e-4                # Coriolis parameter at the channel centre, s⁻¹
    beta: float = 1.6e-11           # m⁻¹ s⁻¹
    jet_dh: float = 500.0           # ΔH of h_eq, m
    jet_width: float = 500e3        # L_jet of h_eq, m
    tau_h: float = 20 * DAY         # relaxation of h to h_eq, s
    tau_drag: float = 20 * DAY      # Rayleigh drag on u, v, s
    tau_T: float = 20 * DAY         # relaxation of T to T_eq, s
    tracer_width: float = 1500e3    # T_eq = −tanh(y / tracer_width)
    nu4: float = 5.9e14             # ∇⁴ hyperdiffusion, m⁴ s⁻¹ (2Δx checkerboard e-folds in ~6 days)
    pulses_per_frame: float = 2.0   # Poisson mean number of heating pulses per frame
    pulse_radius: float = 600e3     # Gaussian e-folding radius exp(−r²/R²), m
    pulse_h: float = 20.0 / DAY     # peak h forcing of a pulse, m s⁻¹ (20 m/day), random sign
    pulse_T: float = 1.0 / DAY      # peak T forcing of a pulse, s⁻¹ (1/day), the pulse's sign
    dt: float = 1440.0              # time step, s
    frame_seconds: float = 6 * 3600.0  # one frame = 6 model-hours

    @property
    def substeps(self) -> int:
        n = self.frame_seconds / self.dt
        if abs(n - round(n)) > 1e-9:
            raise ValueError(f"dt={self.dt} must divide the frame length {self.frame_seconds} s")
        return int(round(n))

    @property
    def y_centres(self) -> np.ndarray:
        """y of the cell centres relative to the channel centre, m."""
        return (np.arange(self.ny) + 0.5 - self.ny / 2) * self.dy

    @property
    def y_corners(self) -> np.ndarray:
        return (np.arange(self.ny + 1) - self.ny / 2) * self.dy

    @property
    def lat(self) -> np.ndarray:
        """The labelled latitude of each row of cells, degrees (−60..60)."""
        return -60.0 + 120.0 * (np.arange(self.ny) + 0.5) / self.ny

    def h_eq(self) -> np.ndarray:
        return self.H0 - self.jet_dh * np.tanh(self.y_centres / self.jet_width)

    def T_eq(self) -> np.ndarray:
        return -np.tanh(self.y_centres / self.tracer_width)

    def f_corners(self) -> np.ndarray:
        return self.f0 + self.beta * self.y_corners

    def rates(self) -> tuple[float, float, float]:
        inv = lambda t: 0.0 if t == 0 else 1.0 / t  # noqa: E731
        return inv(self.tau_h), inv(self.tau_drag), inv(self.tau_T)

    def unforced(self) -> "ShallowWaterConfig":
        """No relaxation, drag, hyperdiffusion or pulses: the conservative core (for the invariant tests)."""
        return replace(self, tau_h=0.0, tau_drag=0.0, tau_T=0.0, nu4=0.0, pulses_per_frame=0.0)


@dataclass
class State:
    """One or many trajectories: h, u, T of shape (B, ny, nx); v of shape (B, ny + 1, nx), zero on the walls."""

    h: np.ndarray
    u: np.ndarray
    v: np.ndarray
    T: np.ndarray

    def copy(self) -> "State":
        return State(self.h.copy(), self.u.copy(), self.v.copy(), self.T.copy())

    def take(self, idx) -> "State":
        return State(self.h[idx].copy(), self.u[idx].copy(), self.v[idx].copy(), self.T[idx].copy())

    @staticmethod
    def concat(states: "list[State]") -> "State":
        return State(*(np.concatenate([getattr(s, k) for s in states]) for k in ("h", "u", "v", "T")))


# ----------------------------------------------------------------------------- numpy reference

def _xm(a):  # a[..., i-1] (periodic)
    return np.roll(a, 1, axis=-1)


def _xp(a):  # a[..., i+1]
    return np.roll(a, -1, axis=-1)


def _lap_centre(a, dx, dy):
    """5-point Laplacian at centres (or u points): periodic in x, zero normal gradient at the walls."""
    up = np.concatenate([a[:, 1:], a[:, -1:]], axis=1)
    dn = np.concatenate([a[:, :1], a[:, :-1]], axis=1)
    return (_xm(a) + _xp(a) - 2 * a) / dx ** 2 + (up + dn - 2 * a) / dy ** 2


def _lap_v(v, dx, dy):
    """Laplacian at v points: v = 0 on the walls (rows 0 and ny) and so is its Laplacian."""
    out = np.zeros_like(v)
    out[:, 1:-1] = ((_xm(v[:, 1:-1]) + _xp(v[:, 1:-1]) - 2 * v[:, 1:-1]) / dx ** 2
                    + (v[:, 2:] + v[:, :-2] - 2 * v[:, 1:-1]) / dy ** 2)
    return out


def tendency(s: State, cfg: ShallowWaterConfig, Fh: np.ndarray, FT: np.ndarray) -> State:
    """Right-hand side of the equations in the module docstring (the numpy reference of ``_kernels.cpp``)."""
    dx, dy, g = cfg.dx, cfg.dy, cfg.g
    h, u, v, T = s.h, s.u, s.v, s.T
    r_h, r_d, r_T = cfg.rates()
    hu = 0.5 * (_xm(h) + h)                          # h at u points
    U = hu * u                                       # zonal mass flux
    hv = np.zeros_like(v)
    hv[:, 1:-1] = 0.5 * (h[:, :-1] + h[:, 1:])
    V = hv * v                                       # meridional mass flux (0 on the walls)
    dh = -((_xp(U) - U) / dx + (V[:, 1:] - V[:, :-1]) / dy)
    # relative vorticity at corners; free slip: ζ = 0 on the walls
    zeta = np.zeros_like(v)
    zeta[:, 1:-1] = (v[:, 1:-1] - _xm(v[:, 1:-1])) / dx - (u[:, 1:] - u[:, :-1]) / dy
    hq = np.empty_like(v)
    hq[:, 1:-1] = 0.5 * (hu[:, 1:] + hu[:, :-1])
    hq[:, 0], hq[:, -1] = hu[:, 0], hu[:, -1]
    q = (zeta + cfg.f_corners()[None, :, None]) / hq
    # Sadourny's energy-conserving averages: u_t += mean_y(q mean_x(V)), v_t −= mean_x(q mean_y(U))
    qV = q * (0.5 * (_xm(V) + V))
    du = 0.5 * (qV[:, 1:] + qV[:, :-1])
    Uy = np.zeros_like(v)
    Uy[:, 1:-1] = 0.5 * (U[:, :-1] + U[:, 1:])
    qU = q * Uy
    dv = np.zeros_like(v)
    dv[:, 1:-1] = -0.5 * (qU[:, 1:-1] + _xp(qU[:, 1:-1]))
    # Bernoulli function B = g h + K at centres
    K = 0.25 * (u * u + _xp(u) ** 2) + 0.25 * (v[:, :-1] ** 2 + v[:, 1:] ** 2)
    B = g * h + K
    du -= (B - _xm(B)) / dx
    dv[:, 1:-1] -= (B[:, 1:] - B[:, :-1]) / dy
    # tracer, flux form with centred face values
    Tx = u * (0.5 * (_xm(T) + T))
    Ty = np.zeros_like(v)
    Ty[:, 1:-1] = v[:, 1:-1] * (0.5 * (T[:, :-1] + T[:, 1:]))
    dT = -((_xp(Tx) - Tx) / dx + (Ty[:, 1:] - Ty[:, :-1]) / dy)
    # forcing and dissipation
    dh += r_h * (cfg.h_eq()[None, :, None] - h) + Fh
    dT += r_T * (cfg.T_eq()[None, :, None] - T) + FT
    du -= r_d * u
    dv -= r_d * v
    if cfg.nu4:
        du -= cfg.nu4 * _lap_centre(_lap_centre(u, dx, dy), dx, dy)
        dv -= cfg.nu4 * _lap_v(_lap_v(v, dx, dy), dx, dy)
        dT -= cfg.nu4 * _lap_centre(_lap_centre(T, dx, dy), dx, dy)
    return State(dh, du, dv, dT)


def _axpy(a: float, x: State, b: float, y: State) -> State:
    return State(a * x.h + b * y.h, a * x.u + b * y.u, a * x.v + b * y.v, a * x.T + b * y.T)


def _euler(s: State, cfg, Fh, FT) -> State:
    k = tendency(s, cfg, Fh, FT)
    return State(s.h + cfg.dt * k.h, s.u + cfg.dt * k.u, s.v + cfg.dt * k.v, s.T + cfg.dt * k.T)


def step_numpy(s: State, cfg: ShallowWaterConfig, Fh: np.ndarray, FT: np.ndarray) -> State:
    """One SSP-RK3 step (Shu & Osher): y1 = E(y); y2 = ¾y + ¼E(y1); y3 = ⅓y + ⅔E(y2), E = forward Euler."""
    y1 = _euler(s, cfg, Fh, FT)
    y2 = _axpy(0.75, s, 0.25, _euler(y1, cfg, Fh, FT))
    return _axpy(1.0 / 3.0, s, 2.0 / 3.0, _euler(y2, cfg, Fh, FT))


def _params(cfg: ShallowWaterConfig) -> np.ndarray:
    r_h, r_d, r_T = cfg.rates()
    return np.array([cfg.dx, cfg.dy, cfg.g, r_h, r_d, r_T, cfg.nu4, cfg.dt], dtype=np.float64)


def step(s: State, cfg: ShallowWaterConfig, forcing: tuple[np.ndarray, np.ndarray] | None = None,
         backend: str = "cpp", n_steps: int = 1) -> State:
    """Advance ``n_steps`` RK3 steps with the constant forcing (F_h, F_T) (zeros if None); returns a new State."""
    if forcing is None:
        forcing = (np.zeros_like(s.h), np.zeros_like(s.h))
    Fh, FT = (np.ascontiguousarray(f, dtype=np.float64) for f in forcing)
    if backend == "numpy":
        for _ in range(n_steps):
            s = step_numpy(s, cfg, Fh, FT)
        return s
    if backend != "cpp":
        raise ValueError(f"backend must be 'cpp' or 'numpy', got {backend!r}")
    if not HAVE_KERNEL:
        raise RuntimeError("the compiled kernel repro.emformer._kernels is not built; run "
                           "`python setup.py build_ext --inplace` or pass backend='numpy'")
    out = s.copy()
    _kernels.sw_rk3(out.h, out.u, out.v, out.T, Fh, FT, cfg.h_eq(), cfg.T_eq(), cfg.f_corners(), _params(cfg),
                    int(n_steps))
    return out


# ----------------------------------------------------------------------------- initial state, forcing, runs

def geostrophic_u(h: np.ndarray, cfg: ShallowWaterConfig) -> np.ndarray:
    """u = −(g/f) ∂h/∂y at u points (one-sided at the walls)."""
    dhdy = np.gradient(h, cfg.dy, axis=-2)
    f = cfg.f0 + cfg.beta * cfg.y_centres
    return -(cfg.g / f)[:, None] * 0.5 * (dhdy + _xm(dhdy))


def pulse_forcing(cfg: ShallowWaterConfig, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(F_h, F_T) of shape (n, ny, nx) for one frame: Poisson(pulses_per_frame) Gaussian pulses per trajectory."""
    Fh = np.zeros((n, cfg.ny, cfg.nx))
    FT = np.zeros_like(Fh)
    counts = rng.poisson(cfg.pulses_per_frame, n) if cfg.pulses_per_frame > 0 else np.zeros(n, int)
    x = (np.arange(cfg.nx) + 0.5) * cfg.dx
    y = cfg.y_centres
    Lx, half = cfg.nx * cfg.dx, cfg.ny * cfg.dy / 2
    for b, k in enumerate(counts):
        for _ in range(k):
            x0 = rng.uniform(0, Lx)
            y0 = rng.uniform(-half + cfg.pulse_radius, half - cfg.pulse_radius) if half > cfg.pulse_radius else 0.0
            sign = rng.choice((-1.0, 1.0))
            ddx = np.abs(x - x0)
            ddx = np.minimum(ddx, Lx - ddx)
            bump = np.exp(-((y - y0)[:, None] ** 2 + ddx[None, :] ** 2) / cfg.pulse_radius ** 2)
            Fh[b] += sign * cfg.pulse_h * bump
            FT[b] += sign * cfg.pulse_T * bump
    return Fh, FT


def initial_state(cfg: ShallowWaterConfig, rng: np.random.Generator, n: int) -> State:
    """h = h_eq plus a few metres of random large-scale noise, u in geostrophic balance, v = 0, T = T_eq."""
    h = np.broadcast_to(cfg.h_eq()[None, :, None], (n, cfg.ny, cfg.nx)).copy()
    kx = np.arange(1, 6)
    x = 2 * np.pi * (np.arange(cfg.nx) + 0.5) / cfg.nx
    env = np.exp(-(cfg.y_centres / (2 * cfg.jet_width)) ** 2)
    for b in range(n):
        amp = rng.normal(0, 5.0, kx.size)
        ph = rng.uniform(0, 2 * np.pi, kx.size)
        h[b] += env[:, None] * (amp[:, None] * np.cos(kx[:, None] * x[None] + ph[:, None])).sum(0)[None, :]
    u = geostrophic_u(h, cfg)
    v = np.zeros((n, cfg.ny + 1, cfg.nx))
    T = np.broadcast_to(cfg.T_eq()[None, :, None], (n, cfg.ny, cfg.nx)).copy()
    return State(h, u, v, T)


def centred(s: State) -> np.ndarray:
    """The model's view: (B, 4, ny, nx) with u and v averaged to cell centres, channels h, u, v, T."""
    uc = 0.5 * (s.u + _xp(s.u))
    vc = 0.5 * (s.v[:, :-1] + s.v[:, 1:])
    return np.stack([s.h, uc, vc, s.T], axis=1)


def run_frames(s: State, cfg: ShallowWaterConfig, rng: np.random.Generator, n_frames: int, backend: str = "cpp",
               keep_states: set[int] | None = None) -> tuple[np.ndarray, dict[int, State]]:
    """Advance n_frames frames (new pulses each frame); returns centred fields (B, n_frames, 4, ny, nx) float32
    after each frame, and the full states after the frames listed in ``keep_states`` (0-based)."""
    fields = np.empty((s.h.shape[0], n_frames, 4, cfg.ny, cfg.nx), np.float32)
    kept = {}
    for f in range(n_frames):
        s = step(s, cfg, pulse_forcing(cfg, rng, s.h.shape[0]), backend=backend, n_steps=cfg.substeps)
        fields[:, f] = centred(s)
        if keep_states and f in keep_states:
            kept[f] = s.copy()
    if not np.isfinite(fields).all():
        raise FloatingPointError("the shallow-water run produced NaN/inf: reduce dt (CFL)")
    return fields, kept


def simulate(cfg: ShallowWaterConfig, n_traj: int, n_frames: int, spinup: int, seed: int, backend: str = "cpp",
             keep_states: set[int] | None = None) -> tuple[np.ndarray, dict[int, State]]:
    """``n_traj`` independent trajectories: spin-up frames discarded, then ``n_frames`` frames recorded."""
    rng = np.random.default_rng(seed)
    s = initial_state(cfg, rng, n_traj)
    for _ in range(spinup):
        s = step(s, cfg, pulse_forcing(cfg, rng, n_traj), backend=backend, n_steps=cfg.substeps)
    return run_frames(s, cfg, rng, n_frames, backend, keep_states)


def energy(s: State, cfg: ShallowWaterConfig, h_rest: float | None = None) -> np.ndarray:
    """KE + available PE per trajectory, J/kg·m² units (ρ = 1): Σ ½h_u u² + ½h_v v² + ½g (h − h_rest)²."""
    hu = 0.5 * (_xm(s.h) + s.h)
    hv = np.zeros_like(s.v)
    hv[:, 1:-1] = 0.5 * (s.h[:, :-1] + s.h[:, 1:])
    if h_rest is None:
        h_rest = float(s.h.mean())
    ke = 0.5 * (hu * s.u ** 2).sum((1, 2)) + 0.5 * (hv * s.v ** 2).sum((1, 2))
    ape = 0.5 * cfg.g * ((s.h - h_rest) ** 2).sum((1, 2))
    return (ke + ape) * cfg.dx * cfg.dy


def max_cfl(s: State, cfg: ShallowWaterConfig) -> float:
    c = np.sqrt(cfg.g * s.h.max()) + max(np.abs(s.u).max(), np.abs(s.v).max())
    return float(c * cfg.dt / min(cfg.dx, cfg.dy))
