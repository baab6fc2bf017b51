"""Fusion analysis over the op graph of one recorded pass.

Vertical: a GEMM/convolution (the anchor, at most one per group) and the elementwise,
normalization and softmax ops that consume its output, or any connected run of such ops.
Every intermediate tensor whose consumers all sit in the group need not touch global memory:
fusing saves its write and each of its reads (the chapter's Conv+BN+ReLU accounting, "each
element saves 12 bytes in FP32"). Eager PyTorch launches one kernel per such aten op, so a
group of n ops saves n - 1 launches.

Horizontal: independent GEMMs/convolutions reading the same input (Q, K and V projections):
merged, the shared input is read once instead of n times, in one launch instead of n.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from aiprof.tensor.ceilings_model import Ceilings
from aiprof.tensor.costmodel import op_cost
from aiprof.tensor.memory_ops import VIEW_OPS
from aiprof.tensor.opcall import OpCall, TensorMeta

FUSIBLE_FAMILIES = frozenset({"elementwise", "normalization", "softmax"})
ANCHOR_FAMILIES = frozenset({"matmul", "convolution"})
_A_INPUT = {"addmm": 1, "baddbmm": 1}

Value = tuple[int, int]  # (root tensor id, in-place version)


@dataclass(frozen=True)
class FusionGroup:
    """Ops that one fused kernel could run."""

    kind: str
    """``vertical`` or ``horizontal``."""
    op_indices: tuple[int, ...]
    ops: tuple[str, ...]
    anchor: str | None
    """The GEMM/convolution whose epilogue takes the chain, if any."""
    bytes_saved: int
    launches_saved: int
    predicted_saved_us: float | None
    """``bytes_saved / memory bandwidth`` on the target (None without a target)."""


@dataclass(frozen=True)
class FusionReport:
    """Every fusion opportunity in a recorded pass."""

    groups: tuple[FusionGroup, ...]
    total_bytes_saved: int
    total_launches_saved: int
    predicted_saved_us: float | None


class _Graph:
    """Producer/consumer links between op calls through tensor values (views resolved)."""

    def __init__(self, calls: Sequence[OpCall]) -> None:
        self.alias: dict[int, int] = {}
        self.version: dict[int, int] = defaultdict(int)
        self.producer: dict[Value, int] = {}
        self.consumers: dict[Value, list[int]] = defaultdict(list)
        self.inputs: dict[int, list[tuple[Value, TensorMeta]]] = {}
        self.outputs: dict[int, list[tuple[Value, TensorMeta]]] = {}
        for index, call in enumerate(calls):
            self._add(index, call)

    def root(self, tensor_id: int) -> int:
        while tensor_id in self.alias:
            tensor_id = self.alias[tensor_id]
        return tensor_id

    def value(self, tensor: TensorMeta) -> Value:
        root = self.root(tensor.tensor_id if tensor.tensor_id is not None else -1)
        return (root, self.version[root])

    def _add(self, index: int, call: OpCall) -> None:
        tensors = [t for t in call.tensors() if t.tensor_id is not None]
        outputs = [t for t in (call.outputs or ()) if t.tensor_id is not None]
        if call.op in VIEW_OPS and tensors:
            source = self.root(tensors[0].tensor_id)  # type: ignore[arg-type]
            for out in outputs:
                if out.tensor_id is not None and out.tensor_id != tensors[0].tensor_id:
                    self.alias[out.tensor_id] = source
            return
        self.inputs[index] = [(self.value(t), t) for t in tensors]
        for value, _ in self.inputs[index]:
            self.consumers[value].append(index)
        self.outputs[index] = []
        for out in outputs:
            root = self.root(out.tensor_id)  # type: ignore[arg-type]
            if root in {v[0] for v, _ in self.inputs[index]}:
                self.version[root] += 1  # in-place write: a new value
            value = (root, self.version[root])
            self.producer[value] = index
            self.outputs[index].append((value, out))


def analyze_fusion(calls: Sequence[OpCall], ceilings: Ceilings | None = None) -> FusionReport:
    """Vertical chains and horizontal groups in ``calls`` (one forward pass, in order)."""
    graph = _Graph(calls)
    families = [op_cost(call).family for call in calls]
    groups = _vertical(calls, graph, families, ceilings) + _horizontal(
        calls, graph, families, ceilings
    )
    predicted = [g.predicted_saved_us for g in groups if g.predicted_saved_us is not None]
    return FusionReport(
        groups=tuple(groups),
        total_bytes_saved=sum(g.bytes_saved for g in groups),
        total_launches_saved=sum(g.launches_saved for g in groups),
        predicted_saved_us=sum(predicted) if ceilings is not None else None,
    )


def _vertical(calls, graph: _Graph, families: list[str], ceilings) -> list[FusionGroup]:  # type: ignore[no-untyped-def]
    parent = {i: i for i in graph.inputs}
    anchor: dict[int, int | None] = {
        i: (i if families[i] in ANCHOR_FAMILIES else None) for i in parent
    }

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for index, inputs in graph.inputs.items():
        if families[index] not in FUSIBLE_FAMILIES:
            continue
        for value, _ in inputs:
            source = graph.producer.get(value)
            if source is None or families[source] not in FUSIBLE_FAMILIES | ANCHOR_FAMILIES:
                continue
            a, b = find(source), find(index)
            if a != b and not (anchor[a] is not None and anchor[b] is not None):
                parent[b] = a
                anchor[a] = anchor[a] if anchor[a] is not None else anchor[b]
    members: dict[int, list[int]] = defaultdict(list)
    for index in parent:
        members[find(index)].append(index)
    groups = []
    for root, indices in members.items():
        if len(indices) < 2:
            continue
        saved = _intermediate_bytes(graph, set(indices))
        if saved == 0:
            continue
        groups.append(_group("vertical", calls, sorted(indices), anchor[root], saved, ceilings))
    return sorted(groups, key=lambda g: g.op_indices)


def _intermediate_bytes(graph: _Graph, members: set[int]) -> int:
    saved = 0
    for index in members:
        for value, tensor in graph.outputs[index]:
            readers = graph.consumers.get(value, [])
            if readers and all(r in members for r in readers):
                saved += tensor.nbytes * (1 + len(readers))
    return saved


def _horizontal(calls, graph: _Graph, families: list[str], ceilings) -> list[FusionGroup]:  # type: ignore[no-untyped-def]
    by_input: dict[Value, list[int]] = defaultdict(list)
    shared: dict[Value, TensorMeta] = {}
    for index, inputs in graph.inputs.items():
        if families[index] not in ANCHOR_FAMILIES or not inputs:
            continue
        position = _A_INPUT.get(calls[index].op, 0)
        tensor = calls[index].tensor(position)
        if tensor is None or tensor.tensor_id is None:
            continue
        value = _value_at(graph, index, tensor)
        by_input[value].append(index)
        shared[value] = tensor
    groups = []
    for value, indices in by_input.items():
        if len(indices) > 1:
            saved = (len(indices) - 1) * shared[value].nbytes
            groups.append(_group("horizontal", calls, indices, None, saved, ceilings))
    return groups


def _value_at(graph: _Graph, index: int, tensor: TensorMeta) -> Value:
    root = graph.root(tensor.tensor_id)  # type: ignore[arg-type]
    return next(v for v, t in graph.inputs[index] if v[0] == root)


def _group(
    kind: str,
    calls: Sequence[OpCall],
    indices: list[int],
    anchor: int | None,
    saved: int,
    ceilings: Ceilings | None,
) -> FusionGroup:
    return FusionGroup(
        kind=kind,
        op_indices=tuple(indices),
        ops=tuple(calls[i].op for i in indices),
        anchor=calls[anchor].op if anchor is not None else None,
        bytes_saved=saved,
        launches_saved=len(indices) - 1,
        predicted_saved_us=saved / ceilings.memory_bytes_per_s * 1e6 if ceilings else None,
    )
