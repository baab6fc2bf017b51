"""One variant process's outcome, read from its per-rank result files."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from aiprof.trial.stats import floor_step_us

OK, NOT_APPLICABLE, FAILED, TIMEOUT, INTERRUPTED = (
    "ok", "not_applicable", "failed", "timeout", "interrupted")


@dataclass(frozen=True, kw_only=True)
class VariantRun:
    """What one process of one variant measured (the slowest rank's step under torchrun)."""

    label: str
    round: int
    status: str
    step_us: tuple[float, ...] = ()
    """Timed steps; per step the slowest rank's time."""
    host_step_us: tuple[float, ...] = ()
    """Host-clock time of every step from the second (warm-up ones included), rank 0."""
    loss: tuple[float, ...] = ()
    loss_source: str = ""
    peak_memory_bytes: int | None = None
    memory_kind: str = ""
    """"gpu" (torch.cuda.max_memory_allocated, the largest rank) or "host" (peak RSS)."""
    clock: str = ""
    warmup_steps: int = 0
    """Steps run before the timed ones (0: not known, the protocol's count)."""
    phases_s: dict[str, float] = field(default_factory=dict)
    """Where the process's time went (rank 0, host clock): to the first step, warm-up, timed
    steps, after the last step."""
    host_probe_us: tuple[float, ...] = ()
    """A fixed piece of pure-Python work timed before the script and after its last step
    (rank 0): the host's speed as this process saw it."""
    reason: str = ""
    """Why the fix did not apply, or why the process failed."""
    tail: tuple[str, ...] = ()
    """The last lines of the process's output, when it failed."""
    facts: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    wall_s: float = 0.0

    @property
    def median_step_us(self) -> float | None:
        return float(statistics.median(self.step_us)) if self.step_us else None

    def step_time_us(self, statistic: str) -> float | None:
        """The process's step time by ``statistic`` ("median" or "floor")."""
        if not self.step_us:
            return None
        if statistic == "floor":
            return floor_step_us(self.step_us)
        return self.median_step_us


def _peak(doc: dict[str, Any]) -> tuple[int | None, str]:
    if doc.get("peak_gpu_allocated_bytes") is not None:
        return int(doc["peak_gpu_allocated_bytes"]), "gpu"
    if doc.get("peak_host_rss_bytes") is not None:
        return int(doc["peak_host_rss_bytes"]), "host"
    return None, ""


def from_rank_documents(label: str, round_index: int, docs: list[dict[str, Any]], *,
                        tail: tuple[str, ...] = (), wall_s: float = 0.0) -> VariantRun:
    """Merge the ranks' result files of one process (rank 0 first) into one ``VariantRun``."""
    docs = sorted(docs, key=lambda d: int(d.get("rank", 0)))
    first = docs[0]
    common: dict[str, Any] = {"label": label, "round": round_index, "wall_s": wall_s,
              "facts": dict(first.get("facts", {})), "notes": tuple(first.get("notes", ())),
              "clock": str(first.get("clock", "")),
              "warmup_steps": int(first.get("warmup_steps", 0) or 0),
              "phases_s": dict(first.get("phases_s", {})),
              "host_probe_us": tuple(float(t) for t in first.get("host_probe_us", ()))}
    short = [d for d in docs if int(d.get("num_steps", 0)) < int(d.get("needed_steps", 1))]
    if short:
        doc = short[0]
        reason = (f"rank {doc.get('rank', 0)} ended ({doc.get('ended')}"
                  f"{': ' + doc['error'] if doc.get('error') else ''}) after "
                  f"{doc.get('num_steps', 0)} of the {doc.get('needed_steps')} steps needed")
        if not doc.get("error") and int(doc.get("num_steps", 0)) == 0:
            reason += ("; no step boundary seen: does the script call optimizer.step(), or "
                       "give --steps-from NAME")
        return VariantRun(status=FAILED, reason=reason, tail=tail, **common)
    if first.get("not_applicable"):
        return VariantRun(status=NOT_APPLICABLE, reason=str(first["not_applicable"]), **common)
    lengths = [len(d.get("step_us", ())) for d in docs]
    slowest = tuple(max(float(d["step_us"][i]) for d in docs) for i in range(min(lengths)))
    peaks = [_peak(d) for d in docs]
    known = [p for p in peaks if p[0] is not None]
    peak, kind = max(known) if known else (None, "")
    watch = first.get("watch", {})
    return VariantRun(status=OK, step_us=slowest,
                      host_step_us=tuple(float(t) for t in first.get("host_step_us", ())),
                      loss=tuple(float(v) for v in watch.get("values", ())),
                      loss_source=str(watch.get("source", "")),
                      peak_memory_bytes=peak, memory_kind=kind, **common)
