"""``make test`` runs pytest on two xdist workers with ``--dist loadfile --no-loadscope-reorder``: each test file
runs whole on one worker, in collection order. The smoke notebooks (``test_notebooks.py``, which executes every
chapter two at a time) are put first, so that one worker starts them at once and the other runs the unit tests
beside them."""


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: item.nodeid.split("::")[0] != "tests/test_notebooks.py")  # stable: keeps the rest
