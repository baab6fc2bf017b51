"""Golden tests of rendered output (tests/support/golden.py says how to regenerate them).

GIVEN two fixed traces shipped with aiprof (an H200 ResNet-50 step with shapes, an A100 run
from Holistic Trace Analysis) and the calculators' fixed inputs WHEN each view is rendered in
the terminal, and the HTML report is written THEN the output equals its golden under
tests/data/golden/, after normalising paths, dates and versions.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tests.support.golden import REPO, check, html_outline, normalize

from aiprof.cli.main import main
from aiprof.record.examples import example

TRACES = ("h200_resnet50", "a100_alexnet")
VIEWS = {
    "summary": ["summary"],
    "diagnose": ["diagnose"],
    "ops": ["ops"],
    "kernels": ["ops", "--kernels"],
    "queue": ["queue"],
    "critical_path": ["critical-path"],
}
NCU_CSV = REPO / "tests" / "data" / "gpu_models" / "ncu_probes.csv"
CALCULATORS = {
    "occupancy": ["occupancy", "--arch", "sm_90", "--block-size", "256", "--registers", "64",
                  "--shared-mem", "40K"],
    "occupancy_sweep": ["occupancy", "--arch", "sm_80", "--block-size", "256", "--sweep",
                        "block-size"],
    "coalescing": ["coalescing", "--stride", "1,2,4,32"],
    "banks": ["banks", "--tile", "32x32"],
    "ncu_kernels": ["kernels", "--csv-input", "ncu_first_launches.csv", "--nvprof-metrics",
                    "gld_efficiency,achieved_occupancy"],
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding each trace under its own file name (the commands print the path they
    were given, and a relative one reads the same wherever the checkout is), and the first
    three launches of a real Nsight Compute CSV (the whole file renders 48 cards)."""
    where = tmp_path_factory.mktemp("golden")
    for name in TRACES:
        shutil.copy(example(name).path, where / example(name).path.name)
    lines = NCU_CSV.read_text(encoding="utf-8").splitlines(keepends=True)
    first = [line for line in lines if not line.startswith('"') or line.startswith('"ID"')
             or line.split(",", 1)[0] in ('"0"', '"1"', '"2"')]
    (where / "ncu_first_launches.csv").write_text("".join(first), encoding="utf-8")
    return where


def _render(argv: list[str], where: Path, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    code = main(argv)
    out = capsys.readouterr().out
    assert code == 0, out
    return normalize(out, paths={where: "<run>", REPO: "<repo>", Path.home(): "<home>"})


@pytest.fixture(autouse=True)
def _plain_terminal(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """Commands that size their console by the terminal get the same fixed width everywhere."""
    monkeypatch.chdir(folder)
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("LINES", "50")
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("trace", TRACES)
@pytest.mark.parametrize("view", VIEWS)
def test_terminal_view(trace: str, view: str, folder: Path,
                       capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*VIEWS[view], example(trace).path.name]
    check(f"{trace}.{view}.txt", _render(argv, folder, capsys))


@pytest.mark.parametrize("name", CALCULATORS)
def test_calculator(name: str, folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    check(f"{name}.txt", _render(CALCULATORS[name], folder, capsys))


@pytest.mark.parametrize("trace", TRACES)
def test_html_report(trace: str, folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = folder / f"{trace}.html"
    _render(["report", example(trace).path.name, "-o", str(out)], folder, capsys)
    outline = html_outline(out.read_text(encoding="utf-8"))
    check(f"{trace}.report.outline.txt",
          normalize(outline, paths={folder: "<run>", REPO: "<repo>"}))
