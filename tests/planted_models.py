"""Hostile model files for the refusal tests, planted as an attacker who can write a model
folder would: ``model.joblib`` replaced and the manifest's SHA-256 recomputed to match.

Every payload but the last few creates ``sentinel`` when unpickled by ``pickle`` or
``joblib``, so a test proves nothing ran by the file's absence.
"""

from __future__ import annotations

import builtins
import hashlib
import io
import json
import os
import pickle
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import joblib
import numpy as np

from autofe.modeling.artifact import MANIFEST_FILE, MODEL_FILE


class RunsCommand:
    """Unpickled, runs a shell command: the classic payload (``posix.system`` on Linux)."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[str]]:
        return os.system, (self.command,)


class RunsPython:
    """Unpickled, executes Python source."""

    def __init__(self, source: str) -> None:
        self.source = source

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[str]]:
        return builtins.exec, (self.source,)


def touch(sentinel: Path) -> RunsCommand:
    return RunsCommand(f"touch {shlex.quote(str(sentinel))}")


def call(module: str, name: str, *args: object) -> bytes:
    """A pickle calling ``module.name(*args)``, spelled by hand as ``pickle`` never would
    (a dotted name, a function of an allowed module): protocol 4 resolves dotted names."""
    body = pickle.dumps(args, protocol=2)[2:-1]  # the arguments, without PROTO and STOP
    return b"\x80\x04c" + f"{module}\n{name}\n".encode() + body + b"R."


PAYLOADS = (
    "os.system",
    "exec",
    "a dotted name in an allowed module",
    "a forbidden name of an allowed module",
    "an object array holding a payload",
    "a joblib file with an object array holding a payload",
)
"""The kinds :func:`payloads` plants, in order."""


def payloads(sentinel: Path, scratch: Path) -> dict[str, tuple[bytes, str]]:
    """Pickles creating ``sentinel`` when loaded, each with the refusal the allow-list gives.

    ``scratch`` is a folder for the one payload that needs a second file (a ``.npy``).
    """
    npy = scratch / "payload.npy"
    np.save(npy, np.array([touch(sentinel)], dtype=object), allow_pickle=True)
    joblib_file = io.BytesIO()
    joblib.dump({"model": np.array([touch(sentinel)], dtype=object)}, joblib_file)
    source = f"open({str(sentinel)!r}, 'w').close()"
    return {
        "os.system": (pickle.dumps(touch(sentinel)), r"references posix\.system"),
        "exec": (pickle.dumps(RunsPython(source)), r"references builtins\.exec"),
        "a dotted name in an allowed module": (
            call("autofe.modeling.artifact", "os.system", f"touch {sentinel}"),
            r"references autofe\.modeling\.artifact\.os\.system",
        ),
        "a forbidden name of an allowed module": (
            call("numpy", "load", str(npy), None, True),
            r"references numpy\.load",
        ),
        "an object array holding a payload": (
            pickle.dumps(np.array([1.5, touch(sentinel)], dtype=object)),
            r"references posix\.system",
        ),
        "a joblib file with an object array holding a payload": (
            joblib_file.getvalue(),
            r"references joblib\.numpy_pickle\.NumpyArrayWrapper",
        ),
    }


def plant(folder: Path, data: bytes) -> None:
    """Replace the model in ``folder`` with ``data``; the manifest's hash made to match."""
    (folder / MODEL_FILE).write_bytes(data)
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    manifest["sha256"] = hashlib.sha256(data).hexdigest()
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest))


def copy_model(source: Path, folder: Path) -> Path:
    """A copy of the model folder ``source`` at ``folder`` (its files only)."""
    folder.mkdir(parents=True)
    for name in (MODEL_FILE, MANIFEST_FILE):
        (folder / name).write_bytes((source / name).read_bytes())
    return folder
