"""Cost of BiCoT's null-key scoring (chapter 03): the batched numpy energy ratio of 200 keys on one query set's
anchors, against a per-key loop with a QR per position (the card's "k × r QR"). The card adds a C++ kernel only if
the scoring exceeds 15 % of the notebook's wall time; the script prints the per-notebook estimate for the full
profile (query sets × suspects × output-attack variants) so that share can be read against the ledger's wall time.

    .venv/bin/python benchmarks/bench_bicot.py
"""
from __future__ import annotations

import numpy as np

from repro.bicot.watermark import energy_ratio_np, make_keys
from repro.common import seed_everything
from repro.common.timing import best_cpu_time


def loop_reference(vals, ids, W, keys):
    out = np.empty((len(keys), len(vals)))
    for a, B in enumerate(keys):
        for n in range(len(vals)):
            l = vals[n, 1:] - vals[n, 1:].mean()
            C = W[ids[n, 1:]] @ B
            Q, _ = np.linalg.qr(C - C.mean(0))
            out[a, n] = ((Q.T @ l) ** 2).sum() / (l ** 2).sum()
    return out


def main() -> None:
    seed_everything(0)
    g = np.random.default_rng(0)
    V, d, k, n_anchor = 19, 64, 10, 64
    W = g.standard_normal((V, d))
    ids = np.array([g.permutation(V)[:k] for _ in range(n_anchor)])
    vals = np.sort(g.standard_normal((n_anchor, k)), 1)[:, ::-1]
    keys = make_keys(g, 201, d, 2)
    t_np, R = best_cpu_time(lambda: energy_ratio_np(vals, ids, W, keys))
    t_loop, R2 = best_cpu_time(lambda: loop_reference(vals, ids, W, keys[:20]), repeat=1)
    assert np.allclose(R[:20], R2, atol=1e-8)
    t_loop *= len(keys) / 20
    # full profile: about 8 query sets × (12 model suspects + 6 output attacks × 2 × 9) + sweeps ≈ 8 × 140
    calls = 8 * 140
    print(f"one query set ({n_anchor} anchors), 201 keys: batched numpy {1e3 * t_np:.2f} ms, per-key QR loop "
          f"{1e3 * t_loop:.1f} ms ({t_loop / t_np:.0f} ×)")
    print(f"full-profile estimate: {calls} scorings ≈ {calls * t_np:.1f} s of the notebook's wall time")


if __name__ == "__main__":
    main()
