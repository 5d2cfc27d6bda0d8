"""What every benchmark shares: the machine line, percentiles, and results.md sections."""

from __future__ import annotations

import argparse
import math
import os
import platform
import re
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path


def _cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.machine()
    names = [ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")]
    return names[0] if names else platform.machine()


def commit() -> str:
    """The checkout's short commit hash ("" outside a git checkout)."""
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    return done.stdout.strip()


def machine() -> str:
    """One line naming the machine a number was measured on."""
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    python = platform.python_version()
    return f"{os.cpu_count()} cores ({_cpu_model()}), {mem:.0f} GiB, Python {python}"


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile.

    >>> percentile([3.0, 1.0, 2.0, 4.0], 0.5), percentile([3.0, 1.0, 2.0, 4.0], 0.9)
    (2.0, 4.0)
    """
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def write_section(path: Path, name: str, body: str) -> None:
    """Replace the ``<!-- name:begin -->…<!-- name:end -->`` block of a results file."""
    text = path.read_text() if path.exists() else "# Measured results\n"
    block = f"<!-- {name}:begin -->\n{body}<!-- {name}:end -->"
    pattern = re.compile(rf"<!-- {name}:begin -->.*?<!-- {name}:end -->", re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else f"{text}\n{block}\n"
    path.write_text(text)


def run_and_write(
    section: str, args: argparse.Namespace, run: Callable[[Path, argparse.Namespace], str]
) -> None:
    """Run a benchmark in a scratch folder, print its section and, with ``--write FILE``,
    replace that section of the results file."""
    with tempfile.TemporaryDirectory() as tmp:
        body = run(Path(tmp), args)
    print(body)
    if args.write:
        write_section(args.write, section, body)
