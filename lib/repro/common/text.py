"""Text from the run: numbers and words for the prose, glued with myst-nb so that no number is typed by hand.

A notebook computes a value and glues it; the markdown pastes it with ``{glue:text}`name```::

    glue("rho_beta_range", [lo, hi])         # "[12.1, 19.3]"
    glue("c1_slope", slope, digits=3)        # "-1.31"
    glue("n_games", 40)                      # "40"

Values are glued as text formatted here (4 significant digits by default, intervals as ``[lo, hi]``), so a
page reads the same number the ledger shows. Each name may be glued once per notebook (Jupyter Book warns on a
duplicate, and the book builds with warnings as errors).
"""
from __future__ import annotations

import math
from typing import Any

__all__ = ["glue", "fmt_value", "ci_text"]


def fmt_value(value: Any, digits: int = 4) -> str:
    """``value`` as prose shows it: numbers to ``digits`` significant digits, sequences as ``[a, b]``."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        text = f"{value:.{digits}g}"
        return text.replace("e+0", "e").replace("e-0", "e-")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt_value(v, digits) for v in value) + "]"
    if value is None:
        return "n/a"
    return str(value)


def ci_text(mean: float, lo: float, hi: float, digits: int = 3) -> str:
    """``"0.123 [0.101, 0.145]"``: an estimate with its 95% interval."""
    return f"{fmt_value(float(mean), digits)} [{fmt_value(float(lo), digits)}, {fmt_value(float(hi), digits)}]"


def glue(name: str, value: Any, digits: int = 4) -> str:
    """Glue ``value`` as text under ``name`` for ``{glue:text}`name``` (nothing is displayed); return the text."""
    from myst_nb import glue as _glue

    text = value if isinstance(value, str) else fmt_value(value, digits)
    _glue(name, text, display=False)
    return text
