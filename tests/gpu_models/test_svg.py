"""The SVG line-chart renderer: well-formed, escaped, points placed where the axes say."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest

from aiprof.errors import InputError
from aiprof.report.svg import Series, line_chart

NS = "{http://www.w3.org/2000/svg}"


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def test_chart_is_well_formed_and_escapes_text():
    svg = line_chart(
        [Series("a<b & \"c\"", [1, 2, 3], [1, 4, 9])],
        title="<script>alert(1)</script>",
        x_label="x & y",
        y_label="µs",
    )
    root = _parse(svg)
    assert root.tag == f"{NS}svg"
    assert "<script>" not in svg
    texts = [t.text for t in root.iter(f"{NS}text")]
    assert "<script>alert(1)</script>" in texts  # round-trips through escaping
    assert 'a<b & "c"' in texts


def test_line_points_map_linearly_to_the_plot_area():
    svg = line_chart([Series("s", [0, 5, 10], [0, 50, 100])], title="t", x_label="x", y_label="y",
                     width=640, height=400)
    path = next(_parse(svg).iter(f"{NS}path"))
    coords = [tuple(map(float, p.split(","))) for p in path.get("d").replace("M", "").split(" L")]
    xs = [c[0] for c in coords]
    ys = [c[1] for c in coords]
    # Middle point is exactly half way between the ends on both axes (linear axes).
    assert math.isclose(xs[1], (xs[0] + xs[2]) / 2, abs_tol=0.01)
    assert math.isclose(ys[1], (ys[0] + ys[2]) / 2, abs_tol=0.01)
    assert ys[2] < ys[0]  # larger y is higher on screen
    assert 0 < xs[0] < xs[2] < 640


def test_log_axis_places_decades_evenly_and_skips_non_positive():
    svg = line_chart([Series("s", [1, 10, 100, 0], [1, 10, 100, -1], kind="points")],
                     title="t", x_label="x", y_label="y", x_log=True, y_log=True)
    circles = list(_parse(svg).iter(f"{NS}circle"))
    assert len(circles) == 3
    cx = [float(c.get("cx")) for c in circles]
    assert math.isclose(cx[1] - cx[0], cx[2] - cx[1], abs_tol=0.02)


def test_step_series_uses_horizontal_then_vertical_segments():
    svg = line_chart([Series("s", [0, 1, 2], [1, 2, 1], kind="step")], title="t",
                     x_label="x", y_label="y")
    d = next(_parse(svg).iter(f"{NS}path")).get("d")
    assert d.count("H") == 2 and d.count("V") == 2


def test_mismatched_lengths_raise_input_error():
    with pytest.raises(InputError):
        line_chart([Series("s", [1, 2], [1])], title="t", x_label="x", y_label="y")


def test_empty_and_constant_series_still_render():
    for series in ([], [Series("c", [1, 1], [5, 5])]):
        root = _parse(line_chart(series, title="t", x_label="x", y_label="y"))
        assert root.tag == f"{NS}svg"
