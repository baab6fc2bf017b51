"""What the suite's CUDA-graph truth of distilbert_sync_train measured: not the eager step's
kernels replayed without launch gaps, but a step with more GPU work (H200, 2026-12-02)."""

from __future__ import annotations

import json
from pathlib import Path

KERNELS = (Path(__file__).parents[1] / "data" / "diagnose" / "counterfactual_fourth"
           / "distilbert_graph_kernels.json")


def test_distilberts_graphed_step_runs_more_gpu_work_than_its_eager_step() -> None:
    """The sync-free step graphed replays in 16.3 ms of 16.0 ms of GPU work, against 8.7 ms of
    kernels eager (9.3 with AdamW capturable): its graph holds 1,064 GPU ops, 207 more than
    the eager step with the same optimizer, and FP32 SIMT GEMMs (cuBLAS' sm80 ffma kernels)
    that neither eager step runs. A graph gain measured on it is so a floor of what the
    ``cpu_bound`` model replays (the eager kernels without their launch gaps): the 54.8%
    claimed on this workload counts as a false positive against a truth that measured another
    step (docs/diagnose.md)."""
    runs = json.loads(KERNELS.read_text())["variants"]
    eager, capturable, graphed = runs["eager"], runs["eager_capturable"], runs["graphed"]
    assert graphed["gpu_ms"] > capturable["gpu_ms"] + 5.0 > eager["gpu_ms"] + 5.0
    assert graphed["gpu_ops"] - capturable["gpu_ops"] > 150
    assert max(graphed["block_ms"]) - min(graphed["block_ms"]) < 0.1  # a replay: no host
    assert abs(min(graphed["block_ms"]) - graphed["gpu_ms"]) < 0.5

    def simt_fp32_ms(run: dict) -> float:
        return sum(op["ms"] for op in run["top_ops"] if "f32f32_f32f32" in op["name"])

    assert simt_fp32_ms(graphed) > 2.0 and simt_fp32_ms(eager) == simt_fp32_ms(capturable) == 0


def test_under_capture_transformers_hands_sdpa_a_mask_that_sends_it_to_the_math_path() -> None:
    """Why the graph runs other kernels (scripts/h200/capture_attention.py, H200, 2026-12-02
    21:12 UTC): SDPA alone captures with the backend it runs eager (cuDNN's fused kernels,
    dropout 0 or 0.1), but distilbert's six attention calls get a 4-D boolean mask only while
    the stream captures. transformers' mask code skips its data-dependent "no padding" check
    when it is tracing, capturing included, and SDPA with that mask takes its math path, in
    FP32 for bf16 inputs: the FP32 SIMT GEMMs above. A user's plain torch.cuda.graph gets the
    same step, so the truth stands; the trace the model reads cannot show the branch."""
    doc = json.loads((KERNELS.parent / "capture_attention.json").read_text())
    for case in doc["attention_alone"]:
        assert "error" not in case, case
        if case["backend"] in ("default", "cudnn"):
            fused = [n for n, _ in case["graph_kernels"] if "sdpa" in n]
            assert fused and fused == [n for n, _ in case["eager_kernels"] if "sdpa" in n]
    calls = doc["distilbert_sdpa_calls"]
    assert calls["eager_warmup"] == [{"mask_is_none": True, "capturing": False, "mask": "None",
                                      "calls": 18}]
    captured = [c for c in calls["graph_warmup_and_capture"] if c["capturing"]]
    assert captured == [{"mask_is_none": False, "capturing": True,
                         "mask": "torch.bool (24, 1, 256, 256)", "calls": 6}]


def _masked_under_capture(prefix: str, workload: str, mask_shape: str) -> dict:
    """``scripts/h200/graph_kernels.py``'s record of ``workload`` (in the seventh recording's
    folder), checked to show its SDPA calls without a mask eager and with a boolean mask of
    ``mask_shape`` while the stream captures."""
    doc = json.loads((KERNELS.parents[1] / "counterfactual_seventh"
                      / f"{prefix}_graph_kernels.json").read_text())
    run: dict = doc["workloads"][workload]
    assert {(c["capturing"], c["mask"]) for c in run["sdpa_calls"]} == {
        (False, "None"), (True, f"torch.bool {mask_shape}")}
    return run


def test_bert_smalls_graph_takes_sdpas_math_path_too_and_runs_more_gpu_work() -> None:
    """bert_small_fp32_train (FP32, TF32 off) graphed and eager, one process, H200 2026-12-03
    10:09 UTC (``scripts/h200/graph_kernels.py``): its four attention calls get no mask eager
    and a ``(32, 1, 128, 128)`` boolean mask while the stream captures, as distilbert's do.
    Eager, SDPA runs the memory-efficient FP32 kernels (``fmha_cutlassF/B_f32``); the graph
    runs none of them but four more FP32 GEMMs and 194 elementwise kernels: the math path. Its
    GPU work is 10.45 ms against the eager step's 9.62 (11.35 less the optimizer's 1.73 ms
    ``gpu_user_annotation``, which that recording summed in), 0.8 ms more. On this host the
    eager step was host-bound (13.5 ms) and the graph gained 21%; where the eager step ran at
    about its GPU work (10.1 ms, the fast hosts of 2026-12-03), the graph's 10.7 ms was
    slower, the -4.7 and -5.8% those sessions measured."""
    run = _masked_under_capture("bert_small", "bert_small_fp32_train", "(32, 1, 128, 128)")
    eager, graphed = run["eager"], run["graphed"]

    def ms(work: dict, part: str) -> float:
        return sum(op["ms"] for op in work["top_ops"] if part in op["name"])

    assert ms(eager, "fmha_cutlass") > 0.5 and ms(graphed, "fmha_cutlass") == 0.0
    annotation = ms(eager, "Optimizer.step")
    assert annotation > 1.0 and ms(graphed, "Optimizer.step") == 0.0
    extra_ms = graphed["gpu_ms"] - (eager["gpu_ms"] - annotation)
    assert 0.5 < extra_ms < 1.5
    graph_block_ms = min(run["block_ms"]["graphed"])
    assert abs(graph_block_ms - graphed["gpu_ms"]) < 0.5  # a replay: its GPU work
    assert min(run["block_ms"]["eager"]) > graph_block_ms + 2.0  # this host: eager host-bound


def test_cpu_bound_says_to_check_a_graph_where_attention_gets_no_mask() -> None:
    """GIVEN the seventh recording's bert_small record, whose SDPA calls get no mask and are
    not causal (4 a step), and gpt2_vocab's, whose calls are causal, WHEN each is diagnosed,
    THEN bert_small's cpu_bound finding counts the calls and its fix says to check the graphed
    step's kernels first (a mask built under capture, SDPA's slower path, not in the
    estimate); gpt2_vocab's says nothing of it."""
    from aiprof.diagnose import diagnose
    from aiprof.diagnose.rules.cpu_bound import UNMASKED_CAVEAT

    seventh = KERNELS.parents[1] / "counterfactual_seventh"
    (bert,) = [f for f in diagnose(seventh / "bert_small_fp32_train.aiprof").findings
               if f.category == "cpu_bound"]
    assert bert.evidence["sdpa_calls_without_mask_per_step"] == 4.0
    assert bert.fix.endswith(UNMASKED_CAVEAT.format(calls=4))
    (gpt2,) = [f for f in diagnose(seventh / "gpt2_vocab_bf16_train.aiprof").findings
               if f.category == "cpu_bound"]
    assert "sdpa_calls_without_mask_per_step" not in gpt2.evidence
    assert "graphed step's kernels" not in gpt2.fix


def test_vit_smalls_graph_takes_the_math_path_as_well_and_is_slower_than_eager() -> None:
    """ViT-S (FP32, TF32 off), graphed and eager in one process (H200 2026-12-03 10:33 UTC,
    ``scripts/h200/graph_kernels.py``, user annotations left out): its six attention calls get
    a ``(64, 1, 197, 197)`` boolean mask under capture only; the graph runs no memory-efficient
    attention kernel and 2.0 ms more GPU work (29.8 against 27.8 ms), and replays slower than
    the eager step in every round (29.9-30.0 against 28.4 ms): the -5.5 to -5.8% of every
    session's graph truth on this GPU-bound step."""
    run = _masked_under_capture("vit_small", "vit_small_fp32_train", "(64, 1, 197, 197)")
    eager, graphed = run["eager"], run["graphed"]
    fused = [sum(op["ms"] for op in w["top_ops"] if "fmha_cutlass" in op["name"])
             for w in (eager, graphed)]
    assert fused[0] > 3.0 and fused[1] == 0.0
    assert 1.5 < graphed["gpu_ms"] - eager["gpu_ms"] < 2.5
    assert min(run["block_ms"]["graphed"]) > max(run["block_ms"]["eager"]) + 1.0
