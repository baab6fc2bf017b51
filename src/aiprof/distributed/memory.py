"""Training memory per GPU: model states by ZeRO stage / FSDP, and activations.

Model states: Rajbhandari et al., "ZeRO", SC'20 (arXiv:1910.02054) §3/§5: mixed-precision Adam keeps
2Ψ (16-bit params) + 2Ψ (16-bit grads) + KΨ optimizer states, K = 12 (fp32 master, momentum,
variance). Activations: Korthikanti et al. 2022 (arXiv:2205.05198) Table 2. Both summarized in
../shared/reference/serving-and-distributed.md §B6-B7. GB = 10⁹ bytes, as the ZeRO paper uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiprof.errors import InputError

SCHEMA = "aiprof.memory/1"
GB = 1e9
# FSDP sharding strategies map onto ZeRO stages (PyTorch FSDP docs): FULL_SHARD = stage 3,
# SHARD_GRAD_OP = stage 2, NO_SHARD = plain DDP.
FSDP_STAGE = {"full_shard": 3, "shard_grad_op": 2, "no_shard": 0}
RECOMPUTE = ("none", "selective", "full")


@dataclass(frozen=True, kw_only=True)
class MemoryOptions:
    """What to estimate. Model-shape fields are only needed for activations."""

    num_params: float
    """Ψ, trainable parameters of the whole model."""
    num_gpus: int = 1
    """Data-parallel degree N_d (the ZeRO sharding degree)."""
    zero_stage: int = 0
    """0 = plain DDP, 1 = optimizer states, 2 = + gradients, 3 = + parameters (FSDP FULL_SHARD)."""
    param_bytes: int = 2
    """Bytes per parameter copy used in forward/backward (2 for fp16/bf16)."""
    grad_bytes: int = 2
    """Bytes per gradient element."""
    optimizer_bytes_per_param: int = 12
    """K: fp32 master + Adam m + v = 12 (ZeRO paper); 8 for fp32 Adam without a master copy."""
    tensor_parallel: int = 1
    """t: model states and activations are split t ways first (Megatron)."""
    pipeline_parallel: int = 1
    """p: layers are split p ways; stage 0 of 1F1B holds p micro-batches of activations."""
    num_layers: int = 0
    hidden_size: int = 0
    num_heads: int = 0
    seq_len: int = 0
    micro_batch: int = 1
    sequence_parallel: bool = False
    recompute: str = "none"
    """``none``, ``selective`` (attention core) or ``full`` activation recomputation."""
    flash_attention: bool = False
    """FlashAttention does not store the a·s² attention scores (drops the 5as/h term)."""

    def __post_init__(self) -> None:
        if not self.num_params > 0:
            raise InputError(f"the parameter count must be > 0, got {self.num_params}")
        if min(self.num_gpus, self.tensor_parallel, self.pipeline_parallel) < 1:
            raise InputError("--gpus, --tp and --pp must be >= 1")
        if self.zero_stage not in (0, 1, 2, 3):
            raise InputError(f"ZeRO stage must be 0, 1, 2 or 3, got {self.zero_stage}")
        if self.recompute not in RECOMPUTE:
            raise InputError(
                f"recompute must be one of {', '.join(RECOMPUTE)}, got {self.recompute!r}"
            )
        dims = (self.num_layers, self.hidden_size, self.num_heads, self.seq_len, self.micro_batch)
        if min(dims) < 0:
            raise InputError("model dimensions cannot be negative")


@dataclass(frozen=True, kw_only=True)
class MemoryEstimate:
    """Per-GPU memory (schema ``aiprof.memory/1``)."""

    schema: str
    zero_stage: int
    num_gpus: int
    params_gb_per_gpu: float
    grads_gb_per_gpu: float
    optimizer_gb_per_gpu: float
    model_states_gb_per_gpu: float
    activations_gb_per_gpu: float
    activation_bytes_per_layer: float
    total_gb_per_gpu: float
    bytes_per_param_unsharded: float


def model_state_bytes(options: MemoryOptions) -> tuple[float, float, float]:
    """(params, grads, optimizer) bytes per GPU; ZeRO stage s shards the first s of (os, g, p)."""
    local = options.num_params / (options.tensor_parallel * options.pipeline_parallel)
    shard, stage = options.num_gpus, options.zero_stage
    params = options.param_bytes * local / (shard if stage >= 3 else 1)
    grads = options.grad_bytes * local / (shard if stage >= 2 else 1)
    optimizer = options.optimizer_bytes_per_param * local / (shard if stage >= 1 else 1)
    return params, grads, optimizer


def activation_bytes_per_layer(options: MemoryOptions) -> float:
    """Korthikanti et al. Table 2 (16-bit activations, 1-byte dropout masks)."""
    s, b, h, a, t = (
        options.seq_len,
        options.micro_batch,
        options.hidden_size,
        options.num_heads,
        options.tensor_parallel,
    )
    if h == 0 or s == 0:
        return 0.0
    sbh = s * b * h
    scores = 0.0 if options.flash_attention else 5.0 * a * s / h
    if options.recompute == "full":
        return 2.0 * sbh / (t if options.sequence_parallel else 1)
    if options.recompute == "selective":
        return 34.0 * sbh / t if options.sequence_parallel else sbh * (10 + 24 / t)
    if options.sequence_parallel:
        return sbh / t * (34 + scores)
    return sbh * (10 + 24 / t + scores / t)


def activation_bytes_per_gpu(options: MemoryOptions) -> float:
    """Stage 0 of 1F1B holds p micro-batches of L/p layers = L layers' worth (§B4)."""
    return activation_bytes_per_layer(options) * options.num_layers


def estimate_memory(options: MemoryOptions) -> MemoryEstimate:
    """Model states and activations per GPU, in GB (10⁹ B)."""
    params, grads, optimizer = model_state_bytes(options)
    states = params + grads + optimizer
    activations = activation_bytes_per_gpu(options)
    per_param = options.param_bytes + options.grad_bytes + options.optimizer_bytes_per_param
    return MemoryEstimate(
        schema=SCHEMA,
        zero_stage=options.zero_stage,
        num_gpus=options.num_gpus,
        params_gb_per_gpu=params / GB,
        grads_gb_per_gpu=grads / GB,
        optimizer_gb_per_gpu=optimizer / GB,
        model_states_gb_per_gpu=states / GB,
        activations_gb_per_gpu=activations / GB,
        activation_bytes_per_layer=activation_bytes_per_layer(options),
        total_gb_per_gpu=(states + activations) / GB,
        bytes_per_param_unsharded=float(per_param),
    )
