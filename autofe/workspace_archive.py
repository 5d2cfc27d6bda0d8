"""Ship a workspace as one solid archive and unpack it into a cache on first use.

A lab workspace is hundreds of Spark event logs, each compressed on its own (as cluster log
delivery does). Runs of the same job write nearly identical logs, which per-file compression
cannot exploit: the 407 logs of a scale-factor-10 lab workspace take 23 MB as ``.zstd`` files
and 6.4 MB as one zstd stream with a long window. So the shipped example is
``workspace.tar.zst``: a tar of the workspace in which every ``.zstd`` event log is stored
decompressed (marked with the PAX header ``autofe.codec=zstd``), the whole compressed once.
Unpacking writes the workspace layout back, recompressing the marked logs (zstd level 3; their
content is byte-for-byte what Spark wrote), into ``<cache>/<name>-<archive sha256 prefix>/``,
atomically, once per archive version.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import zstandard

from autofe.errors import ConfigError
from autofe.hashing import file_sha256

ARCHIVE_NAME = "workspace.tar.zst"
CODEC_HEADER = "autofe.codec"
COMPLETE_MARKER = ".complete"
WINDOW_LOG = 27
UNPACK_LEVEL = 3
_LOG_SUFFIXES = (".zstd", ".zst")


@dataclass(frozen=True)
class PackReport:
    """What :func:`pack_workspace` wrote."""

    archive: Path
    files: int
    bytes_in: int
    bytes_out: int
    sha256: str


def pack_workspace(src: Path, out: Path, level: int = 19) -> PackReport:
    """Write ``src`` (a workspace folder) as one deterministic ``.tar.zst`` at ``out``.

    Entries are sorted, with zeroed owners and times, so the same workspace packs to the same
    bytes. Hidden entries (``.data`` caches) and an archive already inside ``src`` are left out.
    """
    if not (src / "runs").is_dir():
        raise ConfigError(f"{src}: not a workspace (no runs/ folder) — nothing to pack")
    files = _workspace_files(src)
    out.parent.mkdir(parents=True, exist_ok=True)
    params = zstandard.ZstdCompressionParameters.from_level(
        level, window_log=WINDOW_LOG, enable_ldm=True
    )
    partial = out.with_name(out.name + ".partial")
    bytes_in = 0
    with partial.open("wb") as fh:
        writer = zstandard.ZstdCompressor(compression_params=params).stream_writer(fh)
        with tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for path in files:
                bytes_in += _add(tar, src, path)
        writer.flush(zstandard.FLUSH_FRAME)
    os.replace(partial, out)
    return PackReport(out, len(files), bytes_in, out.stat().st_size, file_sha256(out))


def _workspace_files(src: Path) -> list[Path]:
    """Regular files under ``src`` in a stable order, without hidden entries or archives."""
    found = []
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if any(part.startswith(".") for part in rel.parts) or path.name == ARCHIVE_NAME:
            continue
        if path.is_file():
            found.append(path)
    return found


def _add(tar: tarfile.TarFile, src: Path, path: Path) -> int:
    """Add one file, a compressed event log as its decompressed content; returns bytes added."""
    data = path.read_bytes()
    info = tarfile.TarInfo(path.relative_to(src).as_posix())
    if path.suffix in _LOG_SUFFIXES:
        data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read()
        info.pax_headers = {CODEC_HEADER: "zstd"}
    info.size, info.mode, info.mtime = len(data), 0o644, 0
    tar.addfile(info, io.BytesIO(data))
    return len(data)


def unpack_workspace(archive: Path, cache_root: Path) -> Path:
    """The unpacked folder of ``archive`` under ``cache_root``, unpacking it on first use.

    The folder name carries the archive's hash, so a new archive version unpacks afresh and an
    old one is never reused; a half-finished unpack (crash, Ctrl-C) is never seen, because the
    folder appears by one rename after its ``.complete`` marker is written.
    """
    if not archive.is_file():
        raise ConfigError(f"{archive}: workspace archive not found")
    name = archive.parent.name if archive.name == ARCHIVE_NAME else archive.name.split(".")[0]
    target = cache_root / f"{name}-{file_sha256(archive)[:16]}"
    if (target / COMPLETE_MARKER).is_file():
        return target
    cache_root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=cache_root))
    try:
        _extract(archive, staging)
        (staging / COMPLETE_MARKER).write_text(archive.name + "\n")
        _publish(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _publish(staging: Path, target: Path) -> None:
    """Move the finished folder into place; a concurrent unpack that won the race is kept."""
    if target.exists() and not (target / COMPLETE_MARKER).is_file():
        shutil.rmtree(target, ignore_errors=True)
    try:
        os.replace(staging, target)
    except OSError:
        if not (target / COMPLETE_MARKER).is_file():
            raise


def _extract(archive: Path, dest: Path) -> None:
    """Write every member below ``dest``; anything but a plain relative file path is refused."""
    try:
        for info, data in _members(archive):
            path = dest / _safe_name(archive, info.name)
            path.parent.mkdir(parents=True, exist_ok=True)
            if info.pax_headers.get(CODEC_HEADER) == "zstd":
                data = zstandard.ZstdCompressor(level=UNPACK_LEVEL).compress(data)
            path.write_bytes(data)
    except (tarfile.TarError, zstandard.ZstdError, EOFError) as exc:
        raise ConfigError(f"{archive}: not a readable workspace archive ({exc})") from exc


def _members(archive: Path) -> Iterator[tuple[tarfile.TarInfo, bytes]]:
    """Regular-file members and their bytes, streamed (the archive is read once)."""
    with archive.open("rb") as fh:
        decompressor = zstandard.ZstdDecompressor(max_window_size=1 << WINDOW_LOG)
        reader = decompressor.stream_reader(fh)
        with tarfile.open(fileobj=reader, mode="r|") as tar:
            for info in tar:
                if info.isdir():
                    continue
                if not info.isfile():
                    raise ConfigError(f"{archive}: member {info.name!r} is not a plain file")
                extracted = tar.extractfile(info)
                yield info, extracted.read() if extracted else b""


def _safe_name(archive: Path, name: str) -> PurePosixPath:
    """A member name that stays inside the destination (no absolute paths, no ``..``)."""
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise ConfigError(f"{archive}: member {name!r} would be written outside the workspace")
    return path


def resolve_workspace(path: Path, cache_root: Path) -> Path:
    """``path`` itself, or its unpacked archive when it is a packed workspace folder.

    A packed workspace folder holds ``workspace.tar.zst`` (and usually a README) but no
    ``runs/``; every command that takes a workspace accepts it as it is.
    """
    if path.is_dir() and not (path / "runs").exists() and (path / ARCHIVE_NAME).is_file():
        return unpack_workspace(path / ARCHIVE_NAME, cache_root)
    return path
