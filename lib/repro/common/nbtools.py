"""Notebook housekeeping: strip outputs before committing, list the parameters cell.

``python -m repro.common.nbtools strip notebooks/*.ipynb`` removes outputs and execution counts (git keeps
notebooks clean; the book shows executed copies from ``results/``).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import nbformat


def strip(path: Path) -> bool:
    """Remove outputs, execution counts and run metadata; return True if the file changed."""
    nb = nbformat.read(path, as_version=4)
    before = nbformat.writes(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        cell.metadata.pop("execution", None)
        cell.metadata.pop("papermill", None)
    nb.metadata.pop("papermill", None)
    nb.metadata.pop("widgets", None)
    after = nbformat.writes(nb)
    if after != before:
        path.write_text(after)
    return after != before


def parameter_names(path: Path) -> dict[str, object]:
    """Names assigned in the cell tagged ``parameters``, with their literal defaults."""
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    if len(cells) != 1:
        raise ValueError(f"{path}: {len(cells)} cells tagged 'parameters' (want exactly 1)")
    out = {}
    for node in ast.parse(cells[0].source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


def figures(path: Path, out_dir: Path) -> list[Path]:
    """Write every PNG output of an executed notebook to ``out_dir`` (to look at them one by one)."""
    import base64

    nb = nbformat.read(path, as_version=4)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for i, cell in enumerate(nb.cells):
        for j, output in enumerate(cell.get("outputs", [])):
            data = output.get("data", {}).get("image/png")
            if data:
                target = out_dir / f"{path.stem}-cell{i:02d}-{j}.png"
                target.write_bytes(base64.b64decode(data))
                written.append(target)
    return written


if __name__ == "__main__":
    usage = "usage: python -m repro.common.nbtools strip NOTEBOOK... | figures NOTEBOOK OUT_DIR"
    if len(sys.argv) < 3 or sys.argv[1] not in ("strip", "figures"):
        raise SystemExit(usage)
    if sys.argv[1] == "strip":
        for p in sys.argv[2:]:
            print(("stripped " if strip(Path(p)) else "clean    ") + p)
    else:
        for f in figures(Path(sys.argv[2]), Path(sys.argv[3])):
            print(f)
