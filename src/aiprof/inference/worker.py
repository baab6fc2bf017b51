"""A model instance's thread: runs a synchronous ``model_fn`` off the event loop, batch by batch.

A thread of its own per instance, not the loop's default executor, so that an instance whose model
hangs can be abandoned and replaced: Python cannot stop a thread, but it can stop waiting for one.
The threads are daemons, so an abandoned one never keeps the process from exiting, and each catches
every ``BaseException`` its model raises (``GeneratorExit``, ``KeyboardInterrupt``,
``SystemExit`` included) and hands it back as the batch's outcome.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable
from typing import Any

Reply = Callable[[Any, BaseException | None], None]
"""Called in the worker thread with (result, None) or (None, error) when a batch ends."""

_names = itertools.count(1)
MODEL_THREAD_PREFIX = "aiprof-batcher-model-"
"""Every model thread's name starts so (probes sum their CPU time by it)."""


class ModelThread:
    """A daemon thread that runs ``model_fn(payloads)`` for each job it is given."""

    def __init__(self, model_fn: Callable[[list[Any]], Any]) -> None:
        self._model = model_fn
        self._jobs: queue.SimpleQueue[tuple[list[Any], Reply] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._serve, name=f"{MODEL_THREAD_PREFIX}{next(_names)}", daemon=True
        )
        self._thread.start()

    def run(self, payloads: list[Any], reply: Reply) -> None:
        """Start one batch; ``reply`` gets its outcome (from this thread)."""
        self._jobs.put((payloads, reply))

    def stop(self) -> None:
        """Let the thread end once its current batch, if any, returns (abandon or shut down)."""
        self._jobs.put(None)

    def is_alive(self) -> bool:
        """Whether the thread still runs (an abandoned one runs until its model returns)."""
        return self._thread.is_alive()

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            payloads, reply = job
            try:
                result = self._model(payloads)
            except BaseException as error:  # noqa: BLE001 - every outcome goes back to the loop
                reply(None, error)
                if not isinstance(error, Exception):
                    return  # GeneratorExit, KeyboardInterrupt, SystemExit: this thread ends
            else:
                reply(result, None)
