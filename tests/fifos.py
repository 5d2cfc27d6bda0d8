"""FIFOs that cannot hang a test: any reader that opens one sees end of file at once.

Opening a FIFO for reading waits for a writer, so code that still opened one would hang its
test; with a releaser running it fails instead, and the FIFOs it opened are counted.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def released(*fifos: Path) -> Iterator[list[Path]]:
    """Give every reader that opens one of ``fifos`` end of file; yields the FIFOs so opened."""
    for fifo in fifos:
        os.mkfifo(fifo)
    opened: list[Path] = []
    done = threading.Event()

    def release() -> None:
        while not done.is_set():
            for fifo in fifos:
                try:  # succeeds only while a reader has it open
                    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                except OSError:
                    continue
                os.close(fd)
                opened.append(fifo)
            done.wait(0.02)

    thread = threading.Thread(target=release, daemon=True)
    thread.start()
    try:
        yield opened
    finally:
        done.set()
        thread.join()
