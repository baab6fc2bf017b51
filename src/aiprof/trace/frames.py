"""A trace table as a pandas DataFrame, with string and JSON ids resolved to their values.

pandas is optional: aiprof itself never needs it, and asking for a DataFrame without it raises
``MissingDependencyError`` with the install command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiprof.errors import InputError, MissingDependencyError

if TYPE_CHECKING:
    from aiprof.trace.model import Trace

STRING_ID_COLUMNS = frozenset({"name_id", "collective_id", "dtype_id", "category_id"})
"""Columns holding ids into ``Trace.strings``; the frame holds the text instead (no ``_id``)."""
JSON_ID_COLUMNS = frozenset(
    {"input_dims_id", "input_types_id", "input_strides_id", "concrete_inputs_id"}
)
"""Columns holding ids into ``Trace.json_texts``; the frame holds the decoded value."""


def table_frame(trace: Trace, table: str) -> Any:
    """``trace``'s table called ``table`` (``kernels``, ``cpu_ops``, ...) as a DataFrame."""
    try:
        import pandas
    except ImportError:
        raise MissingDependencyError(
            "to_pandas needs pandas, which aiprof does not install: pip install pandas"
        ) from None
    tables = dict(trace.tables())
    if table not in tables:
        raise InputError(f"no table named {table!r}; the tables are {', '.join(sorted(tables))}")
    data: dict[str, Any] = {}
    for column, values in tables[table].columns().items():
        if column in STRING_ID_COLUMNS:
            data[column.removesuffix("_id")] = [
                trace.strings[int(i)] if i >= 0 else None for i in values
            ]
        elif column in JSON_ID_COLUMNS:
            data[column.removesuffix("_id")] = [trace.json_value(int(i)) for i in values]
        else:
            data[column] = values
    return pandas.DataFrame(data)
