"""Forecast scores (official ``utils/weighted_acc_rmse.py``, with latitudes scaled to our −60..60° band).

All functions take anomaly fields (already relative to the training climatology) of shape (..., lat, lon) and
average the latitude-weighted score over the leading axes per sample, as WeatherBench does.
"""
from __future__ import annotations

import numpy as np


def lat_weights(lat_deg: np.ndarray) -> np.ndarray:
    """cos(lat) normalized to mean 1 over the rows."""
    w = np.cos(np.deg2rad(np.asarray(lat_deg, float)))
    return w / w.mean()


def weighted_rmse(pred: np.ndarray, y: np.ndarray, w_lat: np.ndarray) -> float:
    """mean over samples of sqrt(mean_{lat,lon} w_lat (pred − y)²); pred, y: (N, lat, lon)."""
    e2 = (np.asarray(pred, float) - np.asarray(y, float)) ** 2 * w_lat[:, None]
    return float(np.sqrt(e2.reshape(e2.shape[0], -1).mean(1)).mean())


def weighted_acc(pred: np.ndarray, y: np.ndarray, w_lat: np.ndarray) -> float:
    """Anomaly correlation Σ w p y / sqrt(Σ w p² Σ w y²) per sample, averaged; inputs are anomalies."""
    p, t = np.asarray(pred, float), np.asarray(y, float)
    w = w_lat[:, None]
    num = (w * p * t).sum((-2, -1))
    den = np.sqrt((w * p * p).sum((-2, -1)) * (w * t * t).sum((-2, -1)))
    return float(np.mean(num / np.maximum(den, 1e-30)))


def csi(pred: np.ndarray, y: np.ndarray, thr_pred: float, thr_true: float | None = None) -> float:
    """Critical success index of the events {field > threshold}: hits / (hits + misses + false alarms)."""
    thr_true = thr_pred if thr_true is None else thr_true
    fp, ft = np.asarray(pred) > thr_pred, np.asarray(y) > thr_true
    hits = np.sum(fp & ft)
    denom = hits + np.sum(~fp & ft) + np.sum(fp & ~ft)
    return float(hits / denom) if denom else float("nan")


def hit_rate(pred: np.ndarray, y: np.ndarray, thr: float) -> float:
    ft = np.asarray(y) > thr
    return float(np.sum((np.asarray(pred) > thr) & ft) / max(ft.sum(), 1))


def top_quantile_error(pred: np.ndarray, y: np.ndarray, q: float = 0.95) -> float:
    """RMSE over the cells where the truth exceeds its q-quantile."""
    y = np.asarray(y, float)
    m = y > np.quantile(y, q)
    return float(np.sqrt(((np.asarray(pred, float)[m] - y[m]) ** 2).mean()))


def damping_factors(pred: np.ndarray, y: np.ndarray, w_lat: np.ndarray) -> np.ndarray:
    """Least-squares α per lead for the damped copy α·pred (fitted on validation); pred, y: (N, L, lat, lon)."""
    w = w_lat[:, None]
    num = (w * pred * y).sum((0, 2, 3))
    den = (w * pred * pred).sum((0, 2, 3))
    return np.clip(num / np.maximum(den, 1e-30), 0.0, 1.0)
