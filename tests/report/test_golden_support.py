"""GIVEN rendered output WHEN it is normalised for a golden THEN what varies between runs
(paths, dates, the version) is a placeholder, and an HTML report's outline keeps its
structure, text and numbers but not its inlined assets."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support import golden
from tests.support.golden import html_outline, normalize

import aiprof

PAGE = """<html><head><style>{css}</style></head><body><h1>aiprof report: t.json</h1>
<h2 id="ops">Top ops</h2><table><tr><th>name</th><th>ms</th></tr>
<tr><td>aten::mm</td><td class=num>{ms}</td></tr></table>
<p class="legend"><span>kernel 29.2%</span><span>memcpy 0.1%</span></p>
<script type="application/json" id="data">{{"x": 1}}</script><script>{js}</script></body></html>"""


def test_paths_dates_and_version_become_placeholders(tmp_path: Path) -> None:
    version = aiprof.__version__
    text = (f"rank 0 ({tmp_path}/t.json.gz)   \nwritten 2026-12-01T14:03:22 by aiprof "
            f"{version}\n\"version\": \"{version}\"\nstep {version} ms\n")
    assert normalize(text, paths={tmp_path: "<run>"}) == (
        "rank 0 (<run>/t.json.gz)\nwritten <date> by aiprof <version>\n\"version\": "
        f"\"<version>\"\nstep {version} ms\n")


def test_the_outline_has_ids_headings_rows_and_text_but_no_assets() -> None:
    outline = html_outline(PAGE.format(css="body{color:red}", js="draw()", ms="1.25"))
    assert outline.splitlines() == [
        "h1: aiprof report: t.json", "[h2 #ops]", "h2: Top ops", "| name | ms |",
        "| aten::mm | 1.25 |", "kernel 29.2% memcpy 0.1%", "[script #data]"]


def test_assets_do_not_change_the_outline_and_numbers_do() -> None:
    before = html_outline(PAGE.format(css="a{}", js="f()", ms="1.25"))
    assert html_outline(PAGE.format(css="b{margin:0}", js="g(); h()", ms="1.25")) == before
    assert html_outline(PAGE.format(css="a{}", js="f()", ms="1.26")) != before


def test_a_changed_output_fails_with_its_diff_and_the_update_writes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(golden, "GOLDEN", tmp_path)
    monkeypatch.delenv(golden.UPDATE_ENV, raising=False)
    (tmp_path / "view.txt").write_text("step 1.0 ms\n")
    golden.check("view.txt", "step 1.0 ms\n")
    with pytest.raises(AssertionError, match=r"(?s)AIPROF_UPDATE_GOLDEN=1.*-step 1.0.*\+step 2.0"):
        golden.check("view.txt", "step 2.0 ms\n")
    monkeypatch.setenv(golden.UPDATE_ENV, "1")
    golden.check("view.txt", "step 2.0 ms\n")
    assert (tmp_path / "view.txt").read_text() == "step 2.0 ms\n"
