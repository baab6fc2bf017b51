"""Self-contained SVG line charts: pure string building, no dependencies.

The output is one ``<svg>`` element that can be written to a ``.svg`` file or inlined in an
HTML page (no external fonts, scripts or styles). All text is XML-escaped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal
from xml.sax.saxutils import escape

from aiprof.errors import InputError

# Colour-blind-safe palette (Okabe & Ito, "Color Universal Design", 2002).
_PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")
_MARGIN_LEFT, _MARGIN_RIGHT, _MARGIN_TOP, _MARGIN_BOTTOM = 70, 20, 40, 90
_LEGEND_COLUMNS, _LEGEND_ROW = 3, 16  # legend entries per row; pixels between rows
_FONT = 'font-family="sans-serif"'


@dataclass(frozen=True)
class Series:
    """One named data series of a chart."""

    name: str
    """Legend label."""
    xs: Sequence[float]
    """X values, same length as ``ys``."""
    ys: Sequence[float]
    """Y values."""
    kind: Literal["line", "points", "step"] = "line"
    """``line`` joins points, ``points`` draws markers, ``step`` draws a post-step line."""


@dataclass(frozen=True)
class _Axis:
    lo: float
    hi: float
    log: bool
    pixel_lo: float
    pixel_hi: float

    def to_pixel(self, value: float) -> float:
        lo, hi, v = self.lo, self.hi, value
        if self.log:
            lo, hi, v = math.log10(lo), math.log10(hi), math.log10(value)
        frac = 0.5 if hi == lo else (v - lo) / (hi - lo)
        return self.pixel_lo + frac * (self.pixel_hi - self.pixel_lo)


def _fmt(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _label(value: float) -> str:
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
        return f"{value:.3g}"
    return f"{value:.6g}"


def _usable(value: float, log: bool) -> bool:
    return math.isfinite(value) and (value > 0 or not log)


def _range(values: list[float], log: bool) -> tuple[float, float]:
    if not values:
        return (1.0, 10.0) if log else (0.0, 1.0)
    lo, hi = min(values), max(values)
    if lo == hi:
        return (lo / 2, lo * 2) if log else (lo - 1, hi + 1)
    return lo, hi


def _ticks(lo: float, hi: float, log: bool) -> list[float]:
    if log:
        first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        step = max(1, (last - first) // 8)
        return [10.0**e for e in range(first, last + 1, step) if lo <= 10.0**e <= hi]
    raw = (hi - lo) / 6
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    start = math.ceil(lo / step) * step
    count = int(math.floor((hi - start) / step + 1e-9)) + 1
    return [start + i * step for i in range(count)]


def _points(series: Series, x: _Axis, y: _Axis) -> list[tuple[float, float]]:
    return [
        (x.to_pixel(float(a)), y.to_pixel(float(b)))
        for a, b in zip(series.xs, series.ys, strict=True)
        if _usable(float(a), x.log) and _usable(float(b), y.log)
    ]


def _path(points: list[tuple[float, float]], step: bool) -> str:
    head = [f"M{_fmt(points[0][0])},{_fmt(points[0][1])}"]
    if step:
        rest = [f"H{_fmt(px)} V{_fmt(py)}" for px, py in points[1:]]
    else:
        rest = [f"L{_fmt(px)},{_fmt(py)}" for px, py in points[1:]]
    return " ".join(head + rest)


def _series_svg(series: Series, color: str, x: _Axis, y: _Axis) -> list[str]:
    points = _points(series, x, y)
    title = f"<title>{escape(series.name)}</title>"
    if series.kind == "points":
        dots = "".join(f'<circle cx="{_fmt(px)}" cy="{_fmt(py)}" r="3"/>' for px, py in points)
        return [f'<g fill="{color}">{title}{dots}</g>']
    if not points:
        return []
    d = _path(points, series.kind == "step")
    return [f'<path d="{d}" fill="none" stroke="{color}" stroke-width="2">{title}</path>']


def _axes_svg(x: _Axis, y: _Axis) -> list[str]:
    out = [
        f'<line x1="{_fmt(x.pixel_lo)}" y1="{_fmt(y.pixel_lo)}" x2="{_fmt(x.pixel_hi)}" '
        f'y2="{_fmt(y.pixel_lo)}" stroke="#333"/>',
        f'<line x1="{_fmt(x.pixel_lo)}" y1="{_fmt(y.pixel_lo)}" x2="{_fmt(x.pixel_lo)}" '
        f'y2="{_fmt(y.pixel_hi)}" stroke="#333"/>',
    ]
    for tick in _ticks(x.lo, x.hi, x.log):
        px = _fmt(x.to_pixel(tick))
        out.append(
            f'<line x1="{px}" y1="{_fmt(y.pixel_lo)}" x2="{px}" y2="{_fmt(y.pixel_hi)}" '
            'stroke="#ddd"/>'
        )
        out.append(
            f'<text x="{px}" y="{_fmt(y.pixel_lo + 16)}" text-anchor="middle" '
            f'font-size="11" {_FONT}>{escape(_label(tick))}</text>'
        )
    for tick in _ticks(y.lo, y.hi, y.log):
        py = _fmt(y.to_pixel(tick))
        out.append(
            f'<line x1="{_fmt(x.pixel_lo)}" y1="{py}" x2="{_fmt(x.pixel_hi)}" y2="{py}" '
            'stroke="#ddd"/>'
        )
        out.append(
            f'<text x="{_fmt(x.pixel_lo - 6)}" y="{py}" text-anchor="end" '
            f'dominant-baseline="middle" font-size="11" {_FONT}>'
            f"{escape(_label(tick))}</text>"
        )
    return out


def _legend_svg(series: Sequence[Series], left: float, top: float) -> list[str]:
    out = []
    for i, s in enumerate(series):
        color = _PALETTE[i % len(_PALETTE)]
        col, row = i % _LEGEND_COLUMNS, i // _LEGEND_COLUMNS
        lx, ly = left + col * 190, top + row * _LEGEND_ROW
        out.append(
            f'<rect x="{_fmt(lx)}" y="{_fmt(ly - 8)}" width="12" height="8" fill="{color}"/>'
        )
        out.append(
            f'<text x="{_fmt(lx + 16)}" y="{_fmt(ly)}" font-size="11" {_FONT}>'
            f"{escape(s.name)}</text>"
        )
    return out


def _check(series: Sequence[Series], width: int, height: int) -> None:
    if width < 200 or height < 150:
        raise InputError(f"chart size {width}x{height} is too small: use at least 200x150")
    for s in series:
        if len(s.xs) != len(s.ys):
            raise InputError(f"series {s.name!r} has {len(s.xs)} x values but {len(s.ys)} y values")
        if s.kind not in ("line", "points", "step"):
            raise InputError(
                f"series {s.name!r}: kind must be line, points or step, not {s.kind!r}"
            )


def line_chart(
    series: Sequence[Series],
    *,
    title: str,
    x_label: str,
    y_label: str,
    x_log: bool = False,
    y_log: bool = False,
    width: int = 640,
    height: int = 400,
) -> str:
    """Render ``series`` as a self-contained SVG line chart and return the markup.

    Non-finite values, and values <= 0 on a log axis, are skipped. Raises ``InputError`` when a
    series has mismatched lengths or the size is too small.
    """
    _check(series, width, height)
    xs = [float(v) for s in series for v in s.xs if _usable(float(v), x_log)]
    ys = [float(v) for s in series for v in s.ys if _usable(float(v), y_log)]
    x_lo, x_hi = _range(xs, x_log)
    y_lo, y_hi = _range(ys, y_log)
    x = _Axis(x_lo, x_hi, x_log, _MARGIN_LEFT, width - _MARGIN_RIGHT)
    y = _Axis(y_lo, y_hi, y_log, height - _MARGIN_BOTTOM, _MARGIN_TOP)
    legend_top = y.pixel_lo + 58
    last_row = legend_top + (max(len(series), 1) - 1) // _LEGEND_COLUMNS * _LEGEND_ROW
    total = max(height, math.ceil(last_row + 10))  # grow the page so no legend row is cut
    body = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{total}" '
        f'viewBox="0 0 {width} {total}" role="img">',
        f"<title>{escape(title)}</title>",
        f'<rect width="{width}" height="{total}" fill="#fff"/>',
        f'<text x="{width / 2:g}" y="22" text-anchor="middle" font-size="15" {_FONT}>'
        f"{escape(title)}</text>",
        *_axes_svg(x, y),
        f'<text x="{_fmt((x.pixel_lo + x.pixel_hi) / 2)}" y="{_fmt(y.pixel_lo + 36)}" '
        f'text-anchor="middle" font-size="12" {_FONT}>{escape(x_label)}</text>',
        f'<text transform="translate(16,{_fmt((y.pixel_lo + y.pixel_hi) / 2)}) rotate(-90)" '
        f'text-anchor="middle" font-size="12" {_FONT}>{escape(y_label)}</text>',
    ]
    for i, s in enumerate(series):
        body.extend(_series_svg(s, _PALETTE[i % len(_PALETTE)], x, y))
    body.extend(_legend_svg(series, _MARGIN_LEFT, legend_top))
    body.append("</svg>")
    return "\n".join(body) + "\n"
