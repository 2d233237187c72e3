"""Test-session wiring for ``make test``, which runs ``pytest -n 2 --dist loadfile --no-loadscope-reorder``
(pytest-xdist): one worker drives the smoke notebooks (two executions at a time, but with gaps: kernel starts,
the determinism re-runs' tail, the book build) while the other runs the unit tests, a module at a time, so
that each module's fixtures (a trained model, a cluster) are built once. Before, the unit tests ran on one core,
alone, before the notebooks."""
from __future__ import annotations

NOTEBOOKS = "test_notebooks.py"


def pytest_collection_modifyitems(session, config, items):
    """The notebooks' module first, so that its long executions start at once (xdist hands out the modules in
    collection order when told ``--no-loadscope-reorder``)."""
    items.sort(key=lambda item: item.path.name != NOTEBOOKS)  # a stable sort: the rest keep their order
