"""Shared pytest set-up: a headless matplotlib backend, the hypothesis profiles, and the
markers that select the test sets (``make unit`` runs ``pytest -m unit``)."""

import os

import matplotlib
import pytest

matplotlib.use("Agg")

from hypothesis import HealthCheck, settings  # noqa: E402

# "default": fast enough for every run (`make unit` within a minute on two cores); "ci":
# more examples, picked with HYPOTHESIS_PROFILE=ci. No deadline: the first call into torch
# can be slow.
settings.register_profile(
    "default", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# Test files that need more than the helpers and .venv (the notebooks, the book's sources
# and tools, the lint environment): marked `book`. A file may instead say so itself with
# `pytestmark = pytest.mark.book` (or slow, or browser), which is the better place.
BOOK_FILES = {
    "test_notebooks.py",
    "test_text_twins.py",
    "test_glossary.py",
    "test_bibliography.py",
    "test_project_files.py",
    "test_bootstrap_cell.py",
}
NOT_UNIT = ("slow", "browser", "book")


def pytest_collection_modifyitems(items):
    """Mark `book` the tests of BOOK_FILES, then `unit` every test not slow, browser or book."""
    for item in items:
        if item.path.name in BOOK_FILES:
            item.add_marker(pytest.mark.book)
        if not any(item.get_closest_marker(name) for name in NOT_UNIT):
            item.add_marker(pytest.mark.unit)


# pytest-xdist: `make test` runs `--dist loadgroup` with the scheduler below. Tests spread
# over the workers one by one, except what must stay on one worker, in order: a notebook's
# cells (nbval runs them in one kernel), the tests that use the Colab-like venv
# (tests/test_clients.py and Notebook 6.5's test: each holds the venv alone, so on two workers
# one would sit idle waiting for the other's lock) and tests/test_bootstrap_cell.py (its venvs).
# (pytest-xdist's own `xdist_group` marks do not reach its scheduler under pytest 9, which no
# longer reads a node id from `_nodeid`.)
COLAB_VENV_TESTS = ("tests/test_clients.py::", "tests/test_client_frontends.py::test_notebook6")
SERIAL_FILES = {"test_bootstrap_cell.py"}
# The longest groups go first, so that the run does not end waiting on one of them.
FIRST = (
    "tests/test_clients.py",
    "tests/test_client_frontends.py",
    "chapters/",
    "book/",
    "locales/",
)


def _scope(nodeid: str) -> str:
    """The unit of work a test belongs to: its notebook, the Colab-like venv or a serial
    file, else itself."""
    path = nodeid.split("::", 1)[0]
    if nodeid.startswith(COLAB_VENV_TESTS):
        return "colab-venv"
    if path.endswith(".ipynb") or path.rsplit("/", 1)[-1] in SERIAL_FILES:
        return path
    return nodeid


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None  # pytest-xdist's own
    from xdist.scheduler import LoadScopeScheduling

    class NotebookAndSerialFileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    config.option.loadscopereorder = False  # keep the order of _LongestFirst
    return NotebookAndSerialFileScheduling(config, log)


class _LongestFirst:
    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items):
        def rank(item):
            nodeid = item.nodeid
            return next((i for i, p in enumerate(FIRST) if nodeid.startswith(p)), len(FIRST))

        items.sort(key=rank)  # stable: the order within a file or notebook is kept


def pytest_configure(config):
    config.pluginmanager.register(_LongestFirst(), "attention-book-longest-first")
