"""Communication volume of Megatron tensor parallelism, per layer and per step.

Shoeybi et al. 2019 (arXiv:1909.08053) §3; Korthikanti et al. 2022 (arXiv:2205.05198) §4.2.2:
per transformer layer and micro-batch, forward all-reduces b·s·h elements twice (after attention's
output projection and after the MLP's second GEMM), backward twice more. With sequence parallelism
each all-reduce becomes a reduce-scatter + all-gather of the same ring bytes. Full recomputation
repeats the forward: 2 more. Ring bytes sent per rank per all-reduce: 2(t−1)/t × size (§B5).
"""

from __future__ import annotations

from dataclasses import dataclass

from aiprof.distributed.collectives import model_collective
from aiprof.distributed.links import LinkParams
from aiprof.errors import InputError


@dataclass(frozen=True, kw_only=True)
class TensorParallelVolume:
    """Bytes each rank sends for tensor parallelism."""

    tensor_parallel: int
    allreduce_bytes: int
    """Size of one all-reduce: b·s·h·bytes_per_elem."""
    num_allreduces_per_layer: int
    bytes_sent_per_rank_per_layer: float
    bytes_sent_per_rank_per_step: float
    comm_time_per_layer_us: float
    """Time of the layer's all-reduces under the link model (0 without a link)."""
    comm_time_per_step_us: float


def tensor_parallel_volume(
    *,
    micro_batch: int,
    seq_len: int,
    hidden_size: int,
    tensor_parallel: int,
    bytes_per_elem: int = 2,
    layers_per_stage: int = 1,
    num_microbatches: int = 1,
    full_recompute: bool = False,
    link: LinkParams | None = None,
) -> TensorParallelVolume:
    """Volume per layer and per step (= layers on this stage × micro-batches)."""
    dims = (
        micro_batch,
        seq_len,
        hidden_size,
        tensor_parallel,
        bytes_per_elem,
        layers_per_stage,
        num_microbatches,
    )
    if min(dims) < 1:
        raise InputError(
            "batch, sequence, hidden size, t, element bytes, layers and micro-batches "
            "must all be >= 1"
        )
    t = tensor_parallel
    size = micro_batch * seq_len * hidden_size * bytes_per_elem
    count = 6 if full_recompute else 4
    per_layer = count * 2 * (t - 1) / t * size
    steps = layers_per_stage * num_microbatches
    time_us = 0.0
    if link is not None and t > 1:
        time_us = count * model_collective("allreduce", size, t, link).time_us
    return TensorParallelVolume(
        tensor_parallel=t,
        allreduce_bytes=size,
        num_allreduces_per_layer=count,
        bytes_sent_per_rank_per_layer=per_layer,
        bytes_sent_per_rank_per_step=per_layer * steps,
        comm_time_per_layer_us=time_us,
        comm_time_per_step_us=time_us * steps,
    )
