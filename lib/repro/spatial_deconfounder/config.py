"""Parameters of chapter 13 (the Spatial Deconfounder): the card's table, with the ``full`` profile as the
field defaults. Every knob is validated before any work starts; a bad value raises a one-line
:class:`repro.common.ConfigError` that names it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from repro.common import BaseConfig, knob

SMOKE = dict(grid_size=20, n_reps=2, r_enc=1, beta_warmup=1, cvae_epochs=3, head_epochs=3, n_sweep_reps=1,
             radius_sweep=(0, 1), kappa_sweep=(1.0,), n_basis=10, results_dir="results/13_smoke")


@dataclass(frozen=True)
class Config(BaseConfig):
    """Chapter 13's knobs. Defaults are the ``full`` profile; ``smoke`` changes what ``SMOKE`` lists."""

    slug: ClassVar[str] = "spatial_deconfounder"
    PROFILES: ClassVar[dict] = {"full": {}, "smoke": SMOKE}

    # generator (data.simulate)
    grid_size: int = knob(48, ge=12, le=128, doc="H = W of the square grid (only units with full patches are used)")
    n_reps: int = knob(10, ge=1, le=50, doc="replicates (seeds) of the main comparison, C1-C3")
    kappa: float = knob(1.0, ge=0, le=5, doc="confounding strength κ of the hidden field U")
    lengthscale: float = knob(2.0, gt=0, le=20, doc="ℓ: sd (cells) of the Gaussian kernel that smooths U")
    tau_direct: float = knob(1.0, ge=-10, le=10, doc="τ_d, the coefficient of the unit's own treatment")
    tau_spill: float = knob(0.5, ge=-10, le=10, doc="τ_sp, the coefficient of the neighbours' mean treatment")
    # the C-VAE (stage 1)
    r_enc: int = knob(2, ge=0, le=4, doc="encoder patch radius (patch (2r+1)², centre treatment masked)")
    r_out: int = knob(1, ge=1, le=2, doc="outcome-head patch radius = interference radius")
    latent_dim: int = knob(2, ge=1, le=8, doc="d_z, latent channels per patch location")
    gmrf_tau: float = knob(10.0, gt=0, le=1e4, doc="τ of the GMRF prior precision τ(L + εI)")
    beta_max: float = knob(0.1, gt=0, le=10, doc="β_max of the linearly annealed KL weight")
    beta_warmup: int = knob(10, ge=0, le=1000, doc="epochs over which β rises to β_max")
    cvae_epochs: int = knob(30, ge=1, le=1000, doc="C-VAE epochs (best validation epoch kept)")
    head_epochs: int = knob(30, ge=1, le=1000, doc="outcome-head epochs")
    mask_center: bool = knob(True, doc="hide the centre treatment from the encoder (the chapter's decision)")
    # sweeps
    n_sweep_reps: int = knob(5, ge=1, le=50, doc="replicates of the sweeps (C4-C6, unmasked ablation)")
    radius_sweep: tuple[int, ...] = knob((0, 1, 2), ge=0, le=4, min_len=1, doc="encoder radii of C4")
    kappa_sweep: tuple[float, ...] = knob((0.5, 1.0, 2.0), ge=0, le=5, min_len=1, doc="κ values of C6")
    # baselines
    n_basis: int = knob(50, ge=1, le=400, doc="k, Laplacian eigenvectors of Spatial / Spatial+")
    results_dir: str = knob("results/13", doc="where the notebook's figures may be written (kept for the card)")

    def check(self) -> None:
        if list(self.radius_sweep) != sorted(set(self.radius_sweep)):
            self.fail("radius_sweep", f"must be strictly increasing; got {list(self.radius_sweep)}")
        if list(self.kappa_sweep) != sorted(set(self.kappa_sweep)):
            self.fail("kappa_sweep", f"must be strictly increasing; got {list(self.kappa_sweep)}")
        big = max(self.r_enc, max(self.radius_sweep), self.r_out)
        if self.grid_size < 2 * big + 8:
            self.fail("grid_size", f"must be >= 2·(largest radius {big}) + 8 so that full patches remain; "
                                   f"got {self.grid_size}")
        if self.n_basis >= (self.grid_size - 2 * big) ** 2 // 4:
            self.fail("n_basis", f"must be < a quarter of the evaluated units ({(self.grid_size - 2 * big) ** 2}); "
                                 f"got {self.n_basis}")

    @property
    def margin(self) -> int:
        """Cells dropped at each border, so every evaluated unit has full patches of every radius used."""
        return max(self.r_enc, max(self.radius_sweep), self.r_out, 2)
