"""transformers models built from configs with random weights (no download): encoders,
decoders and a vision transformer, in training and inference."""

from __future__ import annotations

from typing import Any

import torch
import transformers as tf

from counterfactual import data
from counterfactual.knobs import Ctx, Knobs, Step, infer_step, train_step
from counterfactual.workload import Workload


def pick(ctx: Ctx, full: Any, smoke: Any) -> Any:
    return smoke if ctx.smoke else full


def attention(ctx: Ctx) -> str:
    return "sdpa" if ctx.knobs.sdpa else "eager"


def hf(cls: Any, config: Any, ctx: Ctx) -> Any:
    """A model from its config, random weights, attention as the knobs ask."""
    return cls._from_config(config, attn_implementation=attention(ctx))


def ids(ctx: Ctx, batch: int, seq: int, vocab: int) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, seq), device=ctx.device)


def bert_small_fp32_train(ctx: Ctx) -> Step:
    h, layers, batch, seq = pick(ctx, (512, 4, 32, 128), (64, 2, 2, 16))
    config = tf.BertConfig(hidden_size=h, num_hidden_layers=layers, num_attention_heads=8,
                           intermediate_size=4 * h, num_labels=4)
    model = ctx.model(hf(tf.BertForSequenceClassification, config, ctx))
    x, y = ids(ctx, batch, seq, config.vocab_size), torch.randint(0, 4, (batch,), device=ctx.device)
    return train_step(ctx, model, ctx.adamw(model.parameters()),
                      lambda m: m(input_ids=x, labels=y).loss)


def roberta_eager_bf16_infer(ctx: Ctx) -> Step:
    h, layers, batch, seq = pick(ctx, (768, 6, 32, 384), (64, 2, 2, 16))
    vocab = 50272 if ctx.knobs.padded else 50265  # RoBERTa's vocabulary, padded to 32
    config = tf.RobertaConfig(hidden_size=h, num_hidden_layers=layers, num_attention_heads=12
                              if h % 12 == 0 else 8, intermediate_size=4 * h, vocab_size=vocab)
    model = ctx.model(hf(tf.RobertaForMaskedLM, config, ctx),
                      train=False)
    x = ids(ctx, batch, seq, 50265)
    return infer_step(ctx, model, lambda m: m(input_ids=x).logits)


def distilbert_sync_train(ctx: Ctx) -> Step:
    h, layers, batch, seq = pick(ctx, (768, 6, 24, 256), (64, 2, 2, 16))
    config = tf.DistilBertConfig(dim=h, n_layers=layers, n_heads=12 if h % 12 == 0 else 8,
                                 hidden_dim=4 * h, num_labels=3)
    model = ctx.model(hf(tf.DistilBertForSequenceClassification, config, ctx))
    opt = ctx.adamw(model.parameters())
    x, y = ids(ctx, batch, seq, config.vocab_size), torch.randint(0, 3, (batch,), device=ctx.device)
    norms: dict[str, float] = {}
    kept: dict[str, torch.Tensor] = {}

    def step() -> None:
        with ctx.autocast():
            loss = model(input_ids=x, labels=y).loss
        if not ctx.knobs.sync_free and torch.isnan(loss):  # a NaN guard: one sync
            raise FloatingPointError("loss is NaN")
        if ctx.knobs.sync_free and ctx.knobs.reads_kept:
            kept["nan"] = torch.isnan(loss)  # the guard's value, kept on the GPU
        loss.backward()
        if not ctx.knobs.sync_free:  # per-parameter gradient norms logged: one sync each
            for name, p in model.named_parameters():
                if p.grad is not None:
                    norms[name] = p.grad.norm().item()
        elif ctx.knobs.reads_kept:
            for name, p in model.named_parameters():
                if p.grad is not None:
                    kept[name] = p.grad.norm()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def gpt2_vocab_bf16_train(ctx: Ctx) -> Step:
    layers, h, batch, seq = pick(ctx, (4, 512, 8, 512), (2, 64, 2, 32))
    vocab = 50304 if ctx.knobs.padded else 50257  # GPT-2's vocabulary, padded to 64
    config = tf.GPT2Config(n_layer=layers, n_embd=h, n_head=8, vocab_size=vocab, n_positions=seq)
    model = ctx.model(hf(tf.GPT2LMHeadModel, config, ctx))
    x = ids(ctx, batch, seq, 50257)
    return train_step(ctx, model, ctx.adamw(model.parameters()),
                      lambda m: m(input_ids=x, labels=x).loss)


def llama_config(h: int, layers: int, heads: int, kv: int) -> tf.LlamaConfig:
    return tf.LlamaConfig(hidden_size=h, num_hidden_layers=layers, num_attention_heads=heads,
                          num_key_value_heads=kv, intermediate_size=int(2.75 * h) // 64 * 64,
                          vocab_size=32000, max_position_embeddings=2048, use_cache=False)


def llama_tiny_b2_infer(ctx: Ctx) -> Step:
    h, layers, batch, seq = pick(ctx, (256, 4, 2, 32), (64, 2, 1, 8))
    model = ctx.model(hf(tf.LlamaForCausalLM, llama_config(h, layers, 4, 2), ctx), train=False)
    x = ids(ctx, batch, seq, 32000)
    return infer_step(ctx, model, lambda m: m(input_ids=x, use_cache=False).logits)


def llama_fp32_empty_cache_train(ctx: Ctx) -> Step:
    h, layers, batch, seq = pick(ctx, (512, 4, 8, 256), (64, 2, 2, 16))
    model = ctx.model(hf(tf.LlamaForCausalLM, llama_config(h, layers, 8, 8), ctx))
    x = ids(ctx, batch, seq, 32000)
    inner = train_step(ctx, model, ctx.adamw(model.parameters()),
                       lambda m: m(input_ids=x, labels=x, use_cache=False).loss)

    def step() -> None:
        inner()
        ctx.empty_cache()  # "free memory" after every step
    return step


def vit(ctx: Ctx, h: int, layers: int, heads: int, image: int) -> tf.ViTForImageClassification:
    config = tf.ViTConfig(hidden_size=h, num_hidden_layers=layers, num_attention_heads=heads,
                          intermediate_size=4 * h, image_size=image, patch_size=16,
                          num_labels=100)
    return hf(tf.ViTForImageClassification, config, ctx)


def vit_small_fp32_train(ctx: Ctx) -> Step:
    h, layers, batch, image = pick(ctx, (384, 6, 64, 224), (64, 2, 2, 32))
    model = ctx.model(vit(ctx, h, layers, 4 if ctx.smoke else 6, image))
    x = ctx.image(torch.randn(batch, 3, image, image, device=ctx.device))
    y = torch.randint(0, 100, (batch,), device=ctx.device)
    return train_step(ctx, model, ctx.adamw(model.parameters()),
                      lambda m: m(pixel_values=x, labels=y).loss)


def vit_tiny_loader_infer(ctx: Ctx) -> Step:
    h, layers, batch, image, passes = pick(ctx, (192, 12, 64, 224, 2), (64, 2, 2, 32, 1))
    model = ctx.model(vit(ctx, h, layers, 3 if not ctx.smoke else 4, image), train=False)
    stream = data.batches(ctx, data.AugmentedImages(image, passes), batch)

    @torch.no_grad()
    def step() -> None:
        x, _ = next(stream)
        with ctx.autocast():
            model(pixel_values=ctx.image(data.to_device(ctx, x)))
    return step


def gpt2_host_tokenize_infer(ctx: Ctx) -> Step:
    layers, h, batch, seq = pick(ctx, (6, 768, 16, 256), (2, 64, 2, 16))
    vocab = 50304 if ctx.knobs.padded else 50257  # GPT-2's vocabulary, padded to 64
    config = tf.GPT2Config(n_layer=layers, n_embd=h, n_head=12 if h % 12 == 0 else 8,
                           vocab_size=vocab, n_positions=seq)
    model = ctx.model(hf(tf.GPT2LMHeadModel, config, ctx),
                      train=False)
    text = data.TextSamples(seq, config.vocab_size, words_per_token=4)
    feed = data.host_batches(ctx, data.TokenBatch(text, batch))

    @torch.no_grad()
    def step() -> None:
        x = data.to_device(ctx, next(feed))
        with ctx.autocast():
            model(input_ids=x)
    return step


FP32_OFF = Knobs(tf32="off")
BF16 = Knobs(bf16=True)

WORKLOADS = [
    Workload("bert_small_fp32_train", "transformers", "train",
             "BERT encoder (4 layers, hidden 512) classification training, batch 32x128, FP32 "
             "with TF32 off", ("tf32",), FP32_OFF, bert_small_fp32_train,
             frozenset({"sdpa"})),
    Workload("roberta_eager_bf16_infer", "transformers", "infer",
             "RoBERTa masked-LM (6 layers, hidden 768) inference, batch 32x384, bf16 autocast, "
             "hand-written (eager) attention; vocabulary 50265", ("sdpa",),
             Knobs(bf16=True, sdpa=False), roberta_eager_bf16_infer,
             frozenset({"sdpa", "padded_shapes"})),
    Workload("distilbert_sync_train", "transformers", "train",
             "DistilBERT (6 layers) classification training, batch 24x256, bf16, an isnan(loss) "
             "guard and per-parameter gradient-norm .item() logging", ("sync_free",), BF16,
             distilbert_sync_train, frozenset({"sdpa", "sync_free"}),
             not_capturable="isnan and .item() synchronize inside the step",
             capturable_after="sync_free"),
    Workload("gpt2_vocab_bf16_train", "transformers", "train",
             "GPT-2 (4 layers, hidden 512) LM training, batch 8x512, bf16, vocabulary 50257 "
             "(not a multiple of 8)", ("padded_shapes",), BF16, gpt2_vocab_bf16_train,
             frozenset({"sdpa", "padded_shapes"})),
    Workload("llama_tiny_b2_infer", "transformers", "infer",
             "Llama-style decoder (4 layers, hidden 256, GQA) forward, batch 2x32, bf16: "
             "launch-bound", ("cuda_graph",), BF16, llama_tiny_b2_infer, frozenset({"sdpa"})),
    Workload("llama_fp32_empty_cache_train", "transformers", "train",
             "Llama-style decoder (4 layers, hidden 512) LM training, batch 8x256, FP32 with "
             "TF32 off and torch.cuda.empty_cache() after every step",
             ("tf32", "no_empty_cache"), FP32_OFF, llama_fp32_empty_cache_train,
             frozenset({"sdpa", "no_empty_cache"}),
             not_capturable="empty_cache cannot run inside a graph capture",
             capturable_after="no_empty_cache"),
    Workload("vit_small_fp32_train", "transformers", "train",
             "ViT-S/16 (6 layers, hidden 384) classification training, batch 64 at 224, FP32 "
             "with TF32 off", ("tf32",), FP32_OFF, vit_small_fp32_train,
             frozenset({"sdpa", "channels_last"})),
    Workload("vit_tiny_loader_infer", "transformers", "infer",
             "ViT-Ti/16 (12 layers, hidden 192) inference, batch 64 at 224, bf16, images from a "
             "DataLoader with num_workers=0 and CPU crop/flip/blur/normalise transforms",
             ("loader_workers",), BF16, vit_tiny_loader_infer,
             frozenset({"sdpa", "channels_last", "loader_workers"}),
             not_capturable="the DataLoader runs on the host inside the step",
             alternates=True, compile_ok=False),
    Workload("gpt2_host_tokenize_infer", "transformers", "infer",
             "GPT-2 (6 layers, hidden 768) inference, batch 16x256, bf16, token ids made by a "
             "Python tokenizer in the loop (no DataLoader)", ("host_prep_workers",), BF16,
             gpt2_host_tokenize_infer, frozenset({"sdpa", "host_prep_workers",
                                                  "padded_shapes"}),
             not_capturable="host preprocessing inside the step", alternates=True,
             compile_ok=False),
]
