"""GIVEN the optional C column helper and the pure-Python path WHEN both read the same traces
THEN the tables are identical; and the helper refuses what it cannot copy (wrong types, ints
beyond 64 bits, short buffers, foreign objects) with a Python exception, never a crash."""

from __future__ import annotations

import shutil
import sysconfig
from pathlib import Path

import msgspec
import numpy as np
import pytest

from aiprof import load_trace
from aiprof.trace import fields
from aiprof.trace.schema import Event

from .same_tables import assert_same_tables

TESTS = Path(__file__).parents[1]
SMALL_PUBLIC = ("amd_trace", "cpu_only", "ns_resolution_trace", "nccl_parser_config")


def _public(public_traces: Path) -> list[Path]:
    return sorted(p for name in SMALL_PUBLIC for p in (public_traces / name).glob("*.json*"))


@pytest.fixture
def pure_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fields, "_columns", None)


def test_helper_is_built_where_a_compiler_exists() -> None:
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip("no C compiler: the install falls back to the pure-Python path")
    assert fields.COMPILED


@pytest.mark.skipif(not fields.COMPILED, reason="C helper not built")
def test_both_paths_read_the_same_tables(public_traces: Path) -> None:
    paths = _public(public_traces) + sorted((TESTS / "data" / "h200").glob("*.json.gz"))[:2]
    assert len(paths) >= 5
    compiled = [load_trace(p, parts=1) for p in paths]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fields, "_columns", None)
        python = [load_trace(p, parts=1) for p in paths]
    for a, b in zip(compiled, python, strict=True):
        assert_same_tables(a, b)


def test_pure_python_path_still_reads(pure_python: None, public_traces: Path) -> None:
    trace = load_trace(
        public_traces
        / "amd_trace"
        / next(p.name for p in (public_traces / "amd_trace").glob("*.json*"))
    )
    assert len(trace.kernels) > 0 and (trace.kernels.stream >= 0).all()


class _Pair(msgspec.Struct):
    a: float = 0.0
    b: int | str = 0


needs_helper = pytest.mark.skipif(not fields.COMPILED, reason="C helper not built")


@needs_helper
def test_fill_copies_floats_and_ints() -> None:
    objects = [_Pair(1.5, 2), _Pair(-3, 4)]  # msgspec keeps the int given to a float field
    assert fields.floats(objects, "a").tolist() == [1.5, -3.0]
    assert fields.ints(objects, "b").tolist() == [2, 4]


@needs_helper
def test_fill_refuses_a_str_where_an_int_is_expected() -> None:
    with pytest.raises(TypeError):
        fields.ints([_Pair(1.0, 2), _Pair(1.0, "stream 7")], "b")


@needs_helper
def test_fill_refuses_ints_beyond_64_bits() -> None:
    with pytest.raises(OverflowError):
        fields.ints([_Pair(1.0, 2**64)], "b")


@needs_helper
def test_helper_refuses_objects_of_another_class_and_short_buffers() -> None:
    from aiprof.trace import _columns

    slot = _Pair.__dict__["b"]
    with pytest.raises(TypeError):
        _columns.fill([_Pair(), Event()], (slot,), b"q", (np.empty(2, np.int64),))
    with pytest.raises(ValueError):
        _columns.fill([_Pair(), _Pair()], (slot,), b"q", (np.empty(1, np.int64),))
    with pytest.raises(TypeError):
        _columns.fill([_Pair()], ("b",), b"q", (np.empty(1, np.int64),))
    with pytest.raises(ValueError):
        _columns.fill([_Pair()], (slot,), b"x", (np.empty(1, np.int64),))
    with pytest.raises(BufferError):  # read-only buffer
        _columns.fill([_Pair()], (slot,), b"q", (b"\0" * 8,))


@needs_helper
def test_intern_gives_first_seen_ids_and_refuses_non_strings() -> None:
    table: dict[str, int] = {"x": 0}
    objects = [Event(name=n) for n in ("a", "x", "b", "a")]
    assert fields.string_ids(objects, "name", table).tolist() == [1, 0, 2, 1]
    assert table == {"x": 0, "a": 1, "b": 2}
    with pytest.raises(TypeError):
        fields.string_ids([_Pair(b="s"), _Pair(b=3)], "b", {})


def test_present_tells_shared_defaults_from_values() -> None:
    default = object()

    class Holder(msgspec.Struct):
        value: object = None

    objects = [Holder(default), Holder(1), Holder(default), Holder(None)]
    assert fields.present(objects, "value", default).tolist() == [False, True, False, True]
