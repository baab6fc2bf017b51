"""Compare two Traces table by table, string ids replaced by the strings they stand for."""

from __future__ import annotations

import numpy as np

from aiprof.trace.build import JSON_ID_COLUMNS, STRING_ID_COLUMNS
from aiprof.trace.model import Trace


def comparable(trace: Trace) -> dict[str, dict[str, list[object]]]:
    """Every table's columns, string ids replaced by the strings they stand for."""
    out: dict[str, dict[str, list[object]]] = {}
    for name, table in trace.tables():
        columns: dict[str, list[object]] = {}
        for column, values in table.columns().items():
            if column in STRING_ID_COLUMNS:
                columns[column] = [trace.strings[i] if i >= 0 else None for i in values]
            elif column in JSON_ID_COLUMNS:
                columns[column] = [trace.json_texts[i] if i >= 0 else None for i in values]
            else:
                columns[column] = np.asarray(values).tolist()
        out[name] = columns
    return out


def assert_same_tables(a: Trace, b: Trace) -> None:
    assert a.num_events == b.num_events
    assert a.metadata == b.metadata
    assert a.step_source == b.step_source
    left, right = comparable(a), comparable(b)
    for table in left:
        for column in left[table]:
            assert left[table][column] == right[table][column], (table, column)
