"""torchvision models (random weights): classification and segmentation, training and
inference."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from counterfactual import data
from counterfactual.hf import pick
from counterfactual.knobs import Ctx, Knobs, Step, infer_step, train_step
from counterfactual.workload import Workload


def tv(name: str, **kwargs: Any) -> nn.Module:
    import torchvision.models as models
    import torchvision.models.segmentation as segmentation

    factory = getattr(models, name, None) or getattr(segmentation, name)
    return factory(weights=None, **kwargs)


def classify_train(ctx: Ctx, name: str, batch: int, image: int,
                   sgd: bool = False) -> Step:
    model = ctx.model(tv(name, num_classes=100))
    x = ctx.image(torch.randn(batch, 3, image, image, device=ctx.device))
    y = torch.randint(0, 100, (batch,), device=ctx.device)
    opt = (torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9) if sgd
           else ctx.adamw(model.parameters()))
    return train_step(ctx, model, opt, lambda m: F.cross_entropy(m(x), y))


def resnet34_nchw_bf16_train(ctx: Ctx) -> Step:
    return classify_train(ctx, "resnet34", *pick(ctx, (64, 224), (2, 32)), sgd=True)


def resnet18_b4_train(ctx: Ctx) -> Step:
    return classify_train(ctx, "resnet18", *pick(ctx, (4, 112), (2, 32)), sgd=True)


def resnet18_loader_fp32_train(ctx: Ctx) -> Step:
    batch, image, passes = pick(ctx, (128, 160, 2), (2, 32, 1))
    model = ctx.model(tv("resnet18", num_classes=10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    stream = data.batches(ctx, data.AugmentedImages(image, passes), batch)

    def step() -> None:
        x, y = next(stream)
        x, y = ctx.image(data.to_device(ctx, x)), data.to_device(ctx, y)
        with ctx.autocast():
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def mobilenet_v3_small_b8_infer(ctx: Ctx) -> Step:
    batch, image = pick(ctx, (8, 224), (2, 32))
    model = ctx.model(tv("mobilenet_v3_small", num_classes=1000), train=False)
    x = ctx.image(torch.randn(batch, 3, image, image, device=ctx.device))
    return infer_step(ctx, model, lambda m: m(x))


def fed_step(ctx: Ctx, model: nn.Module, host: torch.Tensor,
             loss_of: Callable[[torch.Tensor], torch.Tensor] | None,
             opt: torch.optim.Optimizer | None) -> Step:
    """A step whose input batch is copied from host memory every time (HostFeed)."""
    feed = data.HostFeed(ctx, host)

    def step() -> None:
        x = ctx.image(feed.next())
        if opt is None:
            with torch.no_grad(), ctx.autocast():
                model(x)
        else:
            assert loss_of is not None
            with ctx.autocast():
                loss = loss_of(model(x))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        feed.join()
    return step


def efficientnet_b0_pageable_nchw_train(ctx: Ctx) -> Step:
    batch, image = pick(ctx, (64, 224), (2, 32))
    model = ctx.model(tv("efficientnet_b0", num_classes=100))
    y = torch.randint(0, 100, (batch,), device=ctx.device)
    return fed_step(ctx, model, torch.randn(batch, 3, image, image),
                    lambda out: F.cross_entropy(out, y), ctx.adamw(model.parameters()))


def resnet50_pageable_bf16_infer(ctx: Ctx) -> Step:
    batch, image = pick(ctx, (128, 224), (2, 32))
    model = ctx.model(tv("resnet50", num_classes=1000), train=False)
    return fed_step(ctx, model, torch.randn(batch, 3, image, image), None, None)


def fcn_resnet50_fp32_infer(ctx: Ctx) -> Step:
    batch, image = pick(ctx, (8, 256), (1, 32))
    model = ctx.model(tv("fcn_resnet50", num_classes=21, weights_backbone=None), train=False)
    x = ctx.image(torch.randn(batch, 3, image, image, device=ctx.device))
    return infer_step(ctx, model, lambda m: m(x)["out"])


def deeplabv3_mnv3_mask_train(ctx: Ctx) -> Step:
    batch, image = pick(ctx, (16, 256), (2, 64))
    model = ctx.model(tv("deeplabv3_mobilenet_v3_large", num_classes=21,
                         weights_backbone=None))
    opt = ctx.adamw(model.parameters())
    x = ctx.image(torch.randn(batch, 3, image, image, device=ctx.device))
    target = torch.randint(0, 21, (batch, image, image), device=ctx.device)
    target[:, : image // 8] = 255  # an ignored border, as segmentation labels have
    losses: list[float] = []

    def step() -> None:
        with ctx.autocast():
            logits = model(x)["out"]
            if ctx.knobs.sync_free:
                loss = F.cross_entropy(logits, target, ignore_index=255)
            else:  # valid pixels picked with a boolean mask: nonzero synchronizes
                valid = target != 255
                loss = F.cross_entropy(logits.permute(0, 2, 3, 1)[valid], target[valid])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if not ctx.knobs.sync_free:
            losses.append(loss.item())  # logged every step
    return step


CONV = frozenset({"channels_last"})
WORKLOADS = [
    Workload("resnet34_nchw_bf16_train", "torchvision", "train",
             "ResNet-34 classification training, batch 64 at 224, bf16 autocast, NCHW, SGD",
             ("channels_last",), Knobs(bf16=True), resnet34_nchw_bf16_train, CONV),
    Workload("resnet18_loader_fp32_train", "torchvision", "train",
             "ResNet-18 training, batch 128 at 160, FP32 with TF32 off, images from a DataLoader "
             "with num_workers=0 and CPU transforms", ("loader_workers", "tf32"),
             Knobs(tf32="off"), resnet18_loader_fp32_train, CONV | {"loader_workers"},
             not_capturable="the DataLoader runs on the host inside the step", alternates=True,
             compile_ok=False),
    Workload("mobilenet_v3_small_b8_infer", "torchvision", "infer",
             "MobileNetV3-Small inference, batch 8 at 224, FP32: launch-bound",
             ("cuda_graph",), Knobs(), mobilenet_v3_small_b8_infer, CONV),
    Workload("efficientnet_b0_pageable_nchw_train", "torchvision", "train",
             "EfficientNet-B0 training, batch 64 at 224, bf16 autocast, NCHW, the batch copied "
             "from pageable host memory every step", ("channels_last", "pinned_prefetch"),
             Knobs(bf16=True), efficientnet_b0_pageable_nchw_train,
             CONV | {"pinned_prefetch"},
             not_capturable="a pageable host-to-device copy inside the step",
             capturable_after="pinned_prefetch"),
    Workload("resnet50_pageable_bf16_infer", "torchvision", "infer",
             "ResNet-50 inference, batch 128 at 224, bf16, channels_last, the 77 MB batch copied "
             "from pageable host memory every step", ("pinned_prefetch",),
             Knobs(bf16=True, channels_last=True), resnet50_pageable_bf16_infer,
             CONV | {"pinned_prefetch"},
             not_capturable="a pageable host-to-device copy inside the step",
             capturable_after="pinned_prefetch"),
    Workload("fcn_resnet50_fp32_infer", "torchvision", "infer",
             "FCN-ResNet50 segmentation inference, batch 8 at 256, FP32 with TF32 off",
             ("tf32",), Knobs(tf32="off"), fcn_resnet50_fp32_infer, CONV),
    Workload("deeplabv3_mnv3_mask_train", "torchvision", "train",
             "DeepLabV3-MobileNetV3 segmentation training, batch 16 at 256, bf16, loss over "
             "pixels picked by a boolean mask and loss.item() logged every step",
             ("sync_free",), Knobs(bf16=True), deeplabv3_mnv3_mask_train,
             CONV | {"sync_free"},
             not_capturable="boolean-mask indexing and .item() synchronize inside the step",
             capturable_after="sync_free"),
    Workload("resnet18_b4_train", "torchvision", "train",
             "ResNet-18 training, batch 4 at 112, FP32, SGD: launch-bound",
             ("cuda_graph",), Knobs(), resnet18_b4_train, CONV),
]
