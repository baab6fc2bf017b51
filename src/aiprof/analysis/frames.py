"""Tables of the views as pandas DataFrames (pandas is an optional dependency)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from aiprof.errors import MissingDependencyError


def data_frame(columns: Mapping[str, Sequence[Any] | np.ndarray]) -> Any:
    """A ``pandas.DataFrame`` of equal-length columns, in the given order."""
    try:
        import pandas
    except ImportError as error:
        raise MissingDependencyError(
            "to_pandas() needs pandas: pip install 'aiprof[pandas]' (or pandas)"
        ) from error
    return pandas.DataFrame({name: np.asarray(values) for name, values in columns.items()})
