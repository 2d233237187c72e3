"""Chapter 15 (DKMP): neighbour lists (our kernel, scipy's cKDTree, vesin), the compiled kernels against their
numpy references, and the DKMP scaling protocol of the chapter.

For N from 1,024 to 32,768 atoms (fcc balls at nearest-neighbour distance 1.0 σ plus 0.05 σ jitter, atoms in
random order) it prints the time and peak memory of
  * the radius graph at 2.5 σ, side by side: our kernel (``pair_list``, which also sorts the list), the chunked
    O(N²) numpy reference, ``scipy.spatial.cKDTree.query_pairs`` and ``vesin.NeighborList`` (a neighbour-list
    library for atomistic systems), on the clusters and on **periodic boxes** at the same density (our kernel
    has no periodic mode: "—"); every builder's pair count is printed and must agree;
  * the LJ + tail energy and forces (8 σ cutoff): the kernel and the numpy reference;
  * the greedy Poisson-disk centres at 2.7 σ: the kernel and the numpy reference;
with the speed-ups and the log–log slope of every method over the sizes it ran. Each method runs in its own
fresh subprocess; before each size the process's peak RSS is reset (Linux ``/proc/self/clear_refs``), so the
peak memory printed is that size's own, above the RSS it had with its input loaded (the clusters are
written to a temporary folder first, so building them does not count). The O(N²)
references stop at 8,192 atoms. Run: ``make bench NB=dkmp`` (one thread; a few minutes).

  * DKMP's force evaluation (graph + forward + forces) with the atoms in random order and spatially sorted, by
    the chapter's protocol (a warm-up run at every size, then the median of three), as t(N)/t(N0) and µs per edge.
Each builder reports its own times; the conclusions drawn in the chapter are printed by the script from them
(which builder is fastest at each size), not typed here.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

SIZES = [1024, 2048, 4096, 8192, 16384, 32768]
PAIR_METHODS = ("pairs-cpp", "ckdtree", "vesin")
QUADRATIC_MAX = 8192

WORKER = r"""
import json, sys, time
import numpy as np
from repro.dkmp import make_cluster, pair_list, poisson_disk_centres
from repro.dkmp.potentials import lj_tail_full
method, sizes, folder = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
from scipy.spatial import cKDTree
import vesin
periodic = method.endswith("-box")
method = method.removesuffix("-box")
VL = vesin.NeighborList(cutoff=2.5, full_list=False)
def status(key):
    with open("/proc/self/status") as fh:
        return next(float(l.split()[1]) * 1024 for l in fh if l.startswith(key + ":"))
def reset_peak():
    # Linux: writing 5 to clear_refs resets the peak RSS (VmHWM) to the current RSS
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False
def run(x, s):
    L = float(s[-1]) if periodic else 0.0
    if method == "pairs-cpp": return pair_list(x, 2.5, backend="cpp")
    if method == "pairs-numpy": return pair_list(x, 2.5, backend="numpy")
    if method == "ckdtree":
        return (cKDTree(x, boxsize=L) if periodic else cKDTree(x)).query_pairs(2.5, output_type="ndarray")
    if method == "vesin":
        box = np.eye(3) * L if periodic else np.zeros((3, 3))
        return VL.compute(points=x, box=box, periodic=periodic, quantities="ij")[0]
    if method == "energy-cpp": return lj_tail_full(x, s, backend="cpp")
    if method == "energy-numpy": return lj_tail_full(x, s, backend="numpy")
    if method == "centres-cpp": return poisson_disk_centres(x, 2.7, backend="cpp")
    if method == "centres-numpy": return poisson_disk_centres(x, 2.7, backend="numpy")
    raise SystemExit(method)
def load(n):  # made by the parent; for a box, s holds the box side
    if periodic:
        return np.load(f"{folder}/b{n}.npy"), np.load(f"{folder}/L{n}.npy")
    return np.load(f"{folder}/x{n}.npy"), np.load(f"{folder}/s{n}.npy")
run(*load(sizes[0]))
for n in sizes:
    x, s = load(n)
    if not reset_peak():
        raise SystemExit("cannot reset the peak RSS (/proc/self/clear_refs): Linux only")
    base = status("VmRSS")
    run(x, s)  # warm-up at this size
    ts = []
    for _ in range(3):
        t = time.perf_counter(); out = run(x, s); ts.append(time.perf_counter() - t)
        count = len(out[0]) if method in ("pairs-cpp", "pairs-numpy") else len(out) if method in ("ckdtree", "vesin") \
            else out[4] if method.startswith("energy") else len(out)
        del out
    print(json.dumps({"n": n, "t": float(np.median(ts)), "mem": status("VmHWM") - base, "count": int(count)}), flush=True)
"""


FOLDER = tempfile.mkdtemp(prefix="bench_dkmp_")


def make_inputs() -> None:
    """Clusters and periodic boxes of every size, written once (the workers only load them). A box holds N
    atoms on an fcc lattice at nearest-neighbour distance 1.0 σ (plus 0.05 σ jitter, wrapped into the box)."""
    from repro.dkmp import make_cluster

    for n in SIZES:
        rng = np.random.default_rng([15, n])
        x, s = make_cluster(n, rng, nn=1.0)
        np.save(f"{FOLDER}/x{n}.npy", x + rng.normal(0, 0.05, x.shape))
        np.save(f"{FOLDER}/s{n}.npy", s)
    for n in box_sizes():
        rng = np.random.default_rng([15, 7, n])
        k = int(round((n / 4) ** (1 / 3)))
        a = np.sqrt(2.0)
        g = np.arange(k)
        cube = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)
        basis = np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
        b = ((cube[:, None] + basis[None]).reshape(-1, 3) * a)[rng.permutation(4 * k ** 3)]
        L = k * a
        np.save(f"{FOLDER}/b{n}.npy", np.mod(b + rng.normal(0, 0.05, b.shape), L))
        np.save(f"{FOLDER}/L{n}.npy", np.array([L]))


def measure(method: str, sizes: list[int]) -> dict[int, dict[str, float]]:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", WORKER, method, json.dumps(sizes), FOLDER], capture_output=True,
                         text=True, env=env, timeout=1800)
    if out.returncode:
        raise SystemExit(f"{method} failed:\n{out.stderr[-2000:]}")
    return {r["n"]: r for r in map(json.loads, out.stdout.splitlines())}


def slope(rows: dict[int, dict[str, float]], min_n: int = 2048) -> float:
    ns = [n for n in rows if n >= min_n]
    if len(ns) < 2:
        return float("nan")
    return float(np.polyfit(np.log(ns), np.log([rows[n]["t"] for n in ns]), 1)[0])


def table(title: str, methods: dict[str, dict[int, dict[str, float]]], ref: str, counts: bool = False,
          sizes: list[int] | None = None) -> None:
    print(f"\n{title}")
    head = "".join(f"{m:>24}" for m in methods)
    print(f"{'N':>7}{head}   (time ms / peak MiB; ×: time relative to {ref})")
    for n in sizes or SIZES:
        cells = []
        for m, rows in methods.items():
            if n not in rows:
                cells.append(f"{'—':>24}")
                continue
            r = rows[n]
            ratio = r["t"] / methods[ref][n]["t"] if n in methods[ref] else float("nan")
            cells.append(f"{r['t'] * 1e3:9.1f} / {r['mem'] / 2**20:6.1f} ×{ratio:5.1f}")
        extra = ""
        if counts:
            c = {m: rows[n]["count"] for m, rows in methods.items() if n in rows}
            ok = len(set(c.values())) == 1
            fastest = min((rows[n]["t"], m) for m, rows in methods.items() if n in rows)[1]
            extra = f"   pairs {next(iter(c.values()))} ({'all equal' if ok else 'DIFFER: ' + str(c)}); fastest {fastest}"
        print(f"{n:>7}" + "".join(cells) + extra)
    print("log–log slope of time on N >= 2048: " + ", ".join(f"{m} {slope(r):.2f}" for m, r in methods.items()))


def box_sizes() -> list[int]:
    """The periodic boxes hold 4k³ atoms (closest to each of SIZES)."""
    return [4 * int(round((n / 4) ** (1 / 3))) ** 3 for n in SIZES]


def dkmp_scaling(sizes=(1000, 2000, 4000, 8000, 16000)) -> None:
    """The chapter's scaling protocol for DKMP (random atom order and spatially sorted): warm-up at every size,
    median of three, as t(N)/t(N0) with the fastest and slowest run, and µs per message edge."""
    from repro.dkmp import Config, model_spec
    from repro.dkmp.bench import make_spec, timing_sweeps

    kind, kw = model_spec("DKMP", Config())
    specs = [make_spec(kind, kw, list(sizes), repeats=3, sort=False), make_spec(kind, kw, list(sizes), repeats=3, sort=True)]
    rows = timing_sweeps(specs)
    print("\nDKMP force evaluation (graph + forward + forces), warm-up then median of 3; "
          "t(N)/t(N0) [fastest, slowest] and µs per edge")
    print(f"{'N':>7}{'random order':>36}{'sorted by cell':>36}")
    t0 = [r[0]["t_total"] for r in rows]
    for k, n in enumerate(sizes):
        cells = []
        for r, base in zip(rows, t0):
            x = r[k]
            cells.append(f"{x['t_total'] / base:6.2f} [{x['t_min'] / base:5.2f}, {x['t_max'] / base:5.2f}] "
                         f"{x['t_total'] / x['edges'] * 1e6:5.2f} µs/edge")
        print(f"{n:>7}" + "".join(f"{c:>36}" for c in cells))


def main() -> None:
    make_inputs()
    small = [n for n in SIZES if n <= QUADRATIC_MAX]
    pairs = {"pairs-cpp": measure("pairs-cpp", SIZES), "ckdtree": measure("ckdtree", SIZES),
             "vesin": measure("vesin", SIZES)}
    table("Radius graph at 2.5 σ on clusters: our kernel, cKDTree, vesin", pairs, "pairs-cpp", counts=True)
    ref = {"pairs-numpy": measure("pairs-numpy", small), "pairs-cpp": pairs["pairs-cpp"]}
    table("Radius graph at 2.5 σ: the numpy O(N²) reference", ref, "pairs-cpp")
    boxes = box_sizes()
    per = {"ckdtree": measure("ckdtree-box", boxes), "vesin": measure("vesin-box", boxes)}
    table("Radius graph at 2.5 σ in periodic boxes of N = 4k³ atoms (our kernel has no periodic mode)", per,
          "ckdtree", counts=True, sizes=boxes)
    energy = {"energy-cpp": measure("energy-cpp", SIZES), "energy-numpy": measure("energy-numpy", small)}
    table("LJ + screened tail, energy and forces (8 σ)", energy, "energy-cpp")
    print("pairs within 8 σ per atom: " + ", ".join(f"N={n}: {r['count'] / n:.0f}" for n, r in energy["energy-cpp"].items())
          + "  (grows until the cluster radius exceeds 8 σ, hence a slope above 1 at these sizes)")
    centres = {"centres-cpp": measure("centres-cpp", SIZES), "centres-numpy": measure("centres-numpy", small)}
    table("Greedy Poisson-disk centres at 2.7 σ", centres, "centres-cpp")
    n = QUADRATIC_MAX
    win = {m: sum(rows[k]["t"] <= min(r[k]["t"] for r in pairs.values()) for k in SIZES) for m, rows in pairs.items()}
    print(f"\nspeed-ups at N = {n}: pair list numpy/kernel {ref['pairs-numpy'][n]['t'] / pairs['pairs-cpp'][n]['t']:.0f}×, "
          f"energy numpy/kernel {energy['energy-numpy'][n]['t'] / energy['energy-cpp'][n]['t']:.0f}×, "
          f"centres numpy/kernel {centres['centres-numpy'][n]['t'] / centres['centres-cpp'][n]['t']:.0f}×")
    print("fastest radius-graph builder on clusters, sizes won: " + ", ".join(f"{m} {w}/{len(SIZES)}" for m, w in win.items()))
    dkmp_scaling()
    shutil.rmtree(FOLDER, ignore_errors=True)


if __name__ == "__main__":
    main()
