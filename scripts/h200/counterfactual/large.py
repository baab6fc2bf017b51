"""Large steps whose GPU paces them: the kernel-level fixes (TF32, bf16 autocast,
channels_last, SDPA, torch.compile, padding) at sizes where the host hides behind the GPU.
Held out of the suite's parts (named on the command line only): issue 15's third failure class
(kernel-level gains underestimated by about half) was found on steps of this kind, and the
suite's 26 are mostly small, host-paced ones, so these test the GPU-side models on steps they
were not read from. None is a workload the issue names. The second group (``LATER``) was
written after the launch queue's model was read off the first one, to check it on steps it was
not read from."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
import transformers as tf

from counterfactual.hf import hf, ids, llama_config, pick
from counterfactual.knobs import Ctx, Knobs, Step, infer_step, train_step
from counterfactual.vision import CONV, tv
from counterfactual.workload import Workload


def vit_wide_fp32_train(ctx: Ctx) -> Step:
    """A wide ViT on 32-pixel patches (49 tokens): large GEMMs, short attention."""
    h, layers, heads, batch, image = pick(ctx, (1024, 8, 16, 192, 224), (64, 2, 4, 2, 64))
    config = tf.ViTConfig(hidden_size=h, num_hidden_layers=layers, num_attention_heads=heads,
                          intermediate_size=4 * h, image_size=image, patch_size=32,
                          num_labels=100)
    model = ctx.model(hf(tf.ViTForImageClassification, config, ctx))
    x = ctx.image(torch.randn(batch, 3, image, image, device=ctx.device))
    y = torch.randint(0, 100, (batch,), device=ctx.device)
    return train_step(ctx, model, ctx.adamw(model.parameters()),
                      lambda m: m(pixel_values=x, labels=y).loss)


def roberta_fp32_train(ctx: Ctx) -> Step:
    """A RoBERTa classifier in FP32 with PyTorch's default flags (matmul TF32 off)."""
    h, layers, batch, seq = pick(ctx, (768, 8, 32, 384), (64, 2, 2, 16))
    config = tf.RobertaConfig(hidden_size=h, num_hidden_layers=layers,
                              num_attention_heads=12 if h % 12 == 0 else 8,
                              intermediate_size=4 * h, vocab_size=50272, num_labels=5)
    model = ctx.model(hf(tf.RobertaForSequenceClassification, config, ctx))
    x, y = ids(ctx, batch, seq, 50265), torch.randint(0, 5, (batch,), device=ctx.device)
    return train_step(ctx, model, ctx.adamw(model.parameters()),
                      lambda m: m(input_ids=x, labels=y).loss)


def gpt2_eager_long_bf16_train(ctx: Ctx) -> Step:
    """A GPT-2 decoder at sequence 1024 with hand-written (eager) attention, bf16, and GPT-2's
    misaligned vocabulary: two causes."""
    layers, h, batch, seq = pick(ctx, (6, 768, 8, 1024), (2, 64, 2, 32))
    vocab = 50304 if ctx.knobs.padded else 50257
    config = tf.GPT2Config(n_layer=layers, n_embd=h, n_head=12 if h % 12 == 0 else 8,
                           vocab_size=vocab, n_positions=seq)
    model = ctx.model(hf(tf.GPT2LMHeadModel, config, ctx))
    x = ids(ctx, batch, seq, 50257)
    return train_step(ctx, model, ctx.adamw(model.parameters()),
                      lambda m: m(input_ids=x, labels=x).loss)


def llama_wide_fp32_train(ctx: Ctx) -> Step:
    """A Llama-style decoder (hidden 1024, GQA) in FP32 with TF32 off."""
    h, layers, batch, seq = pick(ctx, (1024, 8, 8, 512), (64, 2, 2, 16))
    model = ctx.model(hf(tf.LlamaForCausalLM, llama_config(h, layers, 16, 4), ctx))
    x = ids(ctx, batch, seq, 32000)
    return train_step(ctx, model, ctx.adamw(model.parameters()),
                      lambda m: m(input_ids=x, labels=x, use_cache=False).loss)


def classifier(name: str, full: tuple[int, int], smoke: tuple[int, int]) -> Callable[[Ctx], Step]:
    """The builder of a torchvision classifier's training step at ``(batch, image)`` sizes."""
    def build(ctx: Ctx) -> Step:
        batch, image = pick(ctx, full, smoke)
        model = ctx.model(tv(name, num_classes=100))
        x = ctx.image(torch.randn(batch, 3, image, image, device=ctx.device))
        y = torch.randint(0, 100, (batch,), device=ctx.device)
        return train_step(ctx, model, ctx.adamw(model.parameters()),
                          lambda m: F.cross_entropy(m(x), y))
    return build


def deeplabv3_r50_nchw_bf16_train(ctx: Ctx) -> Step:
    batch, size = pick(ctx, (8, 384), (2, 64))
    model = ctx.model(tv("deeplabv3_resnet50", num_classes=21, aux_loss=False,
                         weights_backbone=None))
    x = ctx.image(torch.randn(batch, 3, size, size, device=ctx.device))
    y = torch.randint(0, 21, (batch, size, size), device=ctx.device)
    return train_step(ctx, model, ctx.adamw(model.parameters()),
                      lambda m: F.cross_entropy(m(x)["out"].float(), y))


def t5_small_fp32_train(ctx: Ctx) -> Step:
    """An encoder-decoder (T5, 6+6 layers, d_model 512) on 512 source and 128 target tokens."""
    d, layers, batch, src, tgt = pick(ctx, (512, 6, 32, 512, 128), (64, 2, 2, 16, 8))
    config = tf.T5Config(d_model=d, d_kv=64, d_ff=4 * d, num_layers=layers,
                         num_decoder_layers=layers, num_heads=8, vocab_size=32128,
                         decoder_start_token_id=0, pad_token_id=0)
    model = ctx.model(hf(tf.T5ForConditionalGeneration, config, ctx))
    x, y = ids(ctx, batch, src, 32128), ids(ctx, batch, tgt, 32128)
    return train_step(ctx, model, ctx.adamw(model.parameters()),
                      lambda m: m(input_ids=x, labels=y).loss)


def neox_fp32_train(ctx: Ctx) -> Step:
    """A GPT-NeoX decoder (rotary, parallel attention and MLP) in FP32 with TF32 off."""
    h, layers, batch, seq = pick(ctx, (1024, 6, 4, 1024), (64, 2, 2, 16))
    config = tf.GPTNeoXConfig(hidden_size=h, num_hidden_layers=layers, num_attention_heads=16
                              if h % 16 == 0 else 4, intermediate_size=4 * h, vocab_size=50304,
                              max_position_embeddings=seq, use_cache=False)
    model = ctx.model(hf(tf.GPTNeoXForCausalLM, config, ctx))
    x = ids(ctx, batch, seq, 50304)
    return train_step(ctx, model, ctx.adamw(model.parameters()),
                      lambda m: m(input_ids=x, labels=x, use_cache=False).loss)


def resnet152_nchw_bf16_infer(ctx: Ctx) -> Step:
    batch, image = pick(ctx, (128, 224), (2, 32))
    model = ctx.model(tv("resnet152", num_classes=1000), train=False)
    x = ctx.image(torch.randn(batch, 3, image, image, device=ctx.device))
    return infer_step(ctx, model, lambda m: m(x))


WORKLOADS = [
    Workload("vit_wide_fp32_train", "transformers", "train",
             "ViT (8 layers, hidden 1024) on 32-pixel patches, batch 192 at 224, FP32 with "
             "TF32 off", ("tf32",), Knobs(tf32="off"), vit_wide_fp32_train,
             frozenset({"sdpa"})),
    Workload("roberta_fp32_train", "transformers", "train",
             "RoBERTa (8 layers, hidden 768) classification training, batch 32x384, FP32 with "
             "PyTorch's default flags (matmul TF32 off)", ("bf16_autocast",), Knobs(),
             roberta_fp32_train, frozenset({"sdpa"})),
    Workload("gpt2_eager_long_bf16_train", "transformers", "train",
             "GPT-2 (6 layers, hidden 768) LM training, batch 8x1024, bf16, hand-written "
             "(eager) attention, vocabulary 50257", ("sdpa", "padded_shapes"),
             Knobs(bf16=True, sdpa=False), gpt2_eager_long_bf16_train,
             frozenset({"sdpa", "padded_shapes"})),
    Workload("llama_wide_fp32_train", "transformers", "train",
             "Llama-style decoder (8 layers, hidden 1024, 4 KV heads) LM training, batch 8x512, "
             "FP32 with TF32 off", ("tf32",), Knobs(tf32="off"), llama_wide_fp32_train,
             frozenset({"sdpa"})),
    Workload("wide_resnet50_nchw_bf16_train", "torchvision", "train",
             "Wide ResNet-50-2 classification training, batch 64 at 224, bf16 autocast, NCHW, "
             "AdamW", ("channels_last",), Knobs(bf16=True),
             classifier("wide_resnet50_2", (64, 224), (2, 32)),
             CONV),
    Workload("convnext_tiny_fp32_train", "torchvision", "train",
             "ConvNeXt-T classification training, batch 64 at 224, FP32 with PyTorch's default "
             "flags (cuDNN TF32 on, matmul TF32 off), NCHW", ("tf32",), Knobs(),
             classifier("convnext_tiny", (64, 224), (2, 32)), CONV),
    Workload("deeplabv3_r50_nchw_bf16_train", "torchvision", "train",
             "DeepLabV3-ResNet50 segmentation training, batch 8 at 384, bf16 autocast, NCHW",
             ("channels_last",), Knobs(bf16=True), deeplabv3_r50_nchw_bf16_train, CONV),
]
LATER = [
    Workload("t5_small_fp32_train", "transformers", "train",
             "T5 encoder-decoder (6+6 layers, d_model 512) training, batch 32, 512 source and "
             "128 target tokens, FP32 with PyTorch's default flags", ("bf16_autocast",), Knobs(),
             t5_small_fp32_train, frozenset({"sdpa"})),
    Workload("neox_fp32_train", "transformers", "train",
             "GPT-NeoX decoder (6 layers, hidden 1024) LM training, batch 4x1024, FP32 with TF32 "
             "off", ("tf32",), Knobs(tf32="off"), neox_fp32_train, frozenset({"sdpa"})),
    Workload("swin_t_fp32_train", "torchvision", "train",
             "Swin-T classification training, batch 64 at 224, FP32 with PyTorch's default "
             "flags", ("tf32",), Knobs(), classifier("swin_t", (64, 224), (2, 64)), CONV),
    Workload("vgg16_bn_fp32_train", "torchvision", "train",
             "VGG-16-BN classification training, batch 64 at 224, FP32 with TF32 off, NCHW",
             ("tf32", "channels_last"), Knobs(tf32="off"),
             classifier("vgg16_bn", (64, 224), (2, 32)), CONV),
    Workload("efficientnet_v2_s_nchw_bf16_train", "torchvision", "train",
             "EfficientNetV2-S classification training, batch 64 at 224, bf16 autocast, NCHW",
             ("channels_last",), Knobs(bf16=True),
             classifier("efficientnet_v2_s", (64, 224), (2, 32)), CONV),
    Workload("resnet152_nchw_bf16_infer", "torchvision", "infer",
             "ResNet-152 inference, batch 128 at 224, bf16 autocast, NCHW", ("channels_last",),
             Knobs(bf16=True), resnet152_nchw_bf16_infer, CONV),
]
