"""The HTML report: self-contained, escaped, scripts run without errors in Chromium."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from chromium import open_page
from tests.support.kineto_synth import TraceBuilder

from aiprof.cli.main import main
from aiprof.diagnose import diagnose

DATA = Path(__file__).parents[1] / "data" / "h200"
PAYLOADS = [
    "<script>document.body.setAttribute('data-pwned','1')</script>",
    "x\"onerror=\"document.body.setAttribute('data-pwned','2')",
    "<img src=x onerror=\"document.body.setAttribute('data-pwned','3')\">",
    "</script><script>document.body.setAttribute('data-pwned','4')</script>",
]


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A launch-bound trace whose kernel and op names are script injections."""
    tmp = tmp_path_factory.mktemp("hostile")
    b = TraceBuilder()
    t = 0.0
    for s in range(2):
        start = t
        for k in range(40):
            ext = b.cpu_op(PAYLOADS[k % 4] + " op", t, 15.0)
            b.kernel(PAYLOADS[(k + 1) % 4], t + 1, t + 10, 3.0, external=ext)
            t += 20.0
        b.step(s, start, t - start)
    trace = b.write(tmp / "hostile.json.gz")
    out = tmp / "hostile.html"
    assert main(["report", str(trace), "-o", str(out)]) == 0
    return out


def test_report_is_self_contained(hostile_report: Path) -> None:
    page = hostile_report.read_text()
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:|//)", page)
    assert "@import" not in page and "url(" not in page
    urls = set(re.findall(r"https?://[^\s\"'<>]+", page))
    assert urls <= {"http://www.w3.org/2000/svg"}  # the SVG namespace name only


def test_trace_strings_are_escaped(hostile_report: Path) -> None:
    page = hostile_report.read_text()
    # the two timelines' JSON blocks, the report's own code and the all-threads timeline's
    assert page.count("<script") == 4
    assert "data-pwned" in page  # the payload text is shown ...
    for payload in PAYLOADS:
        assert payload not in page  # ... but never as markup
    assert "&lt;script&gt;" in page and "\\u003cscript\\u003e" in page


def test_no_injected_script_runs_in_chromium(hostile_report: Path) -> None:
    run = open_page(hostile_report)
    assert 'data-ready="1"' in run.dom, run.log[-2000:]  # the report's script ran to its end
    assert "data-pwned=" not in run.dom.split("<body", 1)[1].split(">", 1)[0]
    assert run.console_errors == []
    timeline = run.dom.split('id="timeline"', 1)[1].split("</svg>", 1)[0]
    assert timeline.count("<rect") == 40  # the timeline of one step: one bar per kernel


def test_real_report_opens_without_console_errors(tmp_path: Path) -> None:
    out = tmp_path / "resnet.html"
    assert main(["report", str(DATA / "h200_resnet50_bf16.trace.json.gz"), "-o", str(out)]) == 0
    run = open_page(out)
    assert 'data-ready="1"' in run.dom and run.console_errors == []
    assert "NVIDIA H200" in run.dom and "<rect" in run.dom
    assert "<h2>Roofline</h2><div><svg" in run.dom  # the trace has shapes and a known GPU


def test_repr_html_for_jupyter(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(0, 0.0, 30.0)
    b.kernel(PAYLOADS[0], 1.0, 10.0, 500.0)
    result = diagnose(b.write(tmp_path / "t.json.gz"))
    fragment = result._repr_html_()
    assert "verdict" in fragment and PAYLOADS[0] not in fragment
    assert "<script" not in fragment


def test_report_cli_errors(tmp_path: Path) -> None:
    assert main(["report", str(tmp_path / "missing.json"), "-o", str(tmp_path / "r.html")]) == 2
    b = TraceBuilder()
    b.step(0, 0.0, 30.0)
    b.kernel("k", 1.0, 10.0, 5.0)
    trace = b.write(tmp_path / "t.json.gz")
    assert main(["report", str(trace), "-o", str(tmp_path / "no" / "dir" / "r.html")]) == 2


def test_demo_hook_prints_and_writes(tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from aiprof.report.demo_terminal import render_demo_diagnosis
    from aiprof.trace import load_trace

    out = io.StringIO()
    trace = load_trace(DATA / "h200_gpt2_bf16.trace.json.gz")
    path = render_demo_diagnosis(Console(file=out, width=120), trace, tmp_path / "demo.html")
    assert "verdict:" in out.getvalue() and path.read_text().startswith("<!DOCTYPE html>")
