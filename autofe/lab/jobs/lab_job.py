"""A recurring lab job: its script, the tables it reads, its schedule and its parameters."""

from __future__ import annotations

import random
from dataclasses import dataclass
from importlib.resources import files
from typing import Literal

from autofe.lab.jobs.params import Param

Kind = Literal["sql", "pyspark"]
Schedule = Literal["daily", "hourly", "weekly", "adhoc"]


@dataclass(frozen=True)
class LabJob:
    """One recurring job of the workload lab.

    ``script`` is Spark SQL (one query, or ``;``-separated statements whose last one is the query
    whose result is forced) or Python source defining ``run(spark, params)``; both use
    ``${key}`` placeholders filled from :meth:`params` plus the runner's ``${scratch}``.
    ``variants`` are later versions of the script (the "occasional script change"); ``tables``
    is the union of what the script and its variants read.
    """

    name: str
    kind: Kind
    script: str
    tables: tuple[str, ...]
    schedule: Schedule
    description: str
    variants: tuple[str, ...] = ()
    spec: tuple[Param, ...] = ()

    def params(self, rng: random.Random, day: int) -> dict[str, str]:
        """Parameters of the run on virtual ``day``; deterministic given the state of ``rng``.

        Args:
            rng: the run's generator; consumed in a fixed order.
            day: the virtual day (0-based), which moves recurring jobs' date windows.

        Returns:
            ``${key}`` values; dates are ``YYYY-MM-DD``.
        """
        drawn: dict[str, str] = {}
        for param in self.spec:
            drawn.update(param.draw(rng, day))
        return drawn


def load_scripts(name: str, kind: Kind) -> tuple[str, tuple[str, ...]]:
    """The script of job ``name`` and its variants, read from this package's data.

    SQL lives in ``sql/<name>.sql`` (variants ``sql/<name>.v2.sql``, ...); PySpark in
    ``pyspark/<name>.py`` (variants ``pyspark/<name>_v2.py``, ...).
    """
    folder = files("autofe.lab.jobs") / kind
    ext, sep = (".sql", ".v") if kind == "sql" else (".py", "_v")
    script = (folder / f"{name}{ext}").read_text(encoding="utf-8")
    variants: list[str] = []
    while (path := folder / f"{name}{sep}{len(variants) + 2}{ext}").is_file():
        variants.append(path.read_text(encoding="utf-8"))
    return script, tuple(variants)


def make_job(
    name: str,
    kind: Kind,
    tables: tuple[str, ...],
    schedule: Schedule,
    description: str,
    *spec: Param,
) -> LabJob:
    """A :class:`LabJob` whose script and variants come from the package's script files."""
    script, variants = load_scripts(name, kind)
    return LabJob(name, kind, script, tables, schedule, description, variants, spec)
