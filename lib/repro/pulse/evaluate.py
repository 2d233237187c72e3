"""Evaluation of chapter 19: the linear probe on frozen codes, label efficiency, ridge R^2 for the mechanism
test (C2), end-to-end fine-tuning for transfer (C5), and the bootstrap over test windows (C6).

The probe is L2-regularised multinomial logistic regression on standardised embeddings,

    min_{W, b}  (1/n) sum_i CE(W z_i + b, y_i) + (1 / (2 C n)) ||W||_F^2      (bias not penalised),

i.e. scikit-learn's C-parameterisation divided by C n; solved by torch L-BFGS in float64 and checked against
cvxpy in the tests. C is chosen on the validation split from ``C_grid``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.linear_model import Ridge
from sklearn.metrics import balanced_accuracy_score, f1_score, r2_score
from sklearn.model_selection import GroupKFold

from .generators import WindowSet

C_GRID = (0.01, 0.1, 1.0, 10.0)


def probe_objective(W: torch.Tensor, b: torch.Tensor, Z: torch.Tensor, y: torch.Tensor, C: float) -> torch.Tensor:
    """Mean cross-entropy plus ||W||^2 / (2 C n)."""
    n = len(y)
    return F.cross_entropy(Z @ W + b, y) + (W ** 2).sum() / (2 * C * n)


def fit_logreg(Z: np.ndarray, y: np.ndarray, C: float, n_classes: int | None = None,
               max_iter: int = 200, tol: float = 1e-7) -> tuple[np.ndarray, np.ndarray, float]:
    """Minimise :func:`probe_objective` by L-BFGS (strong Wolfe); returns W (d, K), b (K,), the objective."""
    K = int(n_classes if n_classes is not None else y.max() + 1)
    Zt = torch.as_tensor(Z, dtype=torch.float64)
    yt = torch.as_tensor(y, dtype=torch.long)
    W = torch.zeros(Z.shape[1], K, dtype=torch.float64, requires_grad=True)
    b = torch.zeros(K, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([W, b], lr=1, max_iter=max_iter, tolerance_grad=tol, tolerance_change=1e-14,
                            history_size=20, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = probe_objective(W, b, Zt, yt, C)
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        obj = float(probe_objective(W, b, Zt, yt, C))
    return W.detach().numpy(), b.detach().numpy(), obj


@dataclass
class ProbeResult:
    acc: float
    macro_f1: float
    balanced_acc: float
    C: float
    pred: np.ndarray


def _standardise(Ztr: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    mu, sd = Ztr.mean(0), Ztr.std(0) + 1e-8
    return [(Z - mu) / sd for Z in (Ztr, *others)]


def linear_probe(Ztr: np.ndarray, ytr: np.ndarray, Zva: np.ndarray, yva: np.ndarray, Zte: np.ndarray,
                 yte: np.ndarray, C_grid=C_GRID, n_classes: int | None = None) -> ProbeResult:
    """Fit the probe for every C, keep the best on validation (first on ties), report test metrics."""
    K = int(n_classes if n_classes is not None else max(ytr.max(), yva.max(), yte.max()) + 1)
    Ztr, Zva, Zte = _standardise(Ztr, Zva, Zte)
    best = None
    for C in C_grid:
        W, b, _ = fit_logreg(Ztr, ytr, C, K)
        va = float(((Zva @ W + b).argmax(1) == yva).mean())
        if best is None or va > best[0]:
            best = (va, C, W, b)
    _, C, W, b = best
    pred = (Zte @ W + b).argmax(1)
    return ProbeResult(float((pred == yte).mean()), float(f1_score(yte, pred, average="macro")),
                       float(balanced_accuracy_score(yte, pred)), float(C), pred)


def label_subset(y: np.ndarray, frac: float, rng: np.random.Generator) -> np.ndarray:
    """Indices of a stratified ``frac`` of the labels, at least one per class."""
    out = []
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        k = max(1, int(round(frac * len(idx))))
        out.extend(rng.choice(idx, size=k, replace=False))
    return np.sort(np.array(out))


def label_efficiency(Ztr, ytr, Zva, yva, Zte, yte, fracs, n_draws: int, rng: np.random.Generator,
                     C_grid=C_GRID) -> dict[float, list[float]]:
    """Probe test accuracy with a fraction of the training labels, ``n_draws`` stratified draws per fraction."""
    K = int(max(ytr.max(), yte.max()) + 1)
    out: dict[float, list[float]] = {}
    for f in fracs:
        draws = 1 if f >= 1 else n_draws
        out[f] = []
        for _ in range(draws):
            idx = label_subset(ytr, f, rng) if f < 1 else np.arange(len(ytr))
            out[f].append(linear_probe(Ztr[idx], ytr[idx], Zva, yva, Zte, yte, C_grid, K).acc)
    return out


def ridge_r2(Z: np.ndarray, target: np.ndarray, groups: np.ndarray, alpha: float = 1.0, n_splits: int = 5) -> float:
    """Cross-validated R^2 of a ridge regression from codes Z to ``target`` (averaged over its columns);
    folds by recording (``groups``) so overlapping windows of one trajectory never straddle a fold."""
    target = target.reshape(len(target), -1)
    pred = np.zeros_like(target, dtype=float)
    for tr, te in GroupKFold(n_splits=min(n_splits, len(np.unique(groups)))).split(Z, target, groups):
        (Ztr, Zte) = _standardise(Z[tr], Z[te])
        pred[te] = Ridge(alpha=alpha).fit(Ztr, target[tr]).predict(Zte).reshape(len(te), -1)
    return float(r2_score(target, pred, multioutput="uniform_average"))


def finetune_transfer(encoder: torch.nn.Module, data, *, epochs: int, batch_size: int, lr: float,
                      seed: int) -> dict[str, float]:
    """Fine-tune ``encoder`` plus a new linear head end-to-end on ``data.train``; test accuracy and macro-F1."""
    from .baselines import Supervised
    from .training import fit

    K = len(data.classes)
    torch.manual_seed(seed)
    model = Supervised(data.n_channels, K, encoder.hidden, encoder.emb, encoder.depth)
    model.encoder.load_state_dict(encoder.state_dict())
    log = fit(model, data.train, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed)
    pred = model.predict(data.test.X)
    return {"acc": float((pred == data.test.y).mean()), "macro_f1": float(f1_score(data.test.y, pred, average="macro")),
            "cpu_s": log.cpu_s}


def bootstrap_drop_diff(correct_a0, correct_a1, correct_b0, correct_b1, n_boot: int = 2000,
                        rng: np.random.Generator | int = 0) -> tuple[float, float, float]:
    """(drop_a - drop_b) with a percentile 95% interval, resampling the test windows of each noise level
    (the two methods share each level's resample). drop = acc(low noise) - acc(high noise)."""
    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    a0, a1, b0, b1 = (np.asarray(v, float) for v in (correct_a0, correct_a1, correct_b0, correct_b1))
    point = (a0.mean() - a1.mean()) - (b0.mean() - b1.mean())
    i0 = rng.integers(0, len(a0), (n_boot, len(a0)))
    i1 = rng.integers(0, len(a1), (n_boot, len(a1)))
    boots = (a0[i0].mean(1) - a1[i1].mean(1)) - (b0[i0].mean(1) - b1[i1].mean(1))
    lo, hi = np.quantile(boots, [0.025, 0.975])
    return float(point), float(lo), float(hi)


def masked_r2(pred: np.ndarray, true: np.ndarray, mask: np.ndarray) -> float:
    """R^2 = 1 - SSE / SST over the entries where ``mask`` is 1, SST around each channel's mean over those
    entries (arrays (N, T, C), ``mask`` broadcastable). A predictor that outputs a constant scores <= 0."""
    m = np.broadcast_to(np.asarray(mask, float), true.shape)
    w = m.sum(axis=(0, 1))
    mu = (true * m).sum(axis=(0, 1)) / np.maximum(w, 1)
    sse = (((pred - true) ** 2) * m).sum()
    sst = (((true - mu) ** 2) * m).sum()
    return float(1.0 - sse / sst) if sst > 0 else float("nan")


@torch.no_grad()
def reconstruction_r2(model: torch.nn.Module, ws: WindowSet, seed: int = 0) -> float:
    """Held-out reconstruction R^2 of a reconstruction-trained model on the windows ``ws`` (K1's check that its
    decoder learned something: a decoder that relaxes to a constant scores about 0).

    * PULSE variants: the t0 = 0 pass of the model's own objective (c from the window, h0, d and the target from
      the window for ``pulse``, from its partner for ``xwin`` / ``oracle``), every target step x_1 .. x_{T-1};
    * MAE: the masked steps, with masks drawn from ``seed``;
    * DSVAE: the decoder at the posterior means of v and z_t.
    Returns NaN for a model that reconstructs nothing (contrastive, supervised)."""
    from .baselines import DSVAE, MaskedAE
    from .pulse import PULSE

    model.eval()
    gen = torch.Generator().manual_seed(int(seed))
    x = torch.as_tensor(ws.X)
    if isinstance(model, PULSE):
        target = x if model.variant == "pulse" else model.partners(np.arange(len(ws)), ws, gen)
        c, _ = model.encoder(x)
        H = model.encoder(target)[1]
        pred, true, m = model.reconstruct(c, H, target, torch.zeros(len(x), dtype=torch.long))
        return masked_r2(pred.numpy(), true.numpy(), m.numpy())
    if isinstance(model, MaskedAE):
        m = model.patch_mask(len(x), x.shape[1], gen)
        xhat = model.decoder(model.encoder.per_step(x * (1 - m)).transpose(1, 2)).transpose(1, 2)
        return masked_r2(xhat.numpy(), x.numpy(), m.numpy())
    if isinstance(model, DSVAE):
        return masked_r2(model.reconstruct_mean(x).numpy(), x.numpy(), np.ones((1, 1, 1)))
    return float("nan")


def loss_flattening(losses, tail: float = 0.1) -> dict[str, float]:
    """How much a loss curve still moved at the end: the mean loss over the last ``tail`` of the steps against
    the mean over the ``tail`` before it, ``improvement = (before - last) / |before|`` (K1 wants < 5%), and
    the end-to-start ratio (mean of the last ``tail`` over the mean of the first ``tail``)."""
    l = np.asarray(losses, float)
    n = len(l)
    k = max(1, int(round(tail * n)))
    if n < 3 * k:
        return {"improvement_last_10pct": float("nan"), "end_to_start": float("nan"), "steps": n}
    first, before, last = l[:k].mean(), l[n - 2 * k:n - k].mean(), l[n - k:].mean()
    return {"improvement_last_10pct": float((before - last) / abs(before)) if before != 0 else float("nan"),
            "end_to_start": float(last / first) if first != 0 else float("nan"), "steps": n}


def heldout_flattening(eval_steps, eval_losses, tail: float = 0.1) -> dict[str, float]:
    """K1's flattening test on the held-out objective measured at fixed checkpoints (:func:`repro.pulse.training.fit`
    with ``eval_data``): ``improvement = (L(s) - L(end)) / |L(s)|`` where s is the checkpoint closest to
    ``(1 - tail)`` of the steps, and the end-to-start ratio L(end) / L(0). Unlike the training-batch losses,
    these are measured on windows the model never trains on, with fixed draws, so they do not fall merely
    because the annealed learning rate lets the model fit its own training windows more closely."""
    steps, L = np.asarray(eval_steps, float), np.asarray(eval_losses, float)
    if len(L) < 3 or steps[-1] <= 0:
        return {"improvement_last_10pct": float("nan"), "end_to_start": float("nan")}
    i = int(np.argmin(np.abs(steps - (1 - tail) * steps[-1])))
    before, last = L[i], L[-1]
    return {"improvement_last_10pct": float((before - last) / abs(before)) if before != 0 else float("nan"),
            "end_to_start": float(last / L[0]) if L[0] != 0 else float("nan")}


# ----------------------------------------------------------------------------- K4: how predictable is an ECG window?
def _beats_from(subj, i: int, t_begin: float, t_end: float, rng: np.random.Generator,
                shared: tuple[np.ndarray, np.ndarray] | None = None, t_split: float = 0.0):
    """Beat onsets and intervals of subject ``i`` from ``t_begin`` (absolute recording time) past ``t_end``, as
    :func:`repro.pulse.generators.beat_times` draws them; the beats of ``shared`` whose onset is before
    ``t_split`` are kept and only later beats are redrawn from ``rng``."""
    from .generators import extend_beats
    ts, rrs = [], []
    if shared is not None:
        keep = shared[0] < t_split
        ts, rrs = list(shared[0][keep]), list(shared[1][keep])
    return extend_beats(subj, i, ts, rrs, ts[-1] + rrs[-1] if ts else t_begin, t_end, rng)


def ecg_prediction_ceiling(subj, window: int = 100, fs: int = 50, rec_seconds: float = 20.0, n_windows: int = 96,
                           n_draws: int = 16, burn_in: float = 1.0, seed: int = 0, fs_int: int = 500) -> dict:
    """Held-out reconstruction R^2 that *no* model predicting an ECG window from its start can beat by much.

    For ``n_windows`` windows of the subjects ``subj`` (a random subject, start time and cycle phase each), the
    generator is run ``n_draws`` times with everything shared -- the subject's waves, RR_0, the respiratory and
    Mayer modulation of the RR interval at the window's own time, the respiratory baseline, the state on the
    limit cycle at the window's first sample, the interval of the beat in progress -- except the per-beat RR
    jitter of the beats that start inside the window (the irregular class: its iid intervals). The mean of the
    draws is the best mean-squared-error prediction of the continuation given all of that; its R^2 against the
    draws, on x_1 .. x_{T-1} of the two channels as :func:`reconstruction_r2` scores PULSE, is what a perfect
    model of the system would reach (noise, wander and gain are left out, which can only raise it).
    Returns the R^2 overall, over the first 10 and the last half of the target steps, and per class."""
    from .generators import integrate_ecg, two_channels

    rng = np.random.default_rng([seed, 19, 13])
    h = 1.0 / fs_int
    k = fs_int // fs
    n_burn = int(round(burn_in * fs))
    span = (n_burn + window) / fs
    n_steps = int(round(span * fs_int))
    t_half = np.arange(2 * n_steps + 1) * (h / 2)
    rows, omegas, z0s, x0s, who = [], [], [], [], []
    for w in range(n_windows):
        i = int(rng.integers(len(subj)))
        t_begin = float(rng.uniform(0, max(rec_seconds - span, 0)))
        t_split = t_begin + burn_in
        shared = _beats_from(subj, i, t_begin, t_begin + span, rng)
        phi = rng.uniform(-np.pi, np.pi)
        for d in range(n_draws):
            tk, rr = _beats_from(subj, i, t_begin, t_begin + span, rng, shared, t_split)
            rr_grid = rr[np.searchsorted(tk, t_begin + t_half, side="right") - 1]
            omegas.append(2 * np.pi / rr_grid)
            z0s.append(0.005 * np.sin(2 * np.pi * subj.f_rsa[i] * (t_begin + t_half) + subj.phases[i, 2]))
            x0s.append([np.cos(phi), np.sin(phi), 0.0])
            rows.append(i)
        who.append(int(subj.label[i]))
    idx = np.array(rows)
    traj = integrate_ecg(np.array(x0s), np.array(omegas), np.array(z0s), subj.a[idx], subj.b[idx], subj.theta[idx], h)
    z = traj[:, 1:, 2]
    z = z[:, : (n_burn + window) * k].reshape(len(idx), n_burn + window, k).mean(axis=2)[:, n_burn:]
    x = two_channels(z).reshape(n_windows, n_draws, window, 2)[:, :, 1:]   # targets x_1 .. x_{T-1}
    pred = np.broadcast_to(x.mean(axis=1, keepdims=True), x.shape)
    ones = np.ones((1, 1, 1))
    flat = lambda a: a.reshape(-1, a.shape[-2], a.shape[-1])
    out = {"r2": masked_r2(flat(pred), flat(x), ones),
           "r2_first10": masked_r2(flat(pred[:, :, :10]), flat(x[:, :, :10]), ones),
           "r2_second_half": masked_r2(flat(pred[:, :, window // 2:]), flat(x[:, :, window // 2:]), ones)}
    lab = np.array(who)
    for c in np.unique(lab):
        out[f"r2_class{c}"] = masked_r2(flat(pred[lab == c]), flat(x[lab == c]), ones)
    return out


def same_recording_nn_r2(ws: WindowSet, context: int = 4, k: int = 20, mask: np.ndarray | None = None) -> dict:
    """R^2 of a nearest-neighbour predictor that knows each window's *system* exactly: it predicts a held-out
    window from the ``k`` windows of the *same recording* (every start, none overlapping the window) that match
    it best on what the model is given, averaging their values.

    * ``mask=None`` (PULSE's task at t0 = 0): match the first ``context`` samples (PULSE's h0 reads x_0 .. x_3),
      predict and score the continuation x_1 .. x_{T-1}; R^2 overall, over its first 10 and its last half.
    * ``mask`` (N, T, 1), 1 on hidden steps (MAE's task): match the visible samples, predict and score the
      hidden ones; R^2 under the key ``r2``."""
    from numpy.lib.stride_tricks import sliding_window_view

    T = ws.X.shape[1]
    R = ws.recordings
    L = R.shape[1]
    pred = np.zeros(ws.X.shape)
    for r in np.unique(ws.rec):
        cand = sliding_window_view(R[r], T, axis=0).transpose(0, 2, 1)  # (L-T+1, T, C)
        starts = np.arange(L - T + 1)
        for i in np.flatnonzero(ws.rec == r):
            s = int(ws.start[i])
            W = cand[(starts + T <= s) | (starts >= s + T)]
            if mask is None:
                d = ((W[:, :context] - ws.X[i, :context]) ** 2).sum(axis=(1, 2))
            else:
                d = (((W - ws.X[i]) ** 2) * (1 - mask[i])).sum(axis=(1, 2))
            pred[i] = W[np.argsort(d, kind="stable")[:k]].mean(axis=0)
    true = ws.X.astype(float)
    ones = np.ones((1, 1, 1))
    if mask is not None:
        return {"r2": masked_r2(pred, true, mask)}
    pred, true = pred[:, 1:], true[:, 1:]
    return {"r2": masked_r2(pred, true, ones), "r2_first10": masked_r2(pred[:, :10], true[:, :10], ones),
            "r2_second_half": masked_r2(pred[:, T // 2:], true[:, T // 2:], ones)}


@torch.no_grad()
def pulse_horizon_r2(model: torch.nn.Module, ws: WindowSet) -> dict:
    """PULSE's t0 = 0 reconstruction R^2 on the windows ``ws`` (as :func:`reconstruction_r2`), overall, over the
    first 10 target steps and over the last half: how fast the forecast loses the waveform."""
    model.eval()
    x = torch.as_tensor(ws.X)
    c, H = model.encoder(x)
    pred, true, _ = model.reconstruct(c, H, x, torch.zeros(len(x), dtype=torch.long))
    p, t = pred.numpy(), true.numpy()
    h = (ws.X.shape[1]) // 2
    ones = np.ones((1, 1, 1))
    return {"r2": masked_r2(p, t, ones), "r2_first10": masked_r2(p[:, :10], t[:, :10], ones),
            "r2_second_half": masked_r2(p[:, h:], t[:, h:], ones)}


# ----------------------------------------------------------------------------- K4: the system-blind bar (issue 42)
def _blind_ridge(F_tr: np.ndarray, Y_tr: np.ndarray, F_te: np.ndarray, alpha: float) -> np.ndarray:
    """Ridge from features F (N, p) to targets Y (N, q), standardised features, fitted on the training rows."""
    Ftr, Fte = _standardise(F_tr, F_te)
    return Ridge(alpha=alpha).fit(Ftr, Y_tr).predict(Fte)


def _nn_mean(D: np.ndarray, Y_tr: np.ndarray, k: int) -> np.ndarray:
    """Mean of ``Y_tr`` over the ``k`` training rows with the smallest distance in each row of ``D`` (N_te, N_tr)."""
    nn = np.argsort(D, axis=1, kind="stable")[:, :k]
    return Y_tr[nn].mean(axis=1)


def blind_forecast_r2(train: WindowSet, ws: WindowSet, context: int = 4, k: int = 20, alpha: float = 1.0) -> dict:
    """PULSE's t0 = 0 task without a system code: predict x_1 .. x_{T-1} of each window of ``ws`` from its first
    ``context`` samples only (what PULSE's h0 reads: x_0 .. x_3 with the released look-ahead), scored as
    :func:`reconstruction_r2` scores PULSE. Two predictors that know nothing of the window's system, both
    fitted on the training windows ``train`` (other subjects or trajectories than ``ws``):

    * ``ridge``: a ridge regression from the ``context`` samples (all channels) to the whole continuation;
    * ``nn``: the mean continuation of the ``k`` training windows whose first ``context`` samples are closest.

    ``best`` is the larger of the two: K4 asks PULSE's reconstruction to beat it (issue 42)."""
    T = train.X.shape[1]
    F_tr, F_te = train.X[:, :context].reshape(len(train), -1), ws.X[:, :context].reshape(len(ws), -1)
    Y_tr = train.X[:, 1:].reshape(len(train), -1)
    true = ws.X[:, 1:].astype(float)
    ones = np.ones((1, 1, 1))
    ridge = _blind_ridge(F_tr, Y_tr, F_te, alpha).reshape(true.shape)
    D = ((F_te[:, None, :] - F_tr[None, :, :]) ** 2).sum(-1)
    nn = _nn_mean(D, Y_tr, min(k, len(train))).reshape(true.shape)
    out = {"ridge": masked_r2(ridge, true, ones), "nn": masked_r2(nn, true, ones)}
    out["best"] = max(out["ridge"], out["nn"])
    return out


def blind_infill_r2(train: WindowSet, ws: WindowSet, mask: np.ndarray, mask_train: np.ndarray, k: int = 20,
                    alpha: float = 1.0) -> dict:
    """MAE's task without a system code: fill in the hidden steps (``mask`` (N, T, 1), 1 = hidden, MAE's draw) of
    each window of ``ws`` from its visible samples, scored on the hidden steps as :func:`reconstruction_r2` scores
    MAE. Fitted on the training windows ``train`` (with masks ``mask_train`` of the same law):

    * ``ridge``: a ridge regression from the visible samples (hidden ones zeroed, as MAE's input) and the mask
      to the whole window;
    * ``nn``: the mean of the ``k`` training windows closest on the window's visible samples, read at its hidden
      steps.

    ``best`` is the larger of the two."""
    N, T, C = ws.X.shape
    Xtr = train.X.astype(float)
    F_tr = np.concatenate([(Xtr * (1 - mask_train)).reshape(len(train), -1), mask_train.reshape(len(train), -1)], 1)
    F_te = np.concatenate([(ws.X * (1 - mask)).reshape(N, -1), mask.reshape(N, -1)], 1)
    true = ws.X.astype(float)
    ridge = _blind_ridge(F_tr, Xtr.reshape(len(train), -1), F_te, alpha).reshape(true.shape)
    # masked squared distance sum_t v_t |x_t - y_t|^2 over the visible steps v of each held-out window, expanded
    # into matrix products: (v x^2) 1 - 2 (v x) . y + v . |y|^2
    v = (1.0 - mask)[:, :, 0]                                          # (N, T)
    y2 = (Xtr ** 2).sum(-1)                                            # (N_tr, T)
    D = ((v[:, :, None] * true ** 2).sum(axis=(1, 2))[:, None]
         - 2 * (v[:, :, None] * true).reshape(N, -1) @ Xtr.reshape(len(train), -1).T + v @ y2.T)
    nn = _nn_mean(D, Xtr.reshape(len(train), -1), min(k, len(train))).reshape(true.shape)
    out = {"ridge": masked_r2(ridge, true, mask), "nn": masked_r2(nn, true, mask)}
    out["best"] = max(out["ridge"], out["nn"])
    return out


def onecycle_tail_share(total_steps: int, lr: float = 3e-3, tail: float = 0.1) -> float:
    """The share of the summed learning rate that the last ``tail`` of the steps of :func:`repro.pulse.training.fit`'s
    one-cycle schedule carry (why a "last 10% of steps" flattening rule passes by construction, issue 42)."""
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([p], lr=lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=max(int(total_steps), 2))
    lrs = []
    for _ in range(max(int(total_steps), 2)):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    k = max(1, int(round(tail * len(lrs))))
    return float(sum(lrs[-k:]) / sum(lrs))
