"""Collectives measured through torch.distributed (gloo on CPU, NCCL on GPUs)."""
