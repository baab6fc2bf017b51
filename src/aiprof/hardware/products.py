"""Per-product GPU specifications (data): SMs, clocks, dense peaks, memory, caches, links.

Peaks are dense (no 2:4 sparsity) in FLOP/s (OP/s for int8). NVIDIA's Hopper, Ada and Blackwell
sheets print sparse tensor figures; those are halved here (../shared/reference/gpu-models.md §6.4:
"Dense = sparse / 2"). ``None`` means the datasheet does not give the value.
"""

from __future__ import annotations

from dataclasses import dataclass, field

T = 1e12
GB_S = 1e9
MIB = 1024**2


@dataclass(frozen=True, kw_only=True)
class ProductSpec:
    """Datasheet figures of one GPU product."""

    name: str
    """Canonical product name, e.g. ``"H100 SXM5 80GB"``."""
    aliases: tuple[str, ...]
    """Lower-case substrings that identify it in ``deviceProperties.name`` or user input."""
    cc: tuple[int, int]
    """Compute capability."""
    num_sms: int
    """Streaming multiprocessors."""
    boost_clock_mhz: float | None
    """Boost clock used by the datasheet's vector peaks."""
    memory_bytes: int
    """Device memory (decimal GB as printed on the sheet)."""
    mem_bandwidth_bytes_per_s: float
    """Peak DRAM bandwidth."""
    l2_bytes: int | None
    """L2 cache size."""
    host_link: str | None
    """Host interface, e.g. ``"PCIe Gen5 x16"``."""
    host_link_bytes_per_s: float | None
    """Host link bandwidth, both directions together, as printed on the sheet."""
    nvlink_bytes_per_s: float | None
    """NVLink bandwidth per GPU (None: no NVLink)."""
    peak_flops: dict[str, float]
    """Dense peak per path: fp64, fp64_tensor, fp32, tf32, fp16, bf16, fp8, int8 (tensor cores),
    fp16_vector, bf16_vector (CUDA cores)."""
    source: str
    """Datasheet or whitepaper the values come from."""
    notes: tuple[str, ...] = field(default=())
    """How derived values were obtained."""


_A100_SRC = ("A100 datasheet nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf; Ampere whitepaper "
             "(non-tensor FP16/BF16); ../shared/reference/gpu-models.md §6.4")
_A100_PEAKS = {"fp64": 9.7 * T, "fp64_tensor": 19.5 * T, "fp32": 19.5 * T, "tf32": 156 * T,
               "fp16": 312 * T, "bf16": 312 * T, "int8": 624 * T, "fp16_vector": 78 * T,
               "bf16_vector": 39 * T}
_HOPPER_SXM_SRC = ("https://www.nvidia.com/en-us/data-center/h100/ and /h200/ datasheets; Hopper "
                   "whitepaper; ../shared/reference/gpu-models.md §6.4")
_HOPPER_SXM_PEAKS = {"fp64": 33.5 * T, "fp64_tensor": 66.9 * T, "fp32": 66.9 * T,
                     "tf32": 494.7 * T, "fp16": 989.4 * T, "bf16": 989.4 * T, "fp8": 1978.9 * T,
                     "int8": 1978.9 * T, "fp16_vector": 133.8 * T, "bf16_vector": 133.8 * T}
_ADA_FP64 = ("fp64 derived as fp32 / 64: CC 8.9 executes 2 FP64 vs 128 FP32 results per clock "
             "per SM (CUDA C++ Programming Guide, arithmetic instruction throughput table)",)

PRODUCTS: tuple[ProductSpec, ...] = (
    ProductSpec(
        name="V100 SXM2", aliases=("v100-sxm2", "v100 sxm2", "v100"), cc=(7, 0), num_sms=80,
        boost_clock_mhz=1530, memory_bytes=32 * 10**9, mem_bandwidth_bytes_per_s=900 * GB_S,
        l2_bytes=6 * MIB, host_link="PCIe Gen3 x16", host_link_bytes_per_s=32 * GB_S,
        nvlink_bytes_per_s=300 * GB_S,
        peak_flops={"fp64": 7.8 * T, "fp32": 15.7 * T, "fp16": 125 * T, "fp16_vector": 31.4 * T},
        source="V100 datasheet volta-v100-datasheet-update-us-1165301-r5.pdf; Volta whitepaper",
        notes=("16 GB and 32 GB boards share these peaks",),
    ),
    ProductSpec(
        name="A100 SXM4 40GB", aliases=("a100-sxm4-40gb", "a100-pg509-200", "a100 sxm4 40gb",
                                        "a100-40gb", "a100 40gb", "a100-pcie-40gb"),
        cc=(8, 0), num_sms=108, boost_clock_mhz=1410, memory_bytes=40 * 10**9,
        mem_bandwidth_bytes_per_s=1555 * GB_S, l2_bytes=40 * MIB, host_link="PCIe Gen4 x16",
        host_link_bytes_per_s=64 * GB_S, nvlink_bytes_per_s=600 * GB_S, peak_flops=_A100_PEAKS,
        source=_A100_SRC,
        notes=("A100-PG509-200 is the 40 GB SXM4 board (traces report 42.3 GB total memory)",),
    ),
    ProductSpec(
        name="A100 SXM4 80GB", aliases=("a100-sxm4-80gb", "a100 sxm4 80gb", "a100-80gb",
                                        "a100 80gb", "a100"),
        cc=(8, 0), num_sms=108, boost_clock_mhz=1410, memory_bytes=80 * 10**9,
        mem_bandwidth_bytes_per_s=2039 * GB_S, l2_bytes=40 * MIB, host_link="PCIe Gen4 x16",
        host_link_bytes_per_s=64 * GB_S, nvlink_bytes_per_s=600 * GB_S, peak_flops=_A100_PEAKS,
        source=_A100_SRC,
    ),
    ProductSpec(
        name="A100 PCIe 80GB", aliases=("a100-pcie-80gb", "a100 pcie 80gb", "a100 pcie"),
        cc=(8, 0), num_sms=108, boost_clock_mhz=1410, memory_bytes=80 * 10**9,
        mem_bandwidth_bytes_per_s=1935 * GB_S, l2_bytes=40 * MIB, host_link="PCIe Gen4 x16",
        host_link_bytes_per_s=64 * GB_S, nvlink_bytes_per_s=600 * GB_S, peak_flops=_A100_PEAKS,
        source=_A100_SRC, notes=("NVLink via bridge for 2 GPUs",),
    ),
    ProductSpec(
        name="H100 SXM5 80GB", aliases=("h100 80gb hbm3", "h100-sxm", "h100 sxm", "h100"),
        cc=(9, 0), num_sms=132, boost_clock_mhz=1980, memory_bytes=80 * 10**9,
        mem_bandwidth_bytes_per_s=3350 * GB_S, l2_bytes=50 * MIB, host_link="PCIe Gen5 x16",
        host_link_bytes_per_s=128 * GB_S, nvlink_bytes_per_s=900 * GB_S,
        peak_flops=_HOPPER_SXM_PEAKS, source=_HOPPER_SXM_SRC,
        notes=("vector peaks at 1.98 GHz, tensor peaks at 1.83 GHz (reference §6.4)",),
    ),
    ProductSpec(
        name="H100 PCIe 80GB", aliases=("h100 pcie", "h100-pcie"), cc=(9, 0), num_sms=114,
        boost_clock_mhz=1755, memory_bytes=80 * 10**9, mem_bandwidth_bytes_per_s=2000 * GB_S,
        l2_bytes=50 * MIB, host_link="PCIe Gen5 x16", host_link_bytes_per_s=128 * GB_S,
        nvlink_bytes_per_s=600 * GB_S,
        peak_flops={"fp64": 25.6 * T, "fp64_tensor": 51.2 * T, "fp32": 51.2 * T,
                    "tf32": 378 * T, "fp16": 756.5 * T, "bf16": 756.5 * T, "fp8": 1513 * T,
                    "int8": 1513 * T},
        source="https://www.nvidia.com/en-us/data-center/h100/ datasheet (H100 PCIe column)",
        notes=("tensor peaks are the sheet's sparse figures halved",),
    ),
    ProductSpec(
        name="H200 SXM 141GB", aliases=("h200",), cc=(9, 0), num_sms=132, boost_clock_mhz=1980,
        memory_bytes=141 * 10**9, mem_bandwidth_bytes_per_s=4800 * GB_S, l2_bytes=60 * MIB,
        host_link="PCIe Gen5 x16", host_link_bytes_per_s=128 * GB_S,
        nvlink_bytes_per_s=900 * GB_S, peak_flops=_HOPPER_SXM_PEAKS, source=_HOPPER_SXM_SRC,
        notes=("L2 not on the sheet: the device reports 62,914,560 B (measured, reference §1.3)",),
    ),
    ProductSpec(
        name="L4", aliases=("nvidia l4", "l4"), cc=(8, 9), num_sms=58, boost_clock_mhz=2040,
        memory_bytes=24 * 10**9, mem_bandwidth_bytes_per_s=300 * GB_S, l2_bytes=48 * MIB,
        host_link="PCIe Gen4 x16", host_link_bytes_per_s=64 * GB_S, nvlink_bytes_per_s=None,
        peak_flops={"fp64": 30.3 * T / 64, "fp32": 30.3 * T, "tf32": 60 * T, "fp16": 121 * T,
                    "bf16": 121 * T, "fp8": 242.5 * T, "int8": 242.5 * T},
        source="https://www.nvidia.com/en-us/data-center/l4/ datasheet; Ada Lovelace whitepaper",
        notes=("tensor peaks are the sheet's sparse figures halved", *_ADA_FP64),
    ),
    ProductSpec(
        name="L40S", aliases=("l40s",), cc=(8, 9), num_sms=142, boost_clock_mhz=2520,
        memory_bytes=48 * 10**9, mem_bandwidth_bytes_per_s=864 * GB_S, l2_bytes=96 * MIB,
        host_link="PCIe Gen4 x16", host_link_bytes_per_s=64 * GB_S, nvlink_bytes_per_s=None,
        peak_flops={"fp64": 91.6 * T / 64, "fp32": 91.6 * T, "tf32": 183 * T,
                    "fp16": 362.05 * T, "bf16": 362.05 * T, "fp8": 733 * T, "int8": 733 * T},
        source="https://www.nvidia.com/en-us/data-center/l40s/ datasheet; Ada Lovelace whitepaper",
        notes=("tensor peaks: the sheet's dense column", "L2: full AD102 (Ada whitepaper)",
               *_ADA_FP64),
    ),
    ProductSpec(
        name="GeForce RTX 4090", aliases=("rtx 4090", "4090"), cc=(8, 9), num_sms=128,
        boost_clock_mhz=2520, memory_bytes=24 * 10**9, mem_bandwidth_bytes_per_s=1008 * GB_S,
        l2_bytes=72 * MIB, host_link="PCIe Gen4 x16", host_link_bytes_per_s=64 * GB_S,
        nvlink_bytes_per_s=None,
        peak_flops={"fp64": 82.6 * T / 64, "fp32": 82.6 * T, "tf32": 82.6 * T,
                    "fp16": 165.2 * T, "bf16": 165.2 * T, "fp8": 330.3 * T, "int8": 660.6 * T},
        source="NVIDIA Ada Lovelace GPU architecture whitepaper v2.01, appendix table (RTX 4090)",
        notes=("fp16/bf16/fp8: FP32-accumulate rates (GeForce runs these at half the FP16-"
               "accumulate rate)", *_ADA_FP64),
    ),
    ProductSpec(
        name="B200", aliases=("b200",), cc=(10, 0), num_sms=148, boost_clock_mhz=None,
        memory_bytes=180 * 10**9, mem_bandwidth_bytes_per_s=8000 * GB_S, l2_bytes=None,
        host_link=None, host_link_bytes_per_s=None, nvlink_bytes_per_s=1800 * GB_S,
        peak_flops={"fp64": 37 * T, "fp64_tensor": 37 * T, "fp32": 75 * T, "tf32": 1125 * T,
                    "fp16": 2250 * T, "bf16": 2250 * T, "fp8": 4500 * T, "int8": 4500 * T},
        source="https://www.nvidia.com/en-us/data-center/hgx/ (HGX B200, 8-GPU totals / 8)",
        notes=("tensor peaks are the sheet's sparse figures halved",
               "SM count from NVIDIA's Blackwell technical brief; boost clock, L2 and host link "
               "not published on the sheet"),
    ),
)
"""Products known by name; look-up goes through ``aiprof.hardware.lookup``."""
