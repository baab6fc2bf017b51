"""Render a Python ``CallTree`` as an indented tree (pyinstrument's layout, plus GPU time)."""

from __future__ import annotations

from rich.console import Console

from aiprof.analysis.python_tree import CallTree
from aiprof.report.terminal import duration, shorten, text


def render_call_tree(console: Console, tree: CallTree, min_pct: float) -> None:
    if not tree.nodes:
        console.print(f"rank {tree.rank}: no Python frames (record with with_stack=True, "
                      "or aiprof run --with-stack)")
        return
    total = tree.total_cpu_us
    console.print(f"rank {tree.rank} ({text(tree.path)}): Python call tree, "
                  f"{duration(total)} of CPU in frames; total CPU \\[self] | GPU launched; "
                  f"nodes under {min_pct:g}% hidden")
    shown = [True] * len(tree.nodes)
    for i, node in enumerate(tree.nodes):
        visible = total > 0 and 100.0 * node.total_cpu_us / total >= min_pct
        shown[i] = visible and (node.parent < 0 or shown[node.parent])
        if not shown[i]:
            continue
        gpu = f" | GPU {duration(node.total_gpu_us)}" if node.total_gpu_us > 0 else ""
        calls = f" ×{node.count}" if node.count > 1 else ""
        console.print(f"{'  ' * node.depth}{duration(node.total_cpu_us)} "
                      f"[dim]\\[{duration(node.self_cpu_us)}][/dim]{gpu}  "
                      f"{text(shorten(node.name, 90))}{calls}")
