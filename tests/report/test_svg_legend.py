"""GIVEN a roofline with many roofs and op groups WHEN it is drawn THEN every legend row lies
inside the picture (the last one used to be cut off)."""

from __future__ import annotations

import re

import pytest

from aiprof.report.svg import Series, line_chart


@pytest.mark.parametrize("count", [1, 3, 6, 7, 9])
def test_every_legend_row_is_inside_the_svg(count: int) -> None:
    series = [Series(f"series {i}", [1.0, 2.0], [1.0, 2.0 + i]) for i in range(count)]
    svg = line_chart(series, title="t", x_label="x", y_label="y", width=760, height=480)
    height = float(re.search(r'<svg [^>]*height="([\d.]+)"', svg).group(1))
    for i in range(count):
        y = float(re.search(rf'y="([\d.]+)"[^>]*>series {i}</text>', svg).group(1))
        assert y + 4 <= height, (i, y, height)
