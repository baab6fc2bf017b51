"""Decode one large trace in several processes.

The main process inflates and cuts the file; each batch goes to a worker that decodes it
into columns with string ids local to the batch; the main process renumbers those ids
into its own tables. At most ``2 x workers`` batches are in flight, so memory stays
bounded. Used only where it pays: a big file and more than one idle core.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context

import numpy as np

from aiprof.trace.build import TableBuilder
from aiprof.trace.decode import decode_batch

_STRING_COLUMNS = ("name_id", "collective_id", "dtype_id", "category_id")
_JSON_COLUMNS = ("input_dims_id", "input_types_id", "input_strides_id", "concrete_inputs_id")


@dataclass(frozen=True)
class Partial:
    """Columns of one batch with the batch's own string tables."""

    chunks: dict[str, list[dict[str, np.ndarray]]]
    strings: list[str]
    json_texts: list[str]
    num_events: int
    num_skipped: int


def build_partial(payload: bytes | bytearray) -> Partial:
    """Worker: decode one batch into columns."""
    builder = TableBuilder()
    builder.add(decode_batch(payload))
    return Partial(dict(builder.chunks), builder.strings.values, builder.json_texts.values,
                   builder.num_events, builder.num_skipped)  # fmt: skip


def merge(builder: TableBuilder, part: Partial) -> None:
    """Add a worker's batch to ``builder``, renumbering its string ids."""
    names = builder.strings.ids(part.strings)
    texts = builder.json_texts.ids(part.json_texts)
    for table, chunks in part.chunks.items():
        for columns in chunks:
            builder.chunks[table].append(_renumbered(columns, names, texts))
    builder.num_events += part.num_events
    builder.num_skipped += part.num_skipped


def build_in_workers(payloads: Iterator[bytearray], builder: TableBuilder, workers: int) -> None:
    in_flight: deque[Future[Partial]] = deque()
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("fork")) as pool:
        for payload in payloads:
            in_flight.append(pool.submit(build_partial, payload))
            while len(in_flight) >= 2 * workers:
                merge(builder, in_flight.popleft().result())
        while in_flight:
            merge(builder, in_flight.popleft().result())


def _renumbered(
    columns: dict[str, np.ndarray], names: np.ndarray, texts: np.ndarray
) -> dict[str, np.ndarray]:
    out = dict(columns)
    for key in _STRING_COLUMNS + _JSON_COLUMNS:
        mapping = texts if key in _JSON_COLUMNS else names
        if key in out and len(mapping):
            ids = out[key]
            out[key] = np.where(ids >= 0, mapping[np.maximum(ids, 0)], -1)
    return out
