"""The workload lab's recurring jobs over TPC-H (SQL analytics, ETL with writes, PySpark / ML).

The runner renders a job's script with :func:`render` and runs it on local PySpark; the jobs
are chosen so runtime is hard to guess from static metadata (pruning, skew, shuffles, windows).
"""

from __future__ import annotations

from string import Template

from autofe.errors import ConfigError
from autofe.lab.jobs.catalog import JOBS
from autofe.lab.jobs.lab_job import LabJob

__all__ = ["JOBS", "LabJob", "job", "render"]

_BY_NAME = {j.name: j for j in JOBS}


def job(name: str) -> LabJob:
    """The lab job called ``name``.

    Raises:
        ConfigError: no job has that name.

    >>> job("co_purchased_parts").kind
    'sql'
    """
    try:
        return _BY_NAME[name]
    except KeyError:
        known = ", ".join(sorted(_BY_NAME))
        raise ConfigError(f"unknown lab job {name!r}; known: {known}") from None


def render(script: str, params: dict[str, str]) -> str:
    """``script`` with every ``${key}`` replaced; a missing key raises ``KeyError``.

    >>> render("SELECT * FROM t WHERE d >= DATE '${start}'", {"start": "1994-01-01"})
    "SELECT * FROM t WHERE d >= DATE '1994-01-01'"
    """
    return Template(script).substitute(params)
