from collections.abc import Set

import numpy as np

def run(
    columns: tuple[np.ndarray, ...],
    wait_ptr: np.ndarray,
    wait_idx: np.ndarray,
    unblocked: Set[int],
    stream_end: list[float],
    host_wait: list[float],
    busy: list[float],
    scalars: tuple[float, ...],
) -> tuple[float, int, int, float]: ...
