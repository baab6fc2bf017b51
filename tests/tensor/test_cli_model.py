"""GIVEN model factories in a file WHEN ``aiprof model`` and ``aiprof ceilings`` run THEN they
print tables or JSON whose totals match FlopCounterMode, and bad input exits 2 in one line."""

from __future__ import annotations

import json
import textwrap

import pytest

torch = pytest.importorskip("torch")

from aiprof.cli.main import main  # noqa: E402
from aiprof.tensor.ceilings_model import load_ceilings  # noqa: E402

FACTORIES = textwrap.dedent("""
    import torch

    def convnet():
        return torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
                                   torch.nn.Flatten(), torch.nn.Linear(16 * 8 * 8, 10))

    def gelu():
        class Gelu(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(64, 64)
            def forward(self, x):
                y = self.fc(x)
                return 0.5 * y * (1.0 + torch.tanh(0.79788456 * (y + 0.044715 * y * y * y)))
        return Gelu()

    def broken():
        return torch.nn.Linear(5, 5)

    def not_a_model():
        raise RuntimeError("factory exploded")
""")


@pytest.fixture()
def factories(tmp_path):
    path = tmp_path / "factories.py"
    path.write_text(FACTORIES)
    return path


def test_model_json_flops_equal_flop_counter(factories, capsys) -> None:
    from torch.utils.flop_counter import FlopCounterMode

    code = main(
        [
            "model",
            f"{factories}:convnet",
            "--input-shape",
            "4,3,8,8",
            "--backward",
            "--gpu",
            "H100",
            "--json",
        ]
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    namespace: dict = {}
    exec(FACTORIES, namespace)
    model = namespace["convnet"]()
    with FlopCounterMode(display=False) as counter:
        model(torch.randn(4, 3, 8, 8)).sum().backward()
    summary = data["analysis"]["summary"]
    gemm_flops = sum(summary["flops_by_family"].get(f, 0) for f in ("matmul", "convolution"))
    assert gemm_flops == counter.get_total_flops()
    assert data["analysis"]["target"] == "H100 SXM5 80GB"
    assert data["analysis"]["predicted_total_us"] > 0


def test_model_table_with_lint_and_fusion(factories, capsys) -> None:
    code = main(
        [
            "model",
            f"{factories}:gelu",
            "--input-shape",
            "32,64",
            "--gpu",
            "H200",
            "--lint",
            "--fusion",
            "--measure",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "Ops predicted on H200" in out and "Fusion opportunities" in out
    assert "vertical" in out and "alignment: 0 findings" in out


@pytest.mark.parametrize(
    ("factory", "extra", "message"),
    [
        ("broken", [], "the model failed to run"),
        ("not_a_model", [], "factory exploded"),
        ("convnet", ["--gpu", "NoSuchGPU"], "unknown GPU"),
        ("convnet", ["--input-dtype", "floaty"], "unknown dtype"),
    ],
)
def test_model_errors_exit_2_in_one_line(factories, capsys, factory, extra, message) -> None:
    code = main(["model", f"{factories}:{factory}", "--input-shape", "4,3,8,8", *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0]


def test_ceilings_on_cpu_measures_and_says_what_it_skipped(tmp_path, capsys) -> None:
    saved = tmp_path / "ceilings.json"
    assert main(["ceilings", "--quick", "--repeats", "1", "--json", "--save", str(saved)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["device"] == "cpu"
    assert any("host-device" in item for item in data["skipped"])
    ceilings = load_ceilings(saved)
    assert ceilings.memory_bytes_per_s > 0 and ceilings.matmul_flops_per_s["fp32"] > 0
    assert main(["ceilings", "--repeats", "0"]) == 2
