"""GIVEN a diagnosis WHEN a notebook shows it THEN it is drawn by report/'s HTML renderer, which
the package face registered (aiprof/display.py), though diagnose/ never imports report/."""

from __future__ import annotations

import subprocess
import sys

import pytest

from aiprof.diagnose.finding import Diagnosis, Finding
from aiprof.display import html_of, register_html, type_name
from aiprof.report.html import diagnosis_fragment


def _diagnosis() -> Diagnosis:
    finding = Finding(category="host_sync", title="2 syncs <per step>", estimated_gain_pct=12.5,
                      evidence={"syncs": 2}, fix="drop .item()", model="remove the waits", rank=1)
    return Diagnosis(findings=[finding], verdict="Fix host_sync first", step_us=1000.0,
                     replay_step_us=990.0, device=None)


class _Unregistered:
    pass


def test_the_registered_view_is_the_report_fragment() -> None:
    diagnosis = _diagnosis()
    assert diagnosis._repr_html_() == diagnosis_fragment(diagnosis)
    assert "&lt;per step&gt;" in diagnosis._repr_html_()  # escaped, by the renderer


def test_a_type_without_a_view_has_no_html() -> None:
    assert html_of(_Unregistered()) is None


def test_a_registered_view_draws_its_type_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from aiprof import display

    monkeypatch.setattr(display, "_VIEWS", dict(display._VIEWS))
    register_html(type_name(_Unregistered), lambda result: f"<b>{type(result).__name__}</b>")
    assert html_of(_Unregistered()) == "<b>_Unregistered</b>"
    assert html_of(object()) is None


def test_importing_only_diagnose_still_gets_the_view_and_report_loads_when_drawn() -> None:
    code = (
        "import sys\n"
        "from aiprof.diagnose.finding import Diagnosis\n"
        "d = Diagnosis(findings=[], verdict='nothing <here>', step_us=1.0, replay_step_us=1.0,"
        " device=None)\n"
        "before = 'aiprof.report.html' in sys.modules\n"
        "html = d._repr_html_()\n"
        "print(before, 'aiprof.report.html' in sys.modules, html)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split(" ", 2)[:2] == ["False", "True"]
    assert "nothing &lt;here&gt;" in out.stdout


def test_ipython_html_formatter_shows_it() -> None:
    formatters = pytest.importorskip("IPython.core.formatters")
    diagnosis = _diagnosis()
    assert formatters.HTMLFormatter()(diagnosis) == diagnosis_fragment(diagnosis)
