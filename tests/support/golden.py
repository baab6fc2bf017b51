"""Golden files of rendered output: normalisation, the HTML outline, compare-or-rewrite.

A golden is the output as a person reads it, with what legitimately varies between runs
replaced by a placeholder: the folder the command ran in and the checkout (paths), dates and
times, aiprof's version. The HTML report is compared by its outline (section ids, headings,
table rows, text and numbers), never by its inlined JavaScript and CSS, so a change of assets
leaves the goldens alone.

Regenerate every golden after an intended change of output (and review the diff):

    AIPROF_UPDATE_GOLDEN=1 python -m pytest -q tests/report/test_golden_output.py
"""

from __future__ import annotations

import difflib
import os
import re
from html.parser import HTMLParser
from pathlib import Path

UPDATE_ENV = "AIPROF_UPDATE_GOLDEN"
REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "data" / "golden"

_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?\b")


def normalize(text: str, *, paths: dict[Path, str]) -> str:
    """``text`` with each path in ``paths`` (longest first) replaced by its placeholder, dates
    and times by ``<date>``, aiprof's version by ``<version>``, trailing blanks removed."""
    for path, placeholder in sorted(paths.items(), key=lambda item: -len(str(item[0]))):
        text = text.replace(str(path), placeholder)
    text = _DATE.sub("<date>", text)
    # only where it is named as aiprof's ("aiprof 0.1.0", "version": "0.1.0"): a bare 0.1 is
    # also a number in a table
    pattern = rf"(aiprof\W{{1,3}}v?|version\W{{1,4}}){re.escape(_version())}(?![\w.])"
    text = re.sub(pattern, r"\1<version>", text, flags=re.IGNORECASE)
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def _version() -> str:
    import aiprof

    return str(aiprof.__version__)


_BLOCKS = {"p", "div", "li", "pre", "details", "summary", "table", "section", "body", "br",
           "h1", "h2", "h3", "h4", "h5", "h6", "svg", "figure", "figcaption", "ul", "ol",
           "thead", "tbody", "label", "button", "select", "option", "legend", "fieldset"}
_SKIPPED = {"script", "style"}


class _Outline(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self._text: list[str] = []
        self._skip = 0
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        ident = dict(attrs).get("id")
        if tag in _SKIPPED:
            self._skip += 1
            if ident:
                self.lines.append(f"[{tag} #{ident}]")
            return
        if tag == "tr":
            self._flush()
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag in _BLOCKS:
            self._flush()
        else:  # an inline element still separates words (the legend's swatches)
            (self._cell if self._cell is not None else self._text).append(" ")
        if ident:
            self._flush()
            self.lines.append(f"[{tag} #{ident}]")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED:
            self._skip -= 1
        elif tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append(_collapse(self._cell))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.lines.append("| " + " | ".join(self._row) + " |")
            self._row = None
        elif tag in _BLOCKS:
            self._flush(tag if tag.startswith("h") and tag[1:].isdigit() else "")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        (self._cell if self._cell is not None else self._text).append(data)

    def _flush(self, heading: str = "") -> None:
        text = _collapse(self._text)
        self._text = []
        if text:
            self.lines.append(f"{heading}: {text}" if heading else text)


def _collapse(parts: list[str]) -> str:
    return " ".join("".join(parts).split())


def html_outline(html: str) -> str:
    """The report as lines: ``[tag #id]`` for each element with an id, ``h2: text`` for
    headings, ``| cell | cell |`` for table rows, and the text of every other block."""
    parser = _Outline()
    parser.feed(html)
    parser.close()
    parser._flush()
    return "\n".join(parser.lines) + "\n"


def check(name: str, actual: str) -> None:
    """Assert ``actual`` equals ``tests/data/golden/NAME``, or rewrite it under UPDATE_ENV."""
    path = GOLDEN / name
    if os.environ.get(UPDATE_ENV):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    assert path.exists(), f"no golden {path.name}: run with {UPDATE_ENV}=1 to write it"
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        diff = difflib.unified_diff(expected.splitlines(), actual.splitlines(), "golden",
                                    "now", lineterm="", n=1)
        shown = "\n".join(list(diff)[:60])
        raise AssertionError(f"{name} differs from its golden (if intended: {UPDATE_ENV}=1 "
                             f"python -m pytest tests/report/test_golden_output.py, and review "
                             f"the diff):\n{shown}")
