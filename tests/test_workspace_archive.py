"""Packed workspaces: pack, unpack into a cache, and read them wherever a workspace is taken."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest
import zstandard
from typer.testing import CliRunner

from autofe.cli import app
from autofe.errors import ConfigError
from autofe.workspace_archive import (
    ARCHIVE_NAME,
    COMPLETE_MARKER,
    pack_workspace,
    resolve_workspace,
    unpack_workspace,
)

MINI = Path(__file__).resolve().parents[1] / "examples" / "workspaces" / "mini"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The mini workspace with its event log delivered as a zstd-compressed rolled part."""
    ws = tmp_path / "ws"
    shutil.copytree(MINI, ws)
    (log,) = ws.glob("cluster-logs/*/eventlog/*/*/eventlog")
    rolled = log.with_name("eventlog-2024-02-14--02-00.zstd")
    rolled.write_bytes(zstandard.ZstdCompressor(level=19).compress(log.read_bytes()))
    log.unlink()
    (ws / ".data").mkdir()
    (ws / ".data" / "cache.bin").write_bytes(b"not shipped")
    return ws


def _files(root: Path) -> dict[str, bytes]:
    """Every file below ``root`` (compressed logs as their content), hidden entries left out."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not rel.startswith(".") and path.name != ARCHIVE_NAME:
            data = path.read_bytes()
            if path.suffix == ".zstd":
                data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read()
            out[rel] = data
    return out


def test_pack_then_unpack_gives_back_every_file_and_log_content(
    workspace: Path, tmp_path: Path
) -> None:
    report = pack_workspace(workspace, tmp_path / "a" / ARCHIVE_NAME)
    assert report.files == len(_files(workspace)) == 12
    assert report.bytes_out == report.archive.stat().st_size < report.bytes_in
    unpacked = unpack_workspace(report.archive, tmp_path / "cache")
    assert unpacked.name == f"a-{report.sha256[:16]}"
    assert (unpacked / COMPLETE_MARKER).is_file()
    assert _files(unpacked) == _files(workspace)
    assert not (unpacked / ".data").exists()


def test_packing_is_deterministic_and_unpacking_happens_once(
    workspace: Path, tmp_path: Path
) -> None:
    first = pack_workspace(workspace, tmp_path / "one.tar.zst")
    second = pack_workspace(workspace, tmp_path / "two.tar.zst")
    assert first.sha256 == second.sha256
    cache = tmp_path / "cache"
    unpacked = unpack_workspace(first.archive, cache)
    marker = (unpacked / COMPLETE_MARKER).stat().st_mtime_ns
    assert unpack_workspace(first.archive, cache) == unpacked
    assert (unpacked / COMPLETE_MARKER).stat().st_mtime_ns == marker
    assert [p.name for p in cache.iterdir()] == [unpacked.name]


def test_a_half_written_unpack_is_redone(workspace: Path, tmp_path: Path) -> None:
    report = pack_workspace(workspace, tmp_path / ARCHIVE_NAME)
    cache = tmp_path / "cache"
    unpacked = unpack_workspace(report.archive, cache)
    (unpacked / COMPLETE_MARKER).unlink()
    shutil.rmtree(unpacked / "runs")
    again = unpack_workspace(report.archive, cache)
    assert again == unpacked and _files(again) == _files(workspace)


def test_resolve_unpacks_a_packed_folder_and_leaves_others_alone(
    workspace: Path, tmp_path: Path
) -> None:
    packed = tmp_path / "packed"
    pack_workspace(workspace, packed / ARCHIVE_NAME)
    (packed / "README.md").write_text("how it was made\n")
    resolved = resolve_workspace(packed, tmp_path / "cache")
    assert resolved.parent == tmp_path / "cache" and (resolved / "runs").is_dir()
    assert resolve_workspace(workspace, tmp_path / "cache") == workspace
    log = next(workspace.rglob("*.zstd"))
    assert resolve_workspace(log, tmp_path / "cache") == log


def test_bad_archives_are_refused_with_the_reason(tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar.zst"
    junk.write_bytes(b"this is not zstd")
    with pytest.raises(ConfigError, match=r"junk\.tar\.zst: not a readable workspace archive"):
        unpack_workspace(junk, tmp_path / "cache")
    evil = tmp_path / "evil.tar.zst"
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("../outside.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    evil.write_bytes(zstandard.ZstdCompressor().compress(raw.getvalue()))
    with pytest.raises(ConfigError, match="would be written outside the workspace"):
        unpack_workspace(evil, tmp_path / "cache")
    assert not (tmp_path / "outside.txt").exists()
    assert not any(p.name.startswith("evil") for p in (tmp_path / "cache").iterdir())
    with pytest.raises(ConfigError, match=r"missing\.tar\.zst: workspace archive not found"):
        unpack_workspace(tmp_path / "missing.tar.zst", tmp_path / "cache")
    with pytest.raises(ConfigError, match="not a workspace"):
        pack_workspace(tmp_path, tmp_path / "out.tar.zst")


def test_lab_pack_and_ingest_of_the_packed_folder(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOFE_CACHE_DIR", str(tmp_path / "cache"))
    packed = tmp_path / "packed"
    packed.mkdir()
    runner = CliRunner()
    out = packed / ARCHIVE_NAME
    result = runner.invoke(
        app, ["lab", "pack", "--workspace", str(workspace), "--out", str(out), "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["files"] == 12
    db = tmp_path / "w.duckdb"
    result = runner.invoke(app, ["ingest", str(packed), "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["applications"] == 1
    direct = tmp_path / "d.duckdb"
    assert runner.invoke(app, ["ingest", str(workspace), "--db", str(direct)]).exit_code == 0
    stats = [
        json.loads(runner.invoke(app, ["warehouse", "stats", "--db", str(d), "--json"]).stdout)
        for d in (db, direct)
    ]
    assert stats[0] == stats[1] and stats[0]["runs"] >= 3
    bad = runner.invoke(app, ["lab", "pack", "--workspace", str(tmp_path / "nope")])
    assert bad.exit_code != 0 and "not a workspace" in bad.output
