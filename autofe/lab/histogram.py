"""The runtime histogram of a workspace as a PNG (log-spaced bins: runtimes span decades)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path

from autofe.errors import ConfigError


def write_histogram(durations: Sequence[float], path: Path, title: str) -> Path:
    """Plot ``durations`` (seconds) with the median marked; needs matplotlib (``lab`` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError as exc:
        raise ConfigError("the histogram needs matplotlib: pip install 'autofe[lab]'") from exc
    if not durations:
        raise ConfigError("no successful runs to plot")
    low, high = math.log10(min(durations)), math.log10(max(durations))
    bins = [10 ** (low + (high - low) * i / 30) for i in range(31)]
    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=110)
    ax.hist(durations, bins=bins, color="#4c72b0", edgecolor="white")
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:g}"))
    median = statistics.median(durations)
    ax.axvline(median, color="#c44e52", linestyle="--", label=f"median {median:.1f} s")
    ax.set_xlabel("run duration (s, log scale)")
    ax.set_ylabel("runs")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
