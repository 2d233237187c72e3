"""The claims ledger: every claim a chapter tests, the numbers it measured, and a verdict.

A chapter registers its claims (ids and statements exactly as in its card) and its *controls* when it
starts, records each one once its numbers exist, and saves. A control is a measured check that this run
could see an effect of the claim's kind (the trained model beats its untrained copy, the attack hurts the
undefended model, the structure under test is exercised); it passes or fails. The verdict of a claim is
derived from a condition computed from measured numbers, never typed in, and a claim whose needed control
failed is ``inconclusive`` whatever its own condition says::

    ledger = Ledger(cfg, {"C1": "ROSE's regularised gap decays at rate 1/n", ...},
                    controls={"K1": "the solver reproduces the closed-form equilibrium"})
    ledger.control("K1", holds=err <= 1e-6, threshold="max error <= 1e-6", numbers={"max error": err})
    ledger.record("C1", holds=slope <= -0.8, threshold="slope <= -0.8",
                  numbers={"slope": slope, "ci95": ci}, reason="...", needs=("K1",))
    ledger            # renders the verdict table, controls first
    ledger.glue()     # every verdict and reason as myst-nb glue keys (C1_verdict, K1_verdict, ...)
    ledger.save()     # results/<slug>/<profile>-seed<seed>.json, atomically

``save`` refuses to write a ledger with a registered claim left unrecorded, so a notebook cannot drop a
claim silently, and writes through a temporary file renamed into place, so an interrupted run never
leaves a file that looks complete.
"""
from __future__ import annotations

import datetime as _dt
import html
import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .params import BaseConfig
from .paths import results_dir
from .provenance import Stopwatch, git_commit, package_versions, peak_rss_mib

VERDICTS = ("holds", "fails", "inconclusive")
CONTROL_VERDICTS = ("passed", "failed")
_COLORS = {"holds": "#1a7f37", "fails": "#cf222e", "inconclusive": "#9a6700", "passed": "#1a7f37",
           "failed": "#cf222e"}


@dataclass
class Control:
    """A positive control: a measured check that this run could see an effect of a claim's kind."""

    id: str
    statement: str
    verdict: str = "not recorded"
    threshold: str = ""
    numbers: dict[str, Any] = field(default_factory=dict)
    reason: str = ""

    @property
    def name(self) -> str:
        """``C1 · Fast rate`` when the statement starts with a short ``Name:`` or ``(Name)``, else the id."""
        text = self.statement
        if text.startswith("(") and ")" in text:  # "(transfer) Pretrain on ECG, …": a colon inside is the name's
            head = text[1:text.index(")")]
        elif ":" in text:
            head = text.split(":")[0]
        else:
            return self.id
        return f"{self.id} · {head}" if len(head) <= 60 else self.id


def _clean(value: Any) -> Any:
    """JSON-able numbers: numpy scalars to Python, floats rounded to 6 significant digits, NaN to None."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            return None if math.isnan(value) else value
        return float(f"{value:.6g}")
    return str(value)


def fmt(value: Any) -> str:
    """A number as the ledger shows it: 4 significant digits; intervals as [lo, hi]."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return "nan" if value is None or math.isnan(value) else f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt(v) for v in value) + "]"
    if value is None:
        return "n/a"
    return str(value)


def write_json_atomic(path: Path, payload: Any) -> Path:
    """Write JSON through a temporary file in the same folder, then rename: all or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(payload, fh, indent=2, sort_keys=False)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


@dataclass
class Claim(Control):
    """One claim of a chapter, what this run measured for it, and the controls it rests on."""

    needs: list[str] = field(default_factory=list)


class Ledger:
    """The verdict table of one run of one chapter: its controls, then its claims."""

    def __init__(self, cfg: BaseConfig, claims: dict[str, str], controls: dict[str, str] | None = None) -> None:
        if not claims:
            raise ValueError("a ledger needs the chapter's claims: {id: statement}")
        clash = set(claims) & set(controls or {})
        if clash:
            raise ValueError(f"ids used for both a claim and a control: {', '.join(sorted(clash))}")
        self.cfg = cfg
        self.slug = cfg.slug
        self.claims = {cid: Claim(cid, text) for cid, text in claims.items()}
        self.controls = {kid: Control(kid, text) for kid, text in (controls or {}).items()}
        self.clock = Stopwatch()
        self.extra: dict[str, Any] = {}

    # ------------------------------------------------------------------ controls
    def control(
        self,
        control_id: str,
        *,
        holds: bool,
        threshold: str,
        numbers: dict[str, Any],
        reason: str = "",
    ) -> None:
        """Record a control: ``holds`` is its condition on the measured ``numbers`` (``passed``/``failed``).

        ``reason`` says what a failure means (computed from the numbers); it is kept only when it failed.
        """
        if control_id not in self.controls:
            known = ", ".join(self.controls) or "none declared"
            raise KeyError(f"unknown control {control_id!r}; declared: {known}")
        if holds is None:
            raise ValueError(f"{control_id}: a control passes or fails; give holds=True/False")
        ctl = self.controls[control_id]
        ctl.verdict = "passed" if bool(holds) else "failed"
        ctl.reason = "" if holds else (reason or f"{threshold} not met")
        ctl.threshold = threshold
        ctl.numbers = _clean(numbers)

    # ------------------------------------------------------------------ recording
    def record(
        self,
        claim_id: str,
        *,
        holds: bool | None,
        threshold: str,
        numbers: dict[str, Any],
        reason: str = "",
        inconclusive: str | None = None,
        needs: tuple[str, ...] | list[str] = (),
    ) -> None:
        """Record a claim's measured ``numbers`` and its verdict.

        ``holds`` is the claim's condition evaluated on those numbers. Pass ``inconclusive`` (the reason)
        when the run cannot decide, e.g. the smoke profile has too few sizes to fit a slope; the condition
        is then kept in the numbers for information but does not become a verdict.

        ``needs`` names the controls this claim rests on. They must be recorded first (an error otherwise);
        if any of them failed, the claim is ``inconclusive`` with the reason "control K1 failed: …",
        whatever its own condition says — a guard on a "holds" as much as on a "fails".
        """
        if claim_id not in self.claims:
            raise KeyError(f"unknown claim {claim_id!r}; registered: {', '.join(self.claims)}")
        needs = [needs] if isinstance(needs, str) else list(needs)
        unknown = [k for k in needs if k not in self.controls]
        if unknown:
            raise KeyError(f"{claim_id} needs undeclared control(s) {', '.join(unknown)}; "
                           f"declared: {', '.join(self.controls) or 'none'}")
        pending = [k for k in needs if self.controls[k].verdict not in CONTROL_VERDICTS]
        if pending:
            raise RuntimeError(f"{claim_id} needs control(s) {', '.join(pending)}, not recorded yet: "
                               "record controls before the claims that rest on them")
        claim = self.claims[claim_id]
        claim.needs = needs
        failed = [self.controls[k] for k in needs if self.controls[k].verdict == "failed"]
        if failed:
            why = "; ".join(f"control {k.id} failed: {k.reason}" for k in failed)
            if holds is not None:
                why += f" (the claim's own condition {'was' if holds else 'was not'} met)"
            inconclusive = why + (f"; {inconclusive}" if inconclusive else "")
        if inconclusive:
            claim.verdict, claim.reason = "inconclusive", inconclusive
            numbers = {**numbers, "condition met": holds}
        elif holds is None:
            raise ValueError(f"{claim_id}: give holds=True/False, or inconclusive='why'")
        else:
            claim.verdict = "holds" if bool(holds) else "fails"
            claim.reason = reason
        claim.threshold = threshold
        claim.numbers = _clean(numbers)

    @property
    def complete(self) -> bool:
        return (all(c.verdict in VERDICTS for c in self.claims.values())
                and all(k.verdict in CONTROL_VERDICTS for k in self.controls.values()))

    def verdict(self, item_id: str) -> str:
        """The verdict of a claim (holds/fails/inconclusive) or a control (passed/failed)."""
        item = self.claims.get(item_id) or self.controls.get(item_id)
        if item is None:
            raise KeyError(f"no claim or control {item_id!r}")
        return item.verdict

    def glue(self) -> None:
        """Glue every verdict and reason for the prose: ``{glue:text}`C1_verdict```, ``C1_reason``,
        ``K1_verdict``, ``K1_reason`` (myst-nb; nothing is displayed)."""
        from .text import glue

        for item in [*self.controls.values(), *self.claims.values()]:
            glue(f"{item.id}_verdict", item.verdict)
            glue(f"{item.id}_reason", item.reason or "—")

    # ------------------------------------------------------------------ views
    def _items(self) -> list[Claim | Control]:
        return [*self.controls.values(), *self.claims.values()]

    def rows(self) -> list[dict[str, str]]:
        """One row per control, then one per claim."""
        return [
            {
                "claim": c.id,
                "kind": "claim" if isinstance(c, Claim) else "control",
                "statement": c.statement,
                "threshold": c.threshold,
                "measured": "; ".join(f"{k} = {fmt(v)}" for k, v in c.numbers.items()),
                "verdict": c.verdict,
                "needs": ", ".join(getattr(c, "needs", [])),
                "why": c.reason,
            }
            for c in self._items()
        ]

    def table(self):
        """The ledger as a pandas DataFrame (one row per control, then per claim)."""
        import pandas as pd

        return pd.DataFrame(self.rows()).set_index("claim")

    def _repr_html_(self) -> str:
        # The statements are in the chapter's "Claims we test"; the table names each item and shows the numbers.
        cols = ("", "threshold", "measured", "needs", "verdict", "why")
        head = "".join(f"<th>{h}</th>" for h in cols)
        body = []
        for kind, title in (("control", "Controls: could this run see the effect?"), ("claim", "Claims")):
            items = [(c, r) for c, r in zip(self._items(), self.rows()) if r["kind"] == kind]
            if not items:
                continue
            body.append(f'<tr><th colspan="{len(cols)}" style="text-align:left">{title}</th></tr>')
            for c, r in items:
                color = _COLORS.get(r["verdict"], "#57606a")
                cells = [f"<b>{html.escape(c.name)}</b>"] + [html.escape(r[k]) for k in ("threshold", "measured",
                                                                                            "needs")]
                cells.append(f'<b style="color:{color}">{html.escape(r["verdict"])}</b>')
                cells.append(html.escape(r["why"]))
                body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        return f'<table class="claims-ledger"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'

    def __repr__(self) -> str:
        lines = [f"Claims ledger — {self.slug}, profile {self.cfg.profile}, seed {self.cfg.seed}"]
        for r in self.rows():
            lines.append(f"{r['claim']:>4}  {r['verdict']:<12} {r['measured']}")
        return "\n".join(lines)

    # ------------------------------------------------------------------ saving
    def path(self) -> Path:
        return results_dir(self.slug) / f"{self.cfg.profile}-seed{self.cfg.seed}.json"

    def payload(self) -> dict[str, Any]:
        return {
            "slug": self.slug,
            "profile": self.cfg.profile,
            "seed": self.cfg.seed,
            "params": self.cfg.to_dict(),
            "controls": [asdict(k) for k in self.controls.values()],
            "claims": [asdict(c) for c in self.claims.values()],
            "wall_s": round(self.clock.elapsed(), 2),
            "phases_s": dict(self.clock.laps),
            "peak_rss_mib": peak_rss_mib(),
            "provenance": {
                **git_commit(),
                "packages": package_versions(),
                "threads": os.environ.get("OMP_NUM_THREADS", "unset"),
                "finished_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            },
            **({"extra": _clean(self.extra)} if self.extra else {}),
            "complete": True,
        }

    def save(self) -> Path:
        """Write ``results/<slug>/<profile>-seed<seed>.json`` atomically; refuse if a claim or control is missing."""
        missing = [c.id for c in self.claims.values() if c.verdict not in VERDICTS]
        missing += [k.id for k in self.controls.values() if k.verdict not in CONTROL_VERDICTS]
        if missing:
            raise RuntimeError(f"{self.slug}: never recorded: {', '.join(missing)}; nothing written")
        return write_json_atomic(self.path(), self.payload())

    def summary(self) -> str:
        """Wall time, peak memory and commit, one line (not part of the determinism check)."""
        p = self.payload()
        return (f"{self.slug} · profile {self.cfg.profile} · seed {self.cfg.seed} · wall {p['wall_s']:.1f} s · "
                f"peak memory {p['peak_rss_mib']:.0f} MiB · commit {p['provenance']['commit'][:10]}"
                f"{' (+local changes)' if p['provenance']['dirty'] else ''}")


def load_ledgers(slug: str | None = None, profile: str | None = None) -> list[dict[str, Any]]:
    """Every saved ledger under ``results/`` (optionally one chapter's, one profile's)."""
    root = results_dir()
    pattern = f"{slug or '*'}/{profile or '*'}-seed*.json"
    out = []
    for path in sorted(root.glob(pattern)):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if data.get("complete"):
            out.append(data)
    return out
