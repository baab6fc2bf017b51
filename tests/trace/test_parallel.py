"""GIVEN a trace WHEN it is decoded by worker processes THEN every table equals the in-process
decode (string ids compared as the strings they name)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from aiprof import load_trace
from aiprof.trace import reader

STRING_COLUMNS = ("name_id", "collective_id", "dtype_id", "category_id")
JSON_COLUMNS = ("input_dims_id", "input_types_id", "input_strides_id", "concrete_inputs_id")


def test_workers_give_the_same_tables(public_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "PARALLEL_MIN_FILE_BYTES", 0)
    monkeypatch.setattr("aiprof.trace.source.BLOCK_BYTES", 1 << 18)  # many batches
    path = public_traces / "nccl_parser_config" / "nccl_data.json.gz"
    alone, pooled = load_trace(path), load_trace(path, workers=2)
    assert alone.num_events == pooled.num_events
    for name, table in alone.tables():
        other = getattr(pooled, name).columns()
        for column, values in table.columns().items():
            if column in STRING_COLUMNS:
                assert [alone.strings[i] for i in values] == [
                    pooled.strings[i] for i in other[column]
                ], (name, column)
            elif column in JSON_COLUMNS:
                assert [alone.json_texts[i] for i in values] == [
                    pooled.json_texts[i] for i in other[column]
                ], (name, column)
            else:
                np.testing.assert_array_equal(values, other[column], err_msg=f"{name}.{column}")
