"""The run record's metadata as an HTML section: what ran, how it ended, where, with what."""

from __future__ import annotations

import time
from html import escape

from aiprof.record.runrecord import RunMeta


def _gpu(gpu: dict[str, object]) -> str:
    name = str(gpu.get("name", "GPU"))
    cc = gpu.get("compute_capability")
    memory = gpu.get("memory_bytes") or gpu.get("memory_total_bytes")
    parts = [name] + ([f"sm {cc}"] if cc else [])
    if isinstance(memory, (int, float)) and memory > 0:
        parts.append(f"{memory / 2**30:.0f} GiB")
    return ", ".join(parts)


def run_record_html(meta: RunMeta) -> str:
    """A table of the record's command, outcome, host, ranks, versions, GPUs and environment."""
    started = (time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(meta.start_unix_ns / 1e9))
               if meta.start_unix_ns else "unknown")
    rows = [
        ("command", " ".join(meta.command) or "unknown"),
        ("ended", f"{meta.ended} (exit code {meta.exit_code})"
                  + (f": {meta.error}" if meta.error else "")),
        ("started", started),
        ("host", meta.hostname or "unknown"),
        ("ranks", str(meta.world_size)),
        ("versions", ", ".join(f"{k} {v}" for k, v in sorted(meta.versions.items()) if v)
         or "not recorded"),
        ("GPUs", "; ".join(f"[{g.get('index', i)}] {_gpu(g)}" for i, g in enumerate(meta.gpus))
         or "none"),
        ("environment", ", ".join(f"{k}={v}" for k, v in sorted(meta.env.items())) or "nothing "
         "that changes performance was set"),
    ]
    rows += [("note", note) for note in meta.notes]
    cells = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return f"<h2>Run record</h2><table class=\"run\">{cells}</table>"
