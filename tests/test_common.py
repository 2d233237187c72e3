"""The shared library: config validation, the ledger, seeding, statistics, the runner's argument parsing."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
import pytest

from repro.common import BaseConfig, ConfigError, Ledger, bootstrap_ci, knob, loglog_slope, mean_ci, seed_everything
from repro.common.book import offline_available
from repro.common.claims import load_ledgers
from repro.common.runner import parse_params
from repro.common.sweep import parse_seeds, summarise


@dataclass(frozen=True)
class ToyConfig(BaseConfig):
    slug: ClassVar[str] = "toy"
    PROFILES: ClassVar[dict] = {"full": {}, "smoke": {"n": 3}}
    n: int = knob(10, ge=1, doc="size")
    rate: float = knob(0.5, gt=0, lt=1)
    sizes: tuple[int, ...] = knob((1, 2), ge=1, min_len=1)
    mode: Literal["a", "b"] = knob("a")
    step: float | Literal["auto"] = knob("auto", gt=0)

    def check(self) -> None:
        if self.n < len(self.sizes):
            self.fail("n", "must be at least len(sizes)")


@pytest.fixture()
def results(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_RESULTS", str(tmp_path))
    return tmp_path


# ---------------------------------------------------------------------------------------------- config
def test_profile_defaults_and_overrides():
    assert ToyConfig.from_profile("full").n == 10
    assert ToyConfig.from_profile("smoke").n == 3
    cfg = ToyConfig.from_profile("smoke", seed=4, n=7, rate=None)  # None = the profile's value
    assert (cfg.n, cfg.rate, cfg.seed) == (7, 0.5, 4)


def test_coercions_are_exact_not_guessing():
    cfg = ToyConfig.from_profile("full", rate=1 / 4, sizes=[3, 4], step=2)
    assert cfg.sizes == (3, 4) and isinstance(cfg.step, float)
    assert ToyConfig.from_profile("full", n=5.0).n == 5  # an integral float (YAML) is an int


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"profile": "huge"}, "parameter 'profile' must be one of 'full', 'smoke'"),
        ({"seed": "three"}, "parameter 'seed' must be an integer"),
        ({"seed": -1}, "parameter 'seed' must be >= 0"),
        ({"n": True}, "parameter 'n' must be an integer"),
        ({"n": "3"}, "parameter 'n' must be an integer"),
        ({"n": 2.5}, "parameter 'n' must be an integer"),
        ({"rate": "0.1"}, "parameter 'rate' must be a number"),
        ({"rate": 1.0}, "parameter 'rate' must be > 0 and < 1"),
        ({"rate": float("nan")}, "parameter 'rate' must be a number"),
        ({"sizes": 3}, "parameter 'sizes' must be a list of integers"),
        ({"sizes": [1, 0]}, "parameter 'sizes' must be >= 1"),
        ({"sizes": []}, "parameter 'sizes' needs at least 1 items"),
        ({"mode": "c"}, "parameter 'mode' must be 'a' or 'b'"),
        ({"step": "fast"}, "parameter 'step' must be a number or 'auto'"),
        ({"step": -1}, "parameter 'step' must be > 0"),
        ({"n": 1, "sizes": [1, 2]}, "parameter 'n' must be at least len(sizes)"),
        ({"no_such_knob": 1}, "unknown parameter 'no_such_knob'"),
    ],
)
def test_bad_values_are_rejected_with_one_line_naming_them(kwargs, needle):
    profile = kwargs.pop("profile", "full")
    with pytest.raises(ConfigError) as err:
        ToyConfig.from_profile(profile, **kwargs)
    assert needle in str(err.value)
    assert str(err.value).startswith("toy: ") and "\n" not in str(err.value)


def test_direct_construction_is_validated_too():
    with pytest.raises(ConfigError, match="'rate'"):
        ToyConfig(rate=3.0)
    with pytest.raises(ConfigError, match="'profile'"):
        ToyConfig(profile="huge")


def test_describe_lists_every_knob_with_profiles():
    rows = {r["name"]: r for r in ToyConfig.describe()}
    assert set(rows) == {"profile", "seed", "n", "rate", "sizes", "mode", "step"}
    assert rows["n"]["full"] == 10 and rows["n"]["smoke"] == 3 and rows["n"]["allowed"] == ">= 1"


# ---------------------------------------------------------------------------------------------- ledger
def test_ledger_records_verdicts_and_writes_atomically(results):
    cfg = ToyConfig.from_profile("smoke", seed=2)
    ledger = Ledger(cfg, {"C1": "x is small", "C2": "y is large", "C3": "slope"})
    ledger.record("C1", holds=True, threshold="x < 1", numbers={"x": np.float64(0.123456789)})
    ledger.record("C2", holds=False, threshold="y > 1", numbers={"y": 0.5}, reason="too few samples")
    ledger.record("C3", holds=True, threshold="slope < -1", numbers={"slope": -2.0}, inconclusive="smoke profile")
    path = ledger.save()
    assert path == results / "toy" / "smoke-seed2.json"
    data = json.loads(path.read_text())
    assert [c["verdict"] for c in data["claims"]] == ["holds", "fails", "inconclusive"]
    assert data["claims"][0]["numbers"]["x"] == 0.123457
    assert data["claims"][2]["numbers"]["condition met"] is True
    assert data["complete"] and data["params"]["n"] == 3 and data["wall_s"] >= 0
    assert {"commit", "packages", "finished_at"} <= set(data["provenance"])
    assert not list((results / "toy").glob("*.tmp"))
    assert "holds" in ledger._repr_html_() and "C2" in repr(ledger)
    assert [d["seed"] for d in load_ledgers("toy", "smoke")] == [2]


def test_a_claims_short_name_comes_from_name_colon_or_a_leading_parenthesis():
    from repro.common.claims import Claim

    assert Claim("C1", "Fast rate: the error falls as 1/n").name == "C1 · Fast rate"
    assert Claim("C1", "(synthetic: class identity) On Lorenz windows, …").name == "C1 · synthetic: class identity"
    assert Claim("C5", "(transfer) Pretrain on ECG: fine-tune on PPG").name == "C5 · transfer"
    assert Claim("C2", "UCAT's ECE is lower than TeCoA's.").name == "C2"
    assert Claim("C3", "(" + "x" * 70 + ") long").name == "C3"


def test_ledger_refuses_to_save_with_a_claim_missing(results):
    ledger = Ledger(ToyConfig.from_profile("smoke"), {"C1": "a", "C2": "b"})
    ledger.record("C1", holds=True, threshold="", numbers={})
    with pytest.raises(RuntimeError, match="C2"):
        ledger.save()
    assert not (results / "toy" / "smoke-seed0.json").exists()
    with pytest.raises(KeyError):
        ledger.record("C9", holds=True, threshold="", numbers={})
    with pytest.raises(ValueError):
        ledger.record("C2", holds=None, threshold="", numbers={})


def _controlled_ledger() -> Ledger:
    return Ledger(ToyConfig.from_profile("smoke"), {"C1": "A beats B", "C2": "slope", "C3": "no need"},
                  controls={"K1": "training moved the model", "K2": "the attack hurts"})


def test_a_failed_control_turns_a_holding_claim_inconclusive(results):
    ledger = _controlled_ledger()
    ledger.control("K1", holds=True, threshold="gain >= 0.1", numbers={"gain": 0.3})
    ledger.control("K2", holds=False, threshold="drop >= 0.1", numbers={"drop": 0.01},
                   reason="the attack lowers accuracy by 0.01 only")
    ledger.record("C1", holds=True, threshold="A > B", numbers={"diff": 0.2}, needs=("K1", "K2"))
    ledger.record("C2", holds=False, threshold="slope < -1", numbers={"slope": -0.5}, reason="shallow",
                  needs=("K1",))
    ledger.record("C3", holds=True, threshold="x", numbers={})
    c1 = ledger.claims["C1"]
    assert c1.verdict == "inconclusive" and c1.reason.startswith("control K2 failed: the attack lowers")
    assert "own condition was met" in c1.reason and c1.numbers["condition met"] is True
    assert ledger.verdict("C2") == "fails" and ledger.verdict("C3") == "holds"
    assert ledger.verdict("K1") == "passed" and ledger.verdict("K2") == "failed"
    data = json.loads(ledger.save().read_text())
    assert [k["verdict"] for k in data["controls"]] == ["passed", "failed"]
    assert data["claims"][0]["needs"] == ["K1", "K2"]
    table = ledger._repr_html_()
    assert table.index("K1") < table.index("C1") and "Controls" in table
    # a failing claim whose control failed is just as inconclusive
    ledger2 = _controlled_ledger()
    ledger2.control("K1", holds=False, threshold="gain >= 0.1", numbers={"gain": 0.0})
    ledger2.record("C1", holds=False, threshold="A > B", numbers={}, needs=("K1",))
    assert ledger2.verdict("C1") == "inconclusive" and "gain >= 0.1 not met" in ledger2.claims["C1"].reason


def test_claims_before_their_controls_or_unknown_controls_are_errors(results):
    ledger = _controlled_ledger()
    with pytest.raises(RuntimeError, match="K1"):
        ledger.record("C1", holds=True, threshold="", numbers={}, needs=("K1",))
    with pytest.raises(KeyError, match="K9"):
        ledger.record("C1", holds=True, threshold="", numbers={}, needs=("K9",))
    with pytest.raises(KeyError):
        ledger.control("K9", holds=True, threshold="", numbers={})
    ledger.control("K1", holds=True, threshold="", numbers={})
    for cid in ("C1", "C2", "C3"):
        ledger.record(cid, holds=True, threshold="", numbers={}, needs=("K1",))
    with pytest.raises(RuntimeError, match="K2"):  # a declared control never recorded
        ledger.save()
    with pytest.raises(ValueError, match="both"):
        Ledger(ToyConfig.from_profile("smoke"), {"C1": "a"}, controls={"C1": "b"})


def test_compare_paired_returns_each_word():
    from repro.common import compare_paired

    rng = np.random.default_rng(0)
    base = rng.normal(size=8)
    better = compare_paired(base + 1.0 + 0.1 * rng.normal(size=8), base)
    assert better.word == "better" and better.better and better.ci_lo > 0
    worse = compare_paired(base - 1.0 + 0.1 * rng.normal(size=8), base)
    assert worse.word == "worse" and worse.ci_hi < 0
    noise = compare_paired(base + 0.5 * rng.normal(size=8), base)
    assert noise.word == "no measurable difference" and noise.ci_lo < 0 < noise.ci_hi
    # lower is better flips the orientation; a margin demands more than excluding 0
    assert compare_paired(base - 1.0, base + 0.01 * rng.normal(size=8), higher_is_better=False).better
    assert compare_paired(base + 1.0 + 0.1 * rng.normal(size=8), base, margin=2.0).word == "no measurable difference"
    # no worse than, with a margin: the lower end of the CI above -margin
    near = compare_paired(base - 0.05 + 0.01 * rng.normal(size=8), base)
    assert near.worse and near.no_worse_than(0.2) and not near.no_worse_than(0.01)
    one = compare_paired([1.0], [0.0])
    assert one.word == "no measurable difference" and one.ci_lo == -np.inf
    assert set(better.numbers("A − B")) == {"A − B mean diff", "A − B diff ci95", "A − B pairs", "A − B comparison"}
    with pytest.raises(ValueError):
        compare_paired([1.0, 2.0], [1.0])


def test_text_formats_numbers_for_the_prose():
    from repro.common import ci_text, fmt_value

    assert fmt_value(0.123456) == "0.1235" and fmt_value(3) == "3" and fmt_value(np.float64(2.5)) == "2.5"
    assert fmt_value([12.11, 19.34], digits=3) == "[12.1, 19.3]" and fmt_value(float("nan")) == "n/a"
    assert ci_text(-1.313, -1.512, -1.155) == "-1.31 [-1.51, -1.16]"


def test_sweep_summary_counts_verdicts_and_averages(results):
    for seed, x in [(0, 1.0), (1, 3.0)]:
        ledger = Ledger(ToyConfig.from_profile("smoke", seed=seed), {"C1": "a"})
        ledger.record("C1", holds=x < 2, threshold="x < 2", numbers={"x": x})
        ledger.save()
    s = summarise("toy", "smoke", [0, 1])
    assert s["claims"]["C1"]["verdicts"] == {"holds": 1, "fails": 1} and s["controls"] == {}
    assert s["claims"]["C1"]["numbers"]["x"]["mean"] == 2.0
    assert parse_seeds("0-2,5") == [0, 1, 2, 5]
    with pytest.raises(SystemExit):
        parse_seeds("a-b")


# ---------------------------------------------------------------------------------------------- runner
def test_parse_params_follows_papermill_typing():
    p = parse_params(["-p", "seed", "3", "-p", "beta", "-1", "-p", "name", "three", "-r", "raw", "3",
                      "-p", "flag", "True", "-y", "n_list: [1, 2]", "-p", "sizes", "[4, 5]"])
    assert p == {"seed": 3, "beta": -1, "name": "three", "raw": "3", "flag": True, "n_list": [1, 2], "sizes": [4, 5]}
    with pytest.raises(ConfigError):
        parse_params(["-p", "seed"])
    with pytest.raises(ConfigError):
        parse_params(["--bogus"])


# ---------------------------------------------------------------------------------------------- seeding, stats
def test_seeding_is_reproducible():
    a = seed_everything(5).normal(size=4)
    b = seed_everything(5).normal(size=4)
    c = seed_everything(6).normal(size=4)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_mean_ci_matches_t_interval_and_covers():
    rng = np.random.default_rng(0)
    x = rng.normal(1.0, 2.0, size=(5000, 10))
    mean, half = mean_ci(x, axis=1)
    coverage = np.mean(np.abs(mean - 1.0) <= half)
    assert 0.93 < coverage < 0.97  # a 95% interval covers about 95% of the time
    assert mean_ci(np.array([3.0]))[1] == 0.0


def test_slope_and_bootstrap():
    n = np.array([100, 200, 400, 800])
    assert loglog_slope(n, 3.0 * n**-1.0) == pytest.approx(-1.0)
    lo, hi = bootstrap_ci(np.arange(20.0), np.mean, rng=0)
    assert lo < 9.5 < hi and hi - lo < 6


def test_paired_summary_handles_identical_differences():
    from repro.common import paired_summary

    out = paired_summary(np.array([1.0, 2.0, 3.0]), np.array([0.5, 1.5, 2.5]))
    assert out["mean_diff"] == pytest.approx(0.5) and out["p_value"] == 0.0
    assert np.isnan(paired_summary(np.array([1.0, 2.0]), np.array([1.0, 2.0]))["p_value"])
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=30), rng.normal(size=30)
    assert 0 < paired_summary(a, b)["p_value"] < 1


def test_scorecard_shows_controls_above_claims_and_seed_counts(results):
    from repro.common.book import scorecard_markdown
    from repro.common.paths import chapter_slugs

    slug = chapter_slugs()[0]

    @dataclass(frozen=True)
    class ChapterConfig(ToyConfig):
        slug: ClassVar[str] = chapter_slugs()[0]

    for seed, ok in [(0, True), (1, False)]:
        ledger = Ledger(ChapterConfig.from_profile("smoke", seed=seed), {"C1": "Name: a claim"},
                        controls={"K1": "Trained: the model learned"})
        ledger.control("K1", holds=ok, threshold="gain > 0", numbers={"gain": 1.0 if ok else 0.0})
        ledger.record("C1", holds=True, threshold="x", numbers={"x": 1.0}, needs=("K1",))
        ledger.save()
    md = scorecard_markdown("smoke")
    assert "| 1/1 | 1 | 1 | 0 | 0 | 0,1 |" in md  # seed 0's verdicts in the chapter line
    k1, c1 = md.index("K1 · Trained"), md.index("C1 · Name")
    assert k1 < c1
    # C1 is inconclusive at seed 1 (K1 failed there), and the count says so
    assert "passed 1/2 · seed-dependent" in md and "holds 1/2 · inconclusive 1/2 · seed-dependent" in md
    assert "1 verdicts are seed-dependent" in md and "across seeds" in md
    assert slug.replace("_", r"\_") in md
    one = scorecard_markdown("smoke", {slug: [0]})
    assert "across seeds" not in one and "seed-dependent" not in one


def test_across_seeds_section_and_heatmap(results, tmp_path):
    from repro.common.robustness import across_seeds, chapter_section, heatmap

    for seed, ok in [(0, True), (1, True), (2, False)]:
        ledger = Ledger(ToyConfig.from_profile("smoke", seed=seed), {"C1": "a", "C2": "b"},
                        controls={"K1": "k", "K2": "l"})
        ledger.control("K1", holds=True, threshold="", numbers={"gain": 1.0 + seed})
        ledger.control("K2", holds=seed != 1, threshold="", numbers={"gain": 1.0})
        ledger.record("C1", holds=ok, threshold="", numbers={"x": float(seed)}, needs=("K1",))
        ledger.record("C2", holds=False, threshold="", numbers={"x": 0.0}, needs=("K2",))  # inconclusive at seed 1
        ledger.save()
    rows = across_seeds("toy", "smoke", [0, 1, 2])
    assert [(r["id"], r["count"], r["inconclusive"], r["n"], r["seed_dependent"]) for r in rows] == [
        ("K1", 3, 0, 3, False), ("K2", 2, 0, 3, True), ("C1", 2, 0, 3, True), ("C2", 0, 1, 3, True)]
    assert "gain = 2 ± " in rows[0]["numbers"]
    section = chapter_section("toy", "smoke", [0, 1, 2])
    assert "### Across seeds" in section and "holds 2/3 · seed-dependent" in section and "passed 3/3" in section
    # "holds 0/3" alone would read as a claim that failed three times; one of the three said nothing
    assert "holds 0/3 · inconclusive 1/3 · seed-dependent" in section
    assert chapter_section("toy", "smoke", [0]) == ""
    assert heatmap("smoke", [0, 1, 2], ["toy"], tmp_path / "h.png").exists()


def test_the_across_seeds_cell_goes_under_the_ledger_and_keeps_the_notebook_valid(tmp_path):
    """The section is inserted right after the cell tagged nbval-check-output, as a valid nbformat 4.5 cell (with
    an id: without one, nbformat warns on every page of a multi-seed book and will refuse it in a later version)."""
    import warnings

    import nbformat

    from repro.common.book import _with_section

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("ledger", metadata={"tags": ["nbval-check-output"]}),
                                         nbformat.v4.new_markdown_cell("reading")])
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nbformat's MissingIDFieldWarning, raised while reading
        out = nbformat.reads(_with_section(path, "### Across seeds"), as_version=4)
        nbformat.validate(out)
    assert [c.source for c in out.cells] == ["ledger", "### Across seeds", "reading"]


def test_the_book_runs_the_longest_chapters_first(results, monkeypatch):
    """``execute_changed`` orders its runs by the wall time of each chapter's saved ledgers, unknown ones first,
    so that the run ending last is a short one (two workers idle less)."""
    from repro.common import book

    for slug, wall in [("a", 5.0), ("b", 50.0), ("c", 20.0)]:
        (results / slug).mkdir()
        (results / slug / "smoke-seed0.json").write_text(json.dumps({"complete": True, "seed": 0, "wall_s": wall}))
    seen = []
    monkeypatch.setattr(book, "run_many", lambda todo, **kw: seen.extend(j.key for j in todo) or {})
    monkeypatch.setattr(book, "inputs_hash", lambda slug, params: "h")
    assert book.execute_changed("smoke", slugs=["a", "b", "c", "d"]) == []
    assert seen == ["d-smoke-seed0", "b-smoke-seed0", "c-smoke-seed0", "a-smoke-seed0"]


@pytest.mark.skipif(not offline_available(), reason="unshare -rn is not available here")
def test_an_offline_kernel_cannot_reach_the_network_and_a_normal_one_can(tmp_path):
    """The kernel of an offline run (where the notebook's code runs) cannot connect even to a server on this
    machine's loopback; the same cell in a normal kernel connects (the control: the cell can succeed)."""
    import socket

    import nbformat
    from nbclient import NotebookClient

    from repro.common.runner import kernel_config, offline_kernel_manager

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2).close()\nprint('connected')"
    outcome = {}
    try:
        for name, extra in (("normal", {}), ("offline", {"kernel_manager_class": offline_kernel_manager()})):
            nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
            (tmp_path / name).mkdir()
            client = NotebookClient(nb, kernel_name="python3", timeout=60, allow_errors=True,
                                    config=kernel_config(tmp_path / name), **extra)
            client.execute()
            outputs = nb.cells[0].outputs
            outcome[name] = next((o.get("ename") for o in outputs if o.output_type == "error"), "connected")
    finally:
        server.close()
    assert outcome["normal"] == "connected", outcome
    assert outcome["offline"] in ("OSError", "ConnectionRefusedError", "TimeoutError"), outcome


# ---------------------------------------------------------------------------------------------- thresholds
def test_threshold_decided_only_when_the_interval_clears_the_bar():
    from repro.common import decide_threshold, threshold_from_ci

    assert threshold_from_ci(1.40, 1.35, 1.45, 1.3).word == "holds"
    assert threshold_from_ci(1.20, 1.15, 1.25, 1.3).word == "fails"
    t = threshold_from_ci(1.287, 1.25, 1.32, 1.3)  # the point estimate is below, the interval straddles
    assert t.word == "inconclusive" and "within noise" in t.reason and t.ledger_kwargs()["holds"] is None
    assert threshold_from_ci(0.02, 0.01, 0.03, 0.05, "<=").word == "holds"
    assert threshold_from_ci(0.08, 0.06, 0.1, 0.05, "<=").word == "fails"
    assert decide_threshold([0.9], 0.5).word == "inconclusive"  # one unit: no interval
    assert decide_threshold([0.9, 0.91, 0.92, 0.9], 0.5).word == "holds"
    assert decide_threshold([0.1, 0.9, 0.5, 0.6], 0.5).word == "inconclusive"
    with pytest.raises(ValueError, match="direction"):
        threshold_from_ci(1, 0, 2, 1, ">")


def test_comparison_ledger_kwargs_never_decide_on_noise():
    from repro.common import compare_paired

    rng = np.random.default_rng(0)
    a = rng.normal(size=8)
    assert compare_paired(a + 1.0, a).ledger_kwargs() == {"holds": True, "inconclusive": None}
    assert compare_paired(a - 1.0, a).ledger_kwargs() == {"holds": False, "inconclusive": None}
    noisy = compare_paired(a + np.array([1.0, -1.0] * 4) + 0.1, a)  # mean gain 0.1, spread 1
    assert noisy.word == "no measurable difference" and noisy.ledger_kwargs()["holds"] is None


def test_two_level_bootstrap_sees_the_seed_spread():
    from repro.common import bootstrap_two_level

    rng = np.random.default_rng(1)
    # five seeds whose means differ by ±0.1, 200 items each with tiny item noise: an item-only CI would be ±0.001
    table = np.array([[m] * 200 for m in (0.5, 0.6, 0.7, 0.4, 0.3)]) + rng.normal(scale=0.01, size=(5, 200))
    lo, hi = bootstrap_two_level(table, n_boot=400)
    assert hi - lo > 0.1  # the seed spread is in the interval
    with pytest.raises(ValueError, match="2-d"):
        bootstrap_two_level(np.ones(5))
