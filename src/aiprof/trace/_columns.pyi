from typing import Any

import numpy as np

def fill(
    objects: list[Any], descriptors: tuple[Any, ...], codes: bytes, buffers: tuple[np.ndarray, ...]
) -> None: ...
def intern(
    objects: list[Any], descriptor: Any, table: dict[str, int], buffer: np.ndarray
) -> None: ...
def present(objects: list[Any], descriptor: Any, sentinel: object, buffer: np.ndarray) -> None: ...
