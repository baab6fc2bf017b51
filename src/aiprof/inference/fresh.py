"""A batcher's fresh dispatch: requests that meet an empty queue and a free instance run at
once, in the batches the queue would take from them, without being queued."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from aiprof.inference.instances import Instances
from aiprof.inference.queue import Request
from aiprof.inference.replies import Replies


def dispatch_fresh(instances: Instances, sizes: tuple[int, ...], level: int,
                   seq: itertools.count[int], payloads: Sequence[Any], replies: Replies,
                   now_us: float) -> int:
    """Run on the free instances, without queueing them, the batches ``take_batch`` would
    take at once from these requests of the default level in an empty queue; how many
    were taken (the rest are queued as usual). The same batches, in the same order, as
    pushing them and dispatching (:func:`~aiprof.inference.queue.fresh_batch_sizes`):
    what a lightly loaded server does with nearly every read, for none of the queue's
    heaps and lazy deletions per request.

    ``sizes``: :func:`~aiprof.inference.queue.fresh_batch_sizes` of the policy; ``level``
    its default priority; ``seq`` the batcher's request numbering."""
    # take in the batches that ended first, as _dispatch_now does: the model thread that
    # ended last is then the one given the batch (still awake, or the last to sleep)
    if not instances.collect(notify=False) and not instances.free_since and (
            not instances.collect_or_ask()):
        return 0
    sink = replies if getattr(replies, "thread_safe", False) else None
    count = len(payloads)
    if count == 1 and sizes[1]:  # a lone request: its own batch
        payload = payloads[0]
        instances.dispatch_group(
            [Request(next(seq), level, now_us, payload=payload, handle=replies)],
            [payload], sink, now_us)
        return 1
    taken, largest = 0, len(sizes) - 1
    while taken < count and instances.free_since:
        size = sizes[min(count - taken, largest)]
        if not size:
            break
        chunk = list(payloads[taken:taken + size])
        instances.dispatch_group(
            [Request(next(seq), level, now_us, payload=p, handle=replies) for p in chunk],
            chunk, sink, now_us)
        taken += size
    return taken
