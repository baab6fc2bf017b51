"""Where step boundaries come from, without changing the user's code.

Three sources, all calling ``on_step(source)``:
- ``optimizer``: the global post-hook of every ``torch.optim.Optimizer.step``
  (``torch.optim.optimizer.register_optimizer_step_post_hook``, PyTorch >= 2.0);
- ``user``: ``aiprof.step()`` in the user's code;
- ``named``: the end of each call of a Python function, or of each ``record_function``
  range, called NAME (``--steps-from NAME``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

StepCallback = Callable[[str], None]


class StepPolicy:
    """Decides which step signals count, so each training step is counted once.

    With ``steps_from`` only the named source counts. Otherwise ``aiprof.step()`` wins once
    it has been called, and the optimizer hook counts only the first optimizer that steps
    (a GAN's two optimizers make one step, not two). The first ``aiprof.step()`` after
    optimizer-made steps switches over without a boundary of its own: it closes the iteration
    the optimizer's step already closed.
    """

    def __init__(self, steps_from: str | None) -> None:
        self.steps_from = steps_from
        self._explicit = False
        self._optimizer_id: int | None = None
        self.source = "named" if steps_from else ""
        """The source that produced the counted steps."""

    def accept(self, source: str, optimizer: object | None = None) -> bool:
        """True when this signal is a step boundary."""
        if self.steps_from:
            return source == "named"
        if source == "user":
            # the first aiprof.step() after optimizer-made steps ends the iteration the
            # optimizer already ended (``opt.step(); aiprof.step()``): no empty extra step
            same_iteration = not self._explicit and self.source == "optimizer"
            self._explicit = True
            self.source = "user"
            return not same_iteration
        if source != "optimizer" or self._explicit:
            return False
        if self._optimizer_id is None:
            self._optimizer_id = id(optimizer)
        if id(optimizer) != self._optimizer_id:
            return False
        self.source = "optimizer"
        return True


OPTIMIZER_RANGE_PREFIX = "Optimizer.step#"
"""``record_function`` name torch gives every ``Optimizer.step`` (``profile_hook_step``)."""


def install_optimizer_hook(on_step: Callable[[object], None]) -> Callable[[], None]:
    """Call ``on_step(optimizer)`` after every optimizer step; returns the uninstaller.

    torch runs post-hooks inside the step's ``Optimizer.step#...`` range, so calling the
    profiler there would end a ProfilerStep in the middle of that range (intersecting spans).
    The hook only marks the step; the boundary is made when the range closes (or, if it was
    never seen to close, at the next hook).
    """
    from torch.optim.optimizer import register_optimizer_step_post_hook

    pending: list[object] = []

    def hook(optimizer: object, args: Any, kwargs: Any) -> None:
        if pending:
            on_step(pending.pop())
        pending.append(optimizer)

    def range_closed() -> None:
        if pending:
            on_step(pending.pop())

    handle = register_optimizer_step_post_hook(hook)
    remove_range_hook = install_record_function_hook(
        lambda name: name.startswith(OPTIMIZER_RANGE_PREFIX), range_closed)

    def uninstall() -> None:
        handle.remove()
        remove_range_hook()

    return uninstall


def install_record_function_hook(matches: Callable[[str], bool],
                                 on_step: Callable[[], None]) -> Callable[[], None]:
    """Call ``on_step()`` after a ``record_function`` range whose name ``matches`` closes."""
    from torch.autograd import profiler

    original = profiler.record_function.__exit__

    def exit_and_step(self: Any, *exc: Any) -> Any:
        result = original(self, *exc)
        if matches(str(getattr(self, "name", ""))):
            on_step()
        return result

    profiler.record_function.__exit__ = exit_and_step  # type: ignore[method-assign]

    def uninstall() -> None:
        profiler.record_function.__exit__ = original  # type: ignore[method-assign]

    return uninstall


def _matches(code: Any, name: str) -> bool:
    return bool(code.co_name == name or getattr(code, "co_qualname", "") == name)


def install_function_hook(name: str, on_step: Callable[[], None]) -> Callable[[], None]:
    """Call ``on_step()`` when a Python function called ``name`` returns.

    Uses ``sys.monitoring`` (Python >= 3.12), which stops reporting a function after its
    first non-matching return, so the cost is near zero; falls back to ``sys.setprofile``
    (every call pays a little) on Python 3.11.
    """
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:
        return _install_monitoring(monitoring, name, on_step)
    previous = sys.getprofile()

    def profiler(frame: Any, event: str, arg: Any) -> None:
        if event == "return" and _matches(frame.f_code, name):
            on_step()

    sys.setprofile(profiler)
    return lambda: sys.setprofile(previous)


def _install_monitoring(monitoring: Any, name: str, on_step: Callable[[], None]
                        ) -> Callable[[], None]:
    tool = next((tool for tool in range(6) if monitoring.get_tool(tool) is None), None)
    if tool is None:
        raise RuntimeError("no free sys.monitoring tool id for --steps-from")
    monitoring.use_tool_id(tool, "aiprof")
    monitoring.restart_events()  # undo DISABLEs left by an earlier session's callback

    def on_return(code: Any, offset: int, value: Any) -> Any:
        if _matches(code, name):
            on_step()
            return None
        return monitoring.DISABLE

    monitoring.register_callback(tool, monitoring.events.PY_RETURN, on_return)
    monitoring.set_events(tool, monitoring.events.PY_RETURN)

    def uninstall() -> None:
        monitoring.set_events(tool, 0)
        monitoring.register_callback(tool, monitoring.events.PY_RETURN, None)
        monitoring.free_tool_id(tool)

    return uninstall
