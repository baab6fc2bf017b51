"""Shared fixtures: real public traces, and GPU skipping.

``AIPROF_PUBLIC_TRACES=DIR`` names a copy of Holistic Trace Analysis's ``tests/data`` folder
(github.com/facebookresearch/HolisticTraceAnalysis); by default the ``shared/traces/public``
folder beside the checkout. Without either, the tests run on the subset shipped with aiprof in
``src/aiprof/data/examples`` (same folder and file names), and a test of a trace that is not
shipped skips (``require``).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import signal
import tempfile
from collections.abc import Generator
from pathlib import Path

import pytest

# A test run started in the background by a non-interactive shell inherits SIGINT ignored, and
# so would every process it starts (an ignored signal stays ignored across exec); the interrupt
# tests send SIGINT to aiprof and need it delivered. A handler, unlike SIG_IGN, is reset to the
# default in every child.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parents[1]
PUBLIC_TRACES = Path(
    os.environ.get("AIPROF_PUBLIC_TRACES", REPO.parent / "shared" / "traces" / "public")
)
DATA = REPO / "tests" / "data"
EXAMPLES = REPO / "src" / "aiprof" / "data" / "examples"
REAL_TRACES = PUBLIC_TRACES if PUBLIC_TRACES.is_dir() else EXAMPLES
"""The public traces when present, else the shipped subset (same layout)."""


def require(path: Path) -> Path:
    """``path``, or skip the test when it is one of the public traces that is not shipped."""
    if not path.exists():
        pytest.skip(f"{path.parent.name}/{path.name} is not shipped; set AIPROF_PUBLIC_TRACES")
    return path


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: its order is the work queue's
        _files_with_cpu_hogs_first(items)
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


TESTS_LOCK = Path(tempfile.gettempdir()) / (
    "aiprof-tests-" + hashlib.sha256(str(REPO).encode()).hexdigest()[:12] + ".lock"
)
"""One lock file per checkout, shared by the pytest-xdist workers of a run."""


def _files_with_cpu_hogs_first(items: list[pytest.Item]) -> None:
    """The files holding a ``cpu_hog`` test (the longest: 7-30 s each serially) are handed out
    first, so that no worker is left running one while the other has nothing to do; the rest
    keep their order (``--dist loadfile --no-loadscope-reorder`` hands files out in this order)."""
    heavy = {item.path for item in items if "cpu_hog" in item.keywords}
    items.sort(key=lambda item: item.path not in heavy)  # stable: same order within each part


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    """Under pytest-xdist (``-n``) a ``timing`` test never runs beside a ``cpu_hog`` test or
    another ``timing`` test: it holds an exclusive lock for its setup, call and teardown, a
    ``cpu_hog`` test a shared one (hogs may run beside each other). A timing test so has the
    core it has in a serial run, while ordinary tests (one process each) run on the other
    worker. POSIX record locks (``lockf``) belong to the worker process: a child it forks does
    not inherit them, so no process left behind can hold one. Serial runs: never contended."""
    if "timing" in item.keywords:
        mode = fcntl.LOCK_EX
    elif "cpu_hog" in item.keywords:
        mode = fcntl.LOCK_SH
    else:
        return (yield)
    with TESTS_LOCK.open("a+") as handle:  # closing it releases the lock
        fcntl.lockf(handle, mode)
        return (yield)


@pytest.fixture(scope="session")
def public_traces() -> Path:
    """``REAL_TRACES``: wrap a path with ``require`` unless it is shipped."""
    return REAL_TRACES
