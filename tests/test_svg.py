"""The inline SVG charts: well-formed, every drawable point drawn, nothing else."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

from autofe.svg import Series, bars_svg, chart_svg

NS = "{http://www.w3.org/2000/svg}"


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def _count(root: ET.Element, tag: str, cls: str) -> int:
    return sum(1 for e in root.iter(NS + tag) if e.get("class") == cls)


def test_points_with_intervals_on_log_axes_skip_what_cannot_be_drawn() -> None:
    actual = [10.0, 100.0, 1000.0, -5.0, math.nan]
    series = Series(
        "model", actual, [12.0, 90.0, 1100.0, 3.0, 4.0], [8, 70, 900, 1, 2], [15, 120, 1300, 5, 6]
    )
    root = _parse(
        chart_svg(
            [series],
            title="p vs a <1>",
            x_label="actual s",
            y_label="predicted s",
            log_x=True,
            log_y=True,
            diagonal=True,
        )
    )
    assert root.get("class") == "chart"
    assert root.find(NS + "title").text == "p vs a <1>"  # type: ignore[union-attr]
    assert _count(root, "circle", "point") == 3  # the negative and the NaN run are skipped
    assert _count(root, "line", "interval") == 3
    assert _count(root, "line", "diagonal") == 1
    ticks = [e.text for e in root.iter(NS + "text") if e.get("class") == "tick-label"]
    assert {"10", "100", "1000"} <= set(ticks)


def test_points_are_placed_in_order_inside_the_frame() -> None:
    root = _parse(
        chart_svg(
            [Series("a", [0, 1, 2], [0, 5, 10])],
            title="t",
            x_label="x",
            y_label="y",
            width=400,
            height=200,
        )
    )
    xs = [float(c.get("cx", "nan")) for c in root.iter(NS + "circle")]
    ys = [float(c.get("cy", "nan")) for c in root.iter(NS + "circle")]
    assert xs == sorted(xs) and ys == sorted(ys, reverse=True)  # SVG's y grows downwards
    assert all(56 <= x <= 400 - 16 for x in xs) and all(28 <= y <= 200 - 44 for y in ys)


def test_time_axis_lines_and_threshold() -> None:
    day = 86400.0
    line = Series(
        "rolling MAPE", [1.7e9 + i * day for i in range(10)], [0.2] * 9 + [0.4], style="line"
    )
    svg = chart_svg(
        [line],
        title="t",
        x_label="time",
        y_label="MAPE",
        x_time=True,
        hlines=[(0.3, "alert 30 %")],
        y_format="{:.0%}",
    )
    root = _parse(svg)
    assert _count(root, "path", "line") == 1
    assert "alert 30 %" in svg and "2023-11-1" in svg


def test_empty_chart_and_bars_say_no_data() -> None:
    assert "no data yet" in chart_svg([Series("a", [], [])], title="t", x_label="x", y_label="y")
    assert "no data yet" in bars_svg([], [], title="t")


def test_bars_escape_labels_and_format_values() -> None:
    svg = bars_svg(["job <a>", "job b"], [0.25, 0.5], title="error by job")
    root = _parse(svg)
    widths = [float(r.get("width", "nan")) for r in root.iter(NS + "rect")]
    assert widths[1] == 2 * widths[0] > 0
    assert "job &lt;a&gt;" in svg and "50.0%" in svg


def test_a_line_is_drawn_left_to_right_whatever_the_input_order() -> None:
    root = _parse(
        chart_svg(
            [Series("a", [2, 0, 1], [1, 3, 2], style="line")], title="t", x_label="x", y_label="y"
        )
    )
    path = next(e for e in root.iter(NS + "path") if e.get("class") == "line")
    xs = [float(p.split(",")[0]) for p in path.get("d", "").replace("M", "").split(" L")]
    assert xs == sorted(xs)


def test_a_short_line_marks_its_points_so_one_point_is_visible() -> None:
    root = _parse(
        chart_svg([Series("a", [1.0], [2.0], style="line")], title="t", x_label="x", y_label="y")
    )
    assert _count(root, "circle", "point") == 1
    long = Series("b", list(range(100)), list(range(100)), style="line")
    root = _parse(chart_svg([long], title="t", x_label="x", y_label="y"))
    assert _count(root, "circle", "point") == 0 and _count(root, "path", "line") == 1
