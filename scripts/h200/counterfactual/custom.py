"""Custom nets: MLPs, a BatchNorm UNet, a hand-written attention transformer, RL-style policy
loops of many tiny ops, a misaligned convnet, and loops fed from the host."""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from counterfactual import data
from counterfactual.hf import pick
from counterfactual.knobs import Ctx, Knobs, Step, infer_step, train_step
from counterfactual.workload import Workload


def mlp(width: int, depth: int, act: type[nn.Module] = nn.GELU) -> nn.Sequential:
    return nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(width, width), act())])


def mlp_deep_b32_infer(ctx: Ctx) -> Step:
    width, depth, batch = pick(ctx, (256, 48, 32), (32, 6, 4))
    model = ctx.model(mlp(width, depth), train=False)
    x = torch.randn(batch, width, device=ctx.device)
    return infer_step(ctx, model, lambda m: m(x))


def mlp_wide_fp32_train(ctx: Ctx) -> Step:
    width, depth, batch = pick(ctx, (8192, 4, 4096), (64, 2, 8))
    model = ctx.model(nn.Sequential(mlp(width, depth), nn.Linear(width, 10)))
    x = torch.randn(batch, width, device=ctx.device)
    y = torch.randint(0, 10, (batch,), device=ctx.device)
    return train_step(ctx, model, ctx.adamw(model.parameters()),
                      lambda m: F.cross_entropy(m(x), y))


def block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True), nn.Conv2d(cout, cout, 3, padding=1, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class UNet(nn.Module):
    """Three levels down and up, BatchNorm after every convolution, skip connections."""

    def __init__(self, base: int, classes: int = 4) -> None:
        super().__init__()
        widths = [base, 2 * base, 4 * base, 8 * base]
        self.down = nn.ModuleList([block(3, widths[0])] + [
            block(widths[i], widths[i + 1]) for i in range(3)])
        self.up = nn.ModuleList([nn.ConvTranspose2d(widths[i + 1], widths[i], 2, stride=2)
                                 for i in reversed(range(3))])
        self.merge = nn.ModuleList([block(2 * widths[i], widths[i]) for i in reversed(range(3))])
        self.head = nn.Conv2d(widths[0], classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for i, down in enumerate(self.down):
            x = down(x if i == 0 else F.max_pool2d(x, 2))
            skips.append(x)
        for up, merge, skip in zip(self.up, self.merge, reversed(skips[:-1]), strict=True):
            x = merge(torch.cat([up(x), skip], dim=1))
        return self.head(x)


def unet_bn_nchw_empty_cache_train(ctx: Ctx) -> Step:
    base, batch, image = pick(ctx, (32, 16, 256), (4, 2, 32))
    model = ctx.model(UNet(base))
    x = ctx.image(torch.randn(batch, 3, image, image, device=ctx.device))
    y = torch.randint(0, 4, (batch, image, image), device=ctx.device)
    inner = train_step(ctx, model, ctx.adamw(model.parameters()),
                       lambda m: F.cross_entropy(m(x), y))

    def step() -> None:
        inner()
        ctx.empty_cache()
    return step


class Block(nn.Module):
    """A pre-norm decoder block whose attention is hand-written unless ``sdpa``."""

    def __init__(self, d: int, heads: int, sdpa: bool) -> None:
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for z in self.qkv(x).chunk(3, dim=-1))
        if self.sdpa:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
            causal = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            out = scores.masked_fill(causal, float("-inf")).softmax(-1) @ v
        return self.proj(out.transpose(1, 2).reshape(b, t, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attend(self.norm1(x))
        return x + self.ff(self.norm2(x))


def hand_attention_bf16_train(ctx: Ctx) -> Step:
    d, layers, batch, seq = pick(ctx, (512, 4, 16, 1024), (64, 2, 2, 32))
    model = ctx.model(nn.Sequential(*[Block(d, 8, ctx.knobs.sdpa) for _ in range(layers)]))
    x = torch.randn(batch, seq, d, device=ctx.device)
    return train_step(ctx, model, ctx.adamw(model.parameters()),
                      lambda m: m(x).float().square().mean())


class Policy(nn.Module):
    def __init__(self, obs: int, hidden: int, actions: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs, hidden), nn.Tanh(), nn.Linear(hidden, hidden),
                                  nn.Tanh())
        self.pi, self.v = nn.Linear(hidden, actions), nn.Linear(hidden, 1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.body(obs)
        return self.pi(h), self.v(h).squeeze(-1)


def rl_policy(ctx: Ctx, log_rewards: bool) -> Step:
    """A rollout of T environment steps (a policy, Gumbel-max action sampling, a point-mass
    environment in tensor ops), then one actor-critic update: hundreds of tiny kernels."""
    envs, horizon = pick(ctx, (64, 32), (4, 4))
    obs_dim, actions = 16, 4
    model = ctx.model(Policy(obs_dim, 64, actions))
    opt = ctx.adamw(model.parameters(), lr=3e-4)
    moves = torch.randn(actions, obs_dim, device=ctx.device) * 0.1
    state = torch.zeros(envs, obs_dim, device=ctx.device)
    logged: list[float] = []
    kept: list[torch.Tensor] = []

    def step() -> None:
        obs, logps, values, rewards = state.clone(), [], [], []
        kept.clear()
        for _ in range(horizon):
            with ctx.autocast():
                logits, value = model(obs)
            logits = logits.float()
            gumbel = -torch.log(-torch.log(torch.rand_like(logits) + 1e-9) + 1e-9)
            action = (logits + gumbel).argmax(-1)
            logps.append(logits.log_softmax(-1).gather(1, action[:, None]).squeeze(1))
            values.append(value.float())
            obs = (obs + moves[action]).clamp(-3, 3)
            reward = -obs.square().mean(-1)
            rewards.append(reward)
            if log_rewards and not ctx.knobs.sync_free:
                logged.append(reward.mean().item())  # per-env-step logging: a sync each
            elif log_rewards and ctx.knobs.reads_kept:
                kept.append(reward.mean())  # the logged value, kept on the GPU
        returns = torch.stack(rewards).flip(0).cumsum(0).flip(0)
        advantage = returns - torch.stack(values).detach()
        critic = (torch.stack(values) - returns).square().mean()
        loss = -(torch.stack(logps) * advantage).mean() + critic
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        state.copy_(obs.detach())
    return step


def rl_policy_item_sync(ctx: Ctx) -> Step:
    return rl_policy(ctx, log_rewards=True)


def rl_policy_rollout(ctx: Ctx) -> Step:
    return rl_policy(ctx, log_rewards=False)


def conv_misaligned_bf16_infer(ctx: Ctx) -> Step:
    widths, batch, image = pick(ctx, ((63, 127, 255, 255), 32, 112), ((7, 15), 2, 16))
    if ctx.knobs.padded:
        widths = tuple(w + 1 for w in widths)
    layers: list[nn.Module] = []
    cin = 3
    for w in widths:
        layers += [nn.Conv2d(cin, w, 3, padding=1), nn.ReLU(), nn.Conv2d(w, w, 3, padding=1),
                   nn.ReLU()]
        cin = w
    model = ctx.model(nn.Sequential(*layers), train=False)
    x = ctx.image(torch.randn(batch, 3, image, image, device=ctx.device))
    return infer_step(ctx, model, lambda m: m(x))


def blocking_copy_mlp_train(ctx: Ctx) -> Step:
    """Each step refreshes a 256 MB host table on the device (a synchronous pageable copy),
    then trains a small MLP that reads a slice of it."""
    elems, width, batch = pick(ctx, (64 << 20, 1024, 1024), (1 << 16, 32, 8))
    model = ctx.model(nn.Sequential(mlp(width, 3), nn.Linear(width, 1)))
    opt = ctx.adamw(model.parameters())
    feed = data.HostFeed(ctx, torch.randn(elems))

    def step() -> None:
        table = feed.next()
        x = table[: batch * width].view(batch, width)
        with ctx.autocast():
            loss = model(x).float().square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def augment_on_host(i: int, batch: int, samples: int) -> torch.Tensor:
    """Waveform batches augmented sample by sample in numpy: gain, shift, noise, a band filter."""
    rng = np.random.default_rng(i)
    out = np.empty((batch, 1, samples), dtype=np.float32)
    for j in range(batch):
        wave = rng.standard_normal(samples).astype(np.float32)
        wave = np.roll(wave * rng.uniform(0.5, 1.5), int(rng.integers(0, samples // 10)))
        wave = np.convolve(wave, np.ones(9, dtype=np.float32) / 9, mode="same")
        out[j, 0] = wave + 0.01 * rng.standard_normal(samples).astype(np.float32)
    return torch.from_numpy(out)


def seq_host_augment_pageable_train(ctx: Ctx) -> Step:
    batch, samples, width = pick(ctx, (64, 32000, 128), (2, 1600, 8))
    model = ctx.model(nn.Sequential(
        nn.Conv1d(1, width, 80, stride=16), nn.GELU(), nn.Conv1d(width, width, 5, stride=2),
        nn.GELU(), nn.Conv1d(width, width, 5, stride=2), nn.GELU(),
        nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(width, 35)))
    opt = ctx.adamw(model.parameters())
    feed = data.host_batches(ctx, functools.partial(augment_on_host, batch=batch,
                                                    samples=samples))
    y = torch.randint(0, 35, (batch,), device=ctx.device)

    def step() -> None:
        host = next(feed)
        if ctx.knobs.pinned and ctx.cuda and not host.is_pinned():
            host = host.pin_memory()
        x = data.to_device(ctx, host)
        with ctx.autocast():
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


WORKLOADS = [
    Workload("mlp_deep_b32_infer", "custom", "infer",
             "48-layer MLP (width 256, GELU) inference, batch 32, FP32: launch-bound",
             ("cuda_graph",), Knobs(), mlp_deep_b32_infer),
    Workload("mlp_wide_fp32_train", "custom", "train",
             "4-layer MLP (width 8192) training, batch 4096, FP32 with TF32 off, AdamW",
             ("tf32",), Knobs(tf32="off"), mlp_wide_fp32_train),
    Workload("unet_bn_nchw_empty_cache_train", "custom", "train",
             "UNet (3 levels, base width 32, BatchNorm) segmentation training, batch 16 at 256, "
             "bf16 autocast, NCHW, torch.cuda.empty_cache() after every step",
             ("channels_last", "no_empty_cache"), Knobs(bf16=True),
             unet_bn_nchw_empty_cache_train, frozenset({"channels_last", "no_empty_cache"}),
             not_capturable="empty_cache cannot run inside a graph capture",
             capturable_after="no_empty_cache"),
    Workload("hand_attention_bf16_train", "custom", "train",
             "4-block decoder (d 512, 8 heads) training, batch 16x1024, bf16, attention written "
             "as softmax(QK^T)V with a causal mask", ("sdpa",), Knobs(bf16=True, sdpa=False),
             hand_attention_bf16_train, frozenset({"sdpa"})),
    Workload("rl_policy_item_sync", "custom", "train",
             "Actor-critic: a 32-step rollout of 64 environments with a tiny policy, then an "
             "update; reward.mean().item() logged every environment step",
             ("sync_free",), Knobs(), rl_policy_item_sync, frozenset({"sync_free"}),
             not_capturable=".item() synchronizes inside the step",
             capturable_after="sync_free", compile_ok=False),
    Workload("rl_policy_rollout", "custom", "train",
             "Actor-critic: a 32-step rollout of 64 environments with a tiny policy, then an "
             "update, no logging: hundreds of tiny kernels", ("cuda_graph",), Knobs(),
             rl_policy_rollout, compile_ok=False),
    Workload("conv_misaligned_bf16_infer", "custom", "infer",
             "8-conv net with 63/127/255 channels, inference, batch 32 at 112, bf16, "
             "channels_last", ("padded_shapes",), Knobs(bf16=True, channels_last=True),
             conv_misaligned_bf16_infer, frozenset({"channels_last", "padded_shapes"})),
    Workload("blocking_copy_mlp_train", "custom", "train",
             "MLP training whose step first copies a 256 MB table from pageable host memory",
             ("pinned_prefetch",), Knobs(bf16=True), blocking_copy_mlp_train,
             frozenset({"pinned_prefetch"}),
             not_capturable="a pageable host-to-device copy inside the step"),
    Workload("seq_host_augment_pageable_train", "custom", "train",
             "1-D conv audio classifier training, batch 64 of 2 s waveforms augmented in numpy "
             "in the loop and copied from pageable memory",
             ("host_prep_workers", "pinned_prefetch"), Knobs(bf16=True),
             seq_host_augment_pageable_train,
             frozenset({"host_prep_workers", "pinned_prefetch"}),
             not_capturable="host preprocessing inside the step", alternates=True,
             compile_ok=False),
]
