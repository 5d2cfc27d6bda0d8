"""Worker processes that parse event logs in parallel (parsing is CPU-bound)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager
from multiprocessing import get_context

PARSER_MODULE = "autofe.tools.event_log"


@contextmanager
def parser_pool(workers: int) -> Iterator[Executor | None]:
    """Start ``workers`` parser processes, or yield None to parse in this process.

    Workers come from a ``forkserver`` that has imported only the parser: forking this process
    instead would copy DuckDB's and Arrow's running threads (a deadlock risk), and ``spawn``
    would re-import everything in every worker. The server outlives the pool, so later pools
    start in milliseconds.
    """
    if workers <= 1:
        yield None
        return
    context = get_context("forkserver")
    context.set_forkserver_preload([PARSER_MODULE])
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        yield pool
