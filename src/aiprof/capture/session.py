"""One capture: torch.profiler, step detection, NVML sampling and output, into one run record.

Used by ``aiprof run`` (the script runs in-process under it) and by ``aiprof.profile``.
torch is imported only when a session starts.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from aiprof import optional
from aiprof.capture import environment, nvml
from aiprof.capture.options import CaptureOptions
from aiprof.capture.sampler import Clock, NvmlSampler, SamplerOptions, SystemClock
from aiprof.capture.step_timer import StepTimer
from aiprof.capture.steps import (
    StepPolicy,
    install_function_hook,
    install_optimizer_hook,
    install_record_function_hook,
)
from aiprof.capture.tee import OutputTee
from aiprof.record.runrecord import (
    SAMPLES_FILE,
    RunMeta,
    stdout_file_name,
    trace_file_name,
    write_meta,
)
from aiprof.trace import capture_timing


def import_torch() -> Any:
    """torch, or the one-line error every capture path gives without it."""
    return optional.import_torch("capture")


UNFINISHED_NOTE = (
    "the run had not ended when this was written: if it still says so, aiprof was killed "
    "(SIGKILL, a crash) before it could record how the run ended"
)
OTHER_PROFILER_NOTE = (
    "the script started its own torch.profiler, which ended aiprof's profiling session "
    "(one session at a time): this trace is incomplete; remove the script's profiler or run "
    "it without 'aiprof run'"
)


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """How the profiled code ended."""

    ended: str = "completed"
    """completed, exit, exception, interrupted or terminated."""
    exit_code: int = 0
    error: str = ""


@dataclass(kw_only=True)
class RankInfo:
    """Where this process sits in a torchrun job (from RANK, WORLD_SIZE, LOCAL_RANK)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @staticmethod
    def from_env(environ: Mapping[str, str]) -> RankInfo:
        return RankInfo(
            rank=int(environ.get("RANK", "0")),
            world_size=int(environ.get("WORLD_SIZE", "1")),
            local_rank=int(environ.get("LOCAL_RANK", "0")),
        )


@dataclass
class _State:
    num_steps: int = 0
    recording: bool = False
    prepared: bool = False
    step_range: Any = None
    trace_written: bool = False
    unprofiled_step_us: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    uninstallers: list[Callable[[], None]] = field(default_factory=list)


class CaptureSession:
    """Profiles the current process into ``run_dir`` between ``start()`` and ``stop()``."""

    def __init__(
        self,
        run_dir: Path,
        options: CaptureOptions,
        *,
        name: str,
        command: Sequence[str] = (),
        environ: Mapping[str, str] | None = None,
        clock: Clock | None = None,
        nvml_module: Any | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.options = options
        self.name = name
        self.command = tuple(command)
        self.environ = dict(os.environ if environ is None else environ)
        self.ranks = RankInfo.from_env(self.environ)
        self.clock = clock or SystemClock()
        self._nvml_module = nvml_module
        self._policy = StepPolicy(options.steps_from)
        self._state = _State()
        self._profiler: Any = None
        self._timer: StepTimer | None = None
        self._sampler: NvmlSampler | None = None
        self._nvml: nvml.NvmlHandle | None = None
        self._nvml_versions: dict[str, str] = {}
        self._nvml_specs: tuple[dict[str, Any], ...] = ()
        self._tee: OutputTee | None = None
        self._start_ns = 0

    @property
    def trace_path(self) -> Path:
        return self.run_dir / trace_file_name(self.ranks.rank)

    # -- start ---------------------------------------------------------------------------
    def start(self) -> None:
        """Start sampling, output capture, step hooks and (unless delayed) the profiler."""
        torch = import_torch()
        self._start_ns = self.clock.time_ns()
        try:
            self._tee = OutputTee(self.run_dir / stdout_file_name(self.ranks.rank))
            self._start_sampler()
            self._write_provisional_meta()
            self._profiler = self._make_profiler(torch)
            if not self.options.duration_mode:
                self._timer = StepTimer(torch)
            self._watch_other_profilers(torch)
            self._install_step_hooks()
            if not self.options.duration_mode or self.options.delay_s == 0:
                self.begin_recording()
            else:  # initialize Kineto (slow: CUPTI) now, outside the recorded window
                self._profiler.prepare_trace()
                self._state.prepared = True
        except BaseException:
            self._teardown()
            raise

    def _write_provisional_meta(self) -> None:
        """Rank 0's ``meta.json`` at the start, ended "unknown": what a hard kill leaves.
        ``stop`` replaces it with how the run ended."""
        if self.ranks.rank != 0:
            return
        meta = replace(
            self._meta(Outcome(ended="unknown", exit_code=-1)),
            exit_code=None,
            end_unix_ns=0,
            notes=(UNFINISHED_NOTE,),
        )
        try:
            write_meta(self.run_dir, meta)
        except OSError:
            pass  # stop() says so if it cannot write either

    def _start_sampler(self) -> None:
        if self.ranks.local_rank != 0 and self.ranks.rank != 0:
            return
        status = nvml.open_nvml(self._nvml_module)
        self._state.notes.append(status.note)
        self._nvml = status.handle
        if status.handle is None:
            return
        self._nvml_versions = nvml.driver_versions(status.handle)
        self._nvml_specs = nvml.device_specs(status.handle)
        if self.ranks.local_rank != 0 or not self.options.sample_gpus:
            return
        name = SAMPLES_FILE if self.ranks.rank == 0 else f"gpu_samples.rank{self.ranks.rank}.csv"
        options = SamplerOptions(rate_hz=self.options.sample_rate_hz)
        self._sampler = NvmlSampler(status.handle, self.run_dir / name, options, self.clock)
        self._sampler.start()

    def _make_profiler(self, torch: Any) -> Any:
        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        schedule = None
        if not self.options.duration_mode:
            schedule = torch.profiler.schedule(
                skip_first=self.options.skip_steps,
                wait=0,
                warmup=self.options.warmup_steps,
                active=self.options.active_steps,
                repeat=1,
            )
        return torch.profiler.profile(
            activities=activities,
            schedule=schedule,
            on_trace_ready=self._export,
            record_shapes=self.options.record_shapes,
            profile_memory=self.options.profile_memory,
            with_stack=self.options.with_stack,
        )

    def _export(self, profiler: Any) -> None:
        """Write this rank's trace. Runs inside the user's step: a failure becomes a note."""
        try:
            profiler.export_chrome_trace(str(self.trace_path))
        except Exception as error:  # disk full, directory removed: the script goes on
            self._state.notes.append(f"trace export failed: {error}")
            return
        self._state.trace_written = True

    def _watch_other_profilers(self, torch: Any) -> None:
        """Note when the script starts its own torch.profiler: Kineto runs one session at a
        time, so starting another one ends ours and both traces come out incomplete."""
        profile_class = torch.profiler.profile
        original = profile_class.start

        def start(profiler: Any) -> None:
            if profiler is not self._profiler and OTHER_PROFILER_NOTE not in self._state.notes:
                self._state.notes.append(OTHER_PROFILER_NOTE)
            original(profiler)

        profile_class.start = start

        def uninstall() -> None:
            profile_class.start = original

        self._state.uninstallers.append(uninstall)

    def _install_step_hooks(self) -> None:
        uninstallers = self._state.uninstallers
        if self.options.steps_from:
            named = self.options.steps_from
            uninstallers.append(
                install_record_function_hook(lambda name: name == named, lambda: self.step("named"))
            )
            uninstallers.append(install_function_hook(named, lambda: self.step("named")))
        else:
            uninstallers.append(install_optimizer_hook(lambda opt: self.step("optimizer", opt)))

    # -- during the run --------------------------------------------------------------------
    @property
    def recording(self) -> bool:
        """True while the profiler is started."""
        return self._state.recording

    @property
    def num_steps(self) -> int:
        """Step boundaries counted so far."""
        return self._state.num_steps

    def begin_recording(self) -> None:
        """Start recording (at start, or when ``--delay`` has passed in duration mode)."""
        if self._profiler is None or self._state.recording:
            return
        if self.options.duration_mode:
            if not self._state.prepared:
                self._profiler.prepare_trace()
            self._profiler.start_trace()
        else:
            self._profiler.start()
        self._state.recording = True

    def end_recording(self) -> None:
        """Stop recording; this rank's trace is written if anything was recorded."""
        if not self._state.recording:
            return
        self._state.recording = False
        if not self.options.duration_mode:
            self._profiler.stop()
            return
        self._close_step_range()
        self._profiler.stop_trace()
        self._export(self._profiler)

    def _close_step_range(self) -> None:
        if self._state.step_range is not None:
            self._state.step_range.__exit__(None, None, None)
            self._state.step_range = None

    def _open_step_range(self) -> None:
        """Duration mode marks steps itself, with the profiler's ``ProfilerStep#N`` name."""
        from torch.profiler import record_function

        self._close_step_range()
        self._state.step_range = record_function(f"ProfilerStep#{self._state.num_steps}")
        self._state.step_range.__enter__()

    def step(self, source: str = "user", optimizer: object | None = None) -> None:
        """One step boundary from ``source`` (optimizer, user or named)."""
        if not self._policy.accept(source, optimizer):
            return
        self._state.num_steps += 1
        if not self._state.recording:
            return
        if self.options.duration_mode:
            self._open_step_range()
            return
        unprofiled = self._state.num_steps <= self.options.skip_steps
        if unprofiled and self._timer is not None:
            self._timer.mark()
        self._profiler.step()
        if unprofiled and self._state.num_steps == self.options.skip_steps:
            self._write_step_timing()

    def _write_step_timing(self) -> None:
        """Put the unprofiled step times into the trace (the profiler has just started, so
        Kineto takes metadata) and keep them for ``meta.json``."""
        if self._timer is None:
            return
        times = self._timer.step_times_us()
        self._state.unprofiled_step_us = times
        if times:
            document = capture_timing.timing_document(self._timer.clock, times)
            self._profiler.add_metadata_json(capture_timing.KEY, json.dumps(document))

    # -- stop ------------------------------------------------------------------------------
    def stop(self, outcome: Outcome) -> RunMeta:
        """Finish: write the trace, samples and (rank 0) ``meta.json``; never raises for I/O."""
        self._teardown()
        meta = self._meta(outcome)
        if self.ranks.rank == 0:
            try:
                write_meta(self.run_dir, meta)
            except OSError as error:  # disk full, directory removed: say so, keep the exit code
                print(f"aiprof: could not write {self.run_dir}/meta.json: {error}", file=sys.stderr)
        return meta

    def _teardown(self) -> None:
        for uninstall in reversed(self._state.uninstallers):
            uninstall()
        self._state.uninstallers.clear()
        try:
            self.end_recording()
        except Exception as error:  # a failed export must still leave meta.json
            self._state.notes.append(f"trace export failed: {error}")
        if self._sampler is not None:
            self._sampler.stop()
            self._state.notes.extend(self._sampler.errors)
        nvml.close_nvml(self._nvml)
        self._nvml = None
        if self._tee is not None:
            self._tee.close()
            self._tee = None

    def _meta(self, outcome: Outcome) -> RunMeta:
        versions = {**environment.torch_versions(), **self._nvml_versions}
        notes = list(self._state.notes)
        export_failed = any(note.startswith("trace export failed") for note in notes)
        if not self._state.trace_written and not export_failed:
            notes.append(self._no_trace_note())
        gpus = environment.merge_gpu_specs(environment.torch_gpu_specs(), self._nvml_specs)
        return RunMeta(
            name=self.name,
            command=self.command,
            start_unix_ns=self._start_ns,
            end_unix_ns=self.clock.time_ns(),
            ended=outcome.ended,
            exit_code=outcome.exit_code,
            error=outcome.error,
            hostname=environment.hostname(),
            world_size=self.ranks.world_size,
            versions=versions,
            gpus=gpus,
            env=environment.relevant_environment(self.environ),
            capture=self._capture_settings(),
            samples={
                "source": "nvml" if self._sampler else "none",
                "rate_hz": self.options.sample_rate_hz if self._sampler else 0.0,
                "num_samples": self._sampler.num_samples if self._sampler else 0,
            },
            notes=tuple(notes),
        )

    def _capture_settings(self) -> dict[str, Any]:
        settings = self.options.as_dict()
        settings.update(
            num_steps_seen=self._state.num_steps,
            step_source=self._policy.source,
            trace_written=self._state.trace_written,
            unprofiled_step_us=[round(t, 3) for t in self._state.unprofiled_step_us],
            step_timing_clock=self._timer.clock if self._timer else None,
        )
        return settings

    def _no_trace_note(self) -> str:
        if self.options.duration_mode:
            return "no trace: the script ended before --delay had passed"
        needed = self.options.skip_steps + self.options.warmup_steps
        return (
            f"no trace: {self._state.num_steps} step(s) seen, the active window starts after "
            f"{needed}; lower --skip/--warmup, or use --duration for scripts without steps"
        )
