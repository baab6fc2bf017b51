"""GIVEN a real shipped trace WHEN it is shown or turned into a DataFrame THEN the repr is one
short line and the frame carries names, not string ids."""

from __future__ import annotations

import importlib.util

import pytest

import aiprof
from aiprof.errors import MissingDependencyError


@pytest.fixture(scope="module")
def trace() -> aiprof.Trace:
    return aiprof.load_traces("example:a100_shapes")[0]


def test_repr_is_one_short_line(trace) -> None:
    text = repr(trace)
    assert len(text) < 400 and "\n" not in text
    assert "A100" in text and f"kernels={len(trace.kernels):,}" in text
    assert repr(aiprof.load_traces("example:two_ranks")).startswith("TraceSet(ranks=[0, 1]")


def test_version_is_the_installed_one() -> None:
    from importlib.metadata import version

    assert aiprof.__version__ == version("aiprof")


@pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="pandas not installed")
def test_to_pandas_resolves_names_and_shapes(trace) -> None:
    kernels = trace.to_pandas("kernels")
    assert len(kernels) == len(trace.kernels) and "name_id" not in kernels.columns
    assert kernels["name"][0] == trace.name(int(trace.kernels.name_id[0]))
    ops = trace.to_pandas("cpu_ops")
    shaped = ops["input_dims"].dropna()
    assert len(shaped) > 0 and isinstance(shaped.iloc[0], list)
    with pytest.raises(ValueError, match="the tables are"):
        trace.to_pandas("nope")


def test_to_pandas_without_pandas_says_how_to_get_it(trace, monkeypatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    with pytest.raises(MissingDependencyError, match="pip install pandas"):
        trace.to_pandas("kernels")
