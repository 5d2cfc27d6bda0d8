"""Charts as inline SVG strings, for pages that must work offline and without JavaScript.

The run report (a file a user opens from disk or mails around) and the ``/ui`` dashboard of
``autofe serve`` draw the same few chart kinds: points or lines against time or against each
other, optionally on log axes and with an interval per point, and horizontal bars. Drawing them
here as plain SVG keeps both pages self-contained (no CDN, no vendored JavaScript, no image
files) and keeps page rendering cheap enough for the dashboard's latency budget. Non-finite
values (and non-positive ones on a log axis) are skipped rather than breaking the chart.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b")
"""Series colours in order (matplotlib's defaults, distinguishable in print)."""

MARKED_LINE_POINTS = 60
"""A line with this few points also marks each one: a line through one point draws nothing,
and through a handful it hides which values were measured."""

_MARGIN = (56, 16, 28, 44)
"""Plot margins in pixels: left, right, top, bottom (room for ticks, title and labels)."""


@dataclass(frozen=True)
class Series:
    """One named series; for time charts ``x`` is POSIX seconds."""

    name: str
    x: Sequence[float]
    y: Sequence[float]
    low: Sequence[float] | None = None
    high: Sequence[float] | None = None
    style: Literal["points", "line"] = "points"


@dataclass(frozen=True)
class _Axis:
    """A data range mapped onto a pixel range, linear or logarithmic."""

    lo: float
    hi: float
    start: float
    stop: float
    log: bool

    def __call__(self, value: float) -> float:
        if self.log:
            v, lo, hi = math.log10(value), math.log10(self.lo), math.log10(self.hi)
        else:
            v, lo, hi = value, self.lo, self.hi
        share = 0.5 if hi == lo else (v - lo) / (hi - lo)
        return self.start + share * (self.stop - self.start)

    def ticks(self) -> list[float]:
        """Powers of ten on a log axis, about five round steps on a linear one."""
        if self.log:
            first, last = math.floor(math.log10(self.lo)), math.ceil(math.log10(self.hi))
            return [10.0**e for e in range(first, last + 1) if self.lo <= 10.0**e <= self.hi]
        if self.hi == self.lo:
            return [self.lo]
        raw = (self.hi - self.lo) / 5
        step = 10 ** math.floor(math.log10(raw))
        step *= next(m for m in (1, 2, 5, 10) if step * m >= raw)
        first = math.ceil(self.lo / step) * step
        return [first + i * step for i in range(int((self.hi - first) / step + 1e-9) + 1)]


def chart_svg(
    series: Sequence[Series],
    *,
    title: str,
    x_label: str,
    y_label: str,
    log_x: bool = False,
    log_y: bool = False,
    x_time: bool = False,
    diagonal: bool = False,
    hlines: Sequence[tuple[float, str]] = (),
    y_format: str = "{:g}",
    width: int = 640,
    height: int = 320,
) -> str:
    """Points or lines (with optional per-point intervals) on linear, log or time axes.

    ``diagonal`` draws y = x (predicted against actual); ``hlines`` draws labelled threshold
    lines (alert levels). With no drawable point the chart says "no data yet".
    """
    clean = [_finite(s, log_x, log_y) for s in series]
    xs = [v for s in clean for v in s.x]
    ys = [v for s in clean for v in (*s.y, *(s.low or ()), *(s.high or ()))]
    ys += [y for y, _ in hlines if math.isfinite(y) and (y > 0 or not log_y)]
    if diagonal:
        xs, ys = xs + ys, ys + xs
    if not xs or not ys:
        return _frame(
            title,
            width,
            height,
            '<text class="empty" x="50%" y="50%" text-anchor="middle">no data yet</text>',
        )
    left, right, top, bottom = _MARGIN
    x_axis = _Axis(*_span(xs, log_x), left, width - right, log_x)
    y_axis = _Axis(*_span(ys, log_y), height - bottom, top, log_y)
    x_format = _time_format(x_axis) if x_time else _number
    body = [
        _axes(x_axis, y_axis, x_format, lambda v: _number(v, y_format), width, height),
        _labels(x_label, y_label, width, height),
    ]
    if diagonal:
        lo, hi = max(x_axis.lo, y_axis.lo), min(x_axis.hi, y_axis.hi)
        body.append(_line_el("diagonal", x_axis(lo), y_axis(lo), x_axis(hi), y_axis(hi)))
    body += [_hline(y, label, x_axis, y_axis) for y, label in hlines if y in ys]
    body += [_series_el(s, COLOURS[i % len(COLOURS)], x_axis, y_axis) for i, s in enumerate(clean)]
    body.append(_legend([s.name for s in clean], width))
    return _frame(title, width, height, "".join(body))


def bars_svg(
    labels: Sequence[str],
    values: Sequence[float],
    *,
    title: str,
    value_format: str = "{:.1%}",
    width: int = 640,
) -> str:
    """Horizontal bars, one per label, longest scale = the largest finite value."""
    rows = [(lab, v) for lab, v in zip(labels, values, strict=True) if math.isfinite(v)]
    height = 28 + 22 * max(len(rows), 1)
    if not rows:
        return _frame(
            title,
            width,
            height,
            '<text class="empty" x="50%" y="50%" text-anchor="middle">no data yet</text>',
        )
    top = max(max(v for _, v in rows), 0.0) or 1.0
    label_w, value_w = 180, 70
    scale = (width - label_w - value_w) / top
    bars = []
    for i, (label, value) in enumerate(rows):
        y = 20 + 22 * i
        bars.append(
            f'<g class="bar"><text x="{label_w - 6}" y="{y + 13}" text-anchor="end">'
            f"{_esc(_shorten(label, 28))}<title>{_esc(label)}</title></text>"
            f'<rect x="{label_w}" y="{y}" width="{max(value, 0.0) * scale:.1f}" height="16" '
            f'fill="{COLOURS[0]}"/><text x="{label_w + max(value, 0.0) * scale + 4:.1f}" '
            f'y="{y + 13}">{_esc(_number(value, value_format))}</text></g>'
        )
    return _frame(title, width, height, "".join(bars))


def _finite(s: Series, log_x: bool, log_y: bool) -> Series:
    """``s`` without the points that cannot be drawn on these axes."""

    def ok(v: float | None, log: bool) -> bool:
        return v is not None and math.isfinite(v) and (v > 0 or not log)

    n = len(s.x)
    low, high = s.low or [math.nan] * n, s.high or [math.nan] * n
    keep = [i for i in range(n) if ok(s.x[i], log_x) and ok(s.y[i], log_y)]
    has_bounds = s.low is not None and s.high is not None
    bounded = [i for i in keep if ok(low[i], log_y) and ok(high[i], log_y)] if has_bounds else []
    if has_bounds and len(bounded) == len(keep):
        return Series(
            s.name,
            [s.x[i] for i in keep],
            [s.y[i] for i in keep],
            [low[i] for i in keep],
            [high[i] for i in keep],
            s.style,
        )
    return Series(s.name, [s.x[i] for i in keep], [s.y[i] for i in keep], style=s.style)


def _span(values: Sequence[float], log: bool) -> tuple[float, float]:
    """The axis range: the data's, padded a little so no point sits on the frame."""
    lo, hi = min(values), max(values)
    if log:
        return lo / 1.15, hi * 1.15
    pad = (hi - lo) * 0.05 or abs(hi) * 0.05 or 1.0
    return lo - pad, hi + pad


def _axes(
    x: _Axis, y: _Axis, fx: Callable[[float], str], fy: Callable[[float], str], w: int, h: int
) -> str:
    left, right, top, bottom = _MARGIN
    parts = [
        f'<rect class="frame" x="{left}" y="{top}" width="{w - left - right}" '
        f'height="{h - top - bottom}" fill="none" stroke="#999"/>'
    ]
    for t in x.ticks():
        px = x(t)
        anchor = "end" if px > w - right - 40 else "middle"  # a label must not leave the chart
        parts.append(
            f'<line class="tick" x1="{px:.1f}" y1="{h - bottom}" x2="{px:.1f}" '
            f'y2="{h - bottom + 4}" stroke="#999"/><text class="tick-label" '
            f'x="{px:.1f}" y="{h - bottom + 16}" text-anchor="{anchor}">{_esc(fx(t))}</text>'
        )
    for t in y.ticks():
        py = y(t)
        parts.append(
            f'<line class="grid" x1="{left}" y1="{py:.1f}" x2="{w - right}" '
            f'y2="{py:.1f}" stroke="#eee"/><text class="tick-label" x="{left - 4}" '
            f'y="{py + 4:.1f}" text-anchor="end">{_esc(fy(t))}</text>'
        )
    return "".join(parts)


def _labels(x_label: str, y_label: str, w: int, h: int) -> str:
    top = _MARGIN[2]
    return (
        f'<text class="axis-label" x="{w / 2:.0f}" y="{h - 6}" text-anchor="middle">'
        f'{_esc(x_label)}</text><text class="axis-label" x="12" y="{top + (h - top) / 2:.0f}" '
        f'text-anchor="middle" transform="rotate(-90 12 {top + (h - top) / 2:.0f})">'
        f"{_esc(y_label)}</text>"
    )


def _series_el(s: Series, colour: str, x: _Axis, y: _Axis) -> str:
    parts = []
    if s.low is not None and s.high is not None:
        parts += [
            f'<line class="interval" x1="{x(px):.1f}" y1="{y(lo):.1f}" x2="{x(px):.1f}" '
            f'y2="{y(hi):.1f}" stroke="{colour}" stroke-opacity="0.35"/>'
            for px, lo, hi in zip(s.x, s.low, s.high, strict=True)
        ]
    if s.style == "line" and s.x:
        ordered = sorted(zip(s.x, s.y, strict=True))  # a line runs left to right
        points = " ".join(f"{x(a):.1f},{y(b):.1f}" for a, b in ordered)
        parts.append(
            f'<path class="line" d="M{points.replace(" ", " L")}" fill="none" '
            f'stroke="{colour}" stroke-width="1.5"/>'
        )
    if s.style == "points" or len(s.x) <= MARKED_LINE_POINTS:
        parts += [
            f'<circle class="point" cx="{x(a):.1f}" cy="{y(b):.1f}" r="2.5" fill="{colour}"/>'
            for a, b in zip(s.x, s.y, strict=True)
        ]
    return f'<g class="series" data-name="{_esc(s.name)}">{"".join(parts)}</g>'


def _hline(value: float, label: str, x: _Axis, y: _Axis) -> str:
    py = y(value)
    return (
        f'<g class="threshold"><line x1="{x.start}" y1="{py:.1f}" x2="{x.stop}" '
        f'y2="{py:.1f}" stroke="#d62728" stroke-dasharray="4 3"/><text x="{x.stop - 4}" '
        f'y="{py - 3:.1f}" text-anchor="end" fill="#d62728">{_esc(label)}</text></g>'
    )


def _legend(names: Sequence[str], width: int) -> str:
    items = [
        f'<g class="legend-item"><rect x="{_MARGIN[0] + 150 * i}" y="6" width="10" '
        f'height="10" fill="{COLOURS[i % len(COLOURS)]}"/><text x="{_MARGIN[0] + 150 * i + 14}" '
        f'y="15">{_esc(_shorten(name, 22))}</text></g>'
        for i, name in enumerate(names)
        if _MARGIN[0] + 150 * i < width - 60
    ]
    return f'<g class="legend">{"".join(items)}</g>'


def _line_el(cls: str, x1: float, y1: float, x2: float, y2: float) -> str:
    return (
        f'<line class="{cls}" x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
        f'stroke="#777" stroke-dasharray="2 2"/>'
    )


def _frame(title: str, width: int, height: int, body: str) -> str:
    return (
        f'<svg class="chart" role="img" xmlns="http://www.w3.org/2000/svg" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'font-family="sans-serif" font-size="11"><title>{_esc(title)}</title>{body}</svg>'
    )


def _time_format(axis: _Axis) -> Callable[[float], str]:
    """Dates when the axis spans days, hours and minutes when it spans less."""
    pattern = "%Y-%m-%d" if axis.hi - axis.lo > 2 * 86400 else "%m-%d %H:%M"
    return lambda v: datetime.fromtimestamp(v, UTC).strftime(pattern)


def _number(value: float, pattern: str = "{:g}") -> str:
    if pattern == "{:g}" and abs(value) >= 10000:
        return f"{value:.3g}"
    return pattern.format(value)


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _esc(text: str) -> str:
    return html.escape(text, quote=True)
