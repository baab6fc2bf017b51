"""What a GPU kernel is, from its name (patterns shared by the passes).

Names follow cuBLAS/cuDNN/CUTLASS and ATen conventions as they appear in Kineto traces
(kineto-trace-format.md §3): ``ampere_sgemm_128x64_nn`` (FP32 on CUDA cores),
``sm80_xmma_gemm_f32f32_tf32f32_f32`` (TF32 on tensor cores), ``cutlass_tensorop_bf16_s16816``,
``implicit_convolve_sgemm`` (FP32 direct convolution), ``nchwToNhwcKernel`` (cuDNN layout
conversion), ``vectorized_elementwise_kernel`` (ATen pointwise ops),
``nvjet_sm90_tst_128x128_64x6_2x1_v_bz_TNT`` (cuBLAS 12's GEMMs on sm_90, wgmma tensor cores: the
bf16 GEMMs of the H200 recordings in tests/data/diagnose/counterfactual).
"""

from __future__ import annotations

import re

from aiprof.tensor.layout import CONVERSION_KERNEL

GEMM_OR_CONV = re.compile(
    r"gemm|gemv|conv|fprop|dgrad|wgrad|cutlass|cublas|xmma|winograd|fft|matmul|nvjet", re.I
)
TENSOR_CORE = re.compile(
    r"tf32|tfloat32|tensorop|hmma|imma|s16816|s1688|h16816|h1688|bf16|f16|fp16|half|wgmma|gmma|"
    r"e4m3|e5m2|nvjet",
    re.I,
)
FP32_CUDA_CORE = re.compile(
    r"sgemm|simt|f32f32_f32f32|implicit_convolve_sgemm|winograd|fft2d|gemv2?T?_kernel<float", re.I
)
LAYOUT_CONVERSION = CONVERSION_KERNEL
"""NCHW<->NHWC conversion kernels: ``aiprof.tensor.layout.CONVERSION_KERNEL`` (one matcher)."""
TRANSPOSE = re.compile(r"transpose|permute", re.I)
"""A transpose kernel; GEMM/conv kernels also name their tile iterators so (not conversions)."""
ELEMENTWISE = re.compile(
    r"elementwise|reduce_kernel|CUDAFunctor|Functor|layer_norm|LayerNorm|softmax|"
    r"batch_norm|BatchNorm|pointwise|triton_poi|fill_kernel|copy_kernel",
    re.I,
)
