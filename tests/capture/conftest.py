"""Fixtures for capture tests: the workload scripts."""

from __future__ import annotations

import pytest
from capture_helpers import WORKLOADS


@pytest.fixture()
def workload():
    def path(name: str) -> str:
        return str(WORKLOADS / name)
    return path
