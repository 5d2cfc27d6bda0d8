"""Event-log codecs against logs written by real Spark (fixtures) and the shared real corpus."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import orjson
import pytest
import zstandard

from autofe.config import external_data_dir
from autofe.errors import IngestError
from autofe.ingest.eventlog.codecs import codec_for, iter_decompressed

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "eventlogs" / "codecs"
EXPECTED: dict[str, dict[str, int]] = json.loads((FIXTURES / "expected.json").read_text())
# One file per (Spark version, codec): e.g. "spark-3.5.9/lzf" -> .../spark-3.5.9/app_lzf.lzf
SINGLE = {
    f"{path.parent.name}/{codec}": path
    for codec in ("lz4", "snappy", "lzf", "zstd")
    for path in sorted(FIXTURES.glob(f"spark-*/app_{codec}.{codec}"))
}
LZ4 = next(key for key in SINGLE if key.endswith("/lz4"))
ZSTD = next(key for key in SINGLE if key.endswith("/zstd"))
PLAIN = next(FIXTURES.glob("spark-*/app_plain"))
_SHARED = external_data_dir()
CORPUS = (
    sorted(
        p
        for p in (_SHARED / "spark-eventlogs").rglob("*")
        if p.is_file() and p.suffix in {".zstd", ".gz"}
    )
    if _SHARED is not None
    else []
)
TRUNCATED = re.compile(r"truncated after (\d+) decompressed bytes")


def decode(path: Path, chunk_size: int = 1 << 20) -> bytes:
    return b"".join(iter_decompressed(path, chunk_size))


def decode_until_error(path: Path, match: str) -> tuple[bytes, pytest.ExceptionInfo[IngestError]]:
    """Collect what is yielded before the IngestError, as a caller keeping the good prefix."""
    received: list[bytes] = []
    with pytest.raises(IngestError, match=match) as info:
        for chunk in iter_decompressed(path, chunk_size=4096):
            received.append(chunk)
    return b"".join(received), info


def write_gzip_members(source: Path, dest: Path) -> bytes:
    """Two gzip members of one file's halves, as Databricks' rolled ``eventlog-*.gz`` may be."""
    data = source.read_bytes()
    half = len(data) // 2
    dest.write_bytes(gzip.compress(data[:half]) + gzip.compress(data[half:]))
    return data


@pytest.mark.parametrize(
    ("name", "codec"),
    [
        ("app-1.lz4", "lz4"),
        ("app-1.lz4.inprogress", "lz4"),
        ("events_1_app-1.zstd", "zstd"),
        ("x.zst", "zstd"),
        ("eventlog-2021-06-15--15-00.gz", "gzip"),
        ("app-1.snappy", "snappy"),
        ("app-1.lzf.inprogress", "lzf"),
        ("eventlog", "plain"),
        ("local-1532512550423", "plain"),
        ("app-1.inprogress", "plain"),
        ("notes.txt", "plain"),
    ],
)
def test_codec_for_reads_the_suffix_before_inprogress(name: str, codec: str) -> None:
    assert codec_for(Path("logs") / name) == codec


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_spark_written_fixture_decodes_to_expected_counts(rel: str) -> None:
    lines = decode(FIXTURES / rel).splitlines()
    events = [orjson.loads(line)["Event"] for line in lines]
    assert {
        "lines": len(lines),
        "task_end": events.count("SparkListenerTaskEnd"),
        "stage_completed": events.count("SparkListenerStageCompleted"),
    } == EXPECTED[rel]
    assert events[0] == "SparkListenerLogStart"
    assert events[-1] == "SparkListenerApplicationEnd"
    assert "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd" in events


def test_every_codec_is_covered_by_a_fixture_of_each_spark_line() -> None:
    assert {codec_for(FIXTURES / rel) for rel in EXPECTED} == {
        "plain",
        "lz4",
        "snappy",
        "lzf",
        "zstd",
    }
    assert {key.split("/")[0][:9] for key in SINGLE} == {"spark-3.5", "spark-4.3"}
    assert any("/eventlog_v2_" in rel for rel in EXPECTED)


def lzf_chunk_types(data: bytes) -> list[int]:
    """Walk compress-lzf chunk headers: 'ZV', type, then 2 (raw) or 4 (compressed) length bytes."""
    types, pos = [], 0
    while pos < len(data):
        assert data[pos : pos + 2] == b"ZV"
        kind, size = data[pos + 2], int.from_bytes(data[pos + 3 : pos + 5], "big")
        types.append(kind)
        pos += (5 if kind == 0 else 7) + size
    return types


def test_lzf_fixtures_cover_raw_and_compressed_chunks() -> None:
    kinds = {
        k
        for key, path in SINGLE.items()
        if key.endswith("/lzf")
        for k in lzf_chunk_types(path.read_bytes())
    }
    assert kinds == {0, 1}


def test_plain_file_is_passed_through() -> None:
    assert decode(PLAIN) == PLAIN.read_bytes()


@pytest.mark.parametrize("key", sorted(SINGLE))
def test_small_chunk_size_gives_same_bytes_in_bounded_chunks(key: str) -> None:
    chunks = list(iter_decompressed(SINGLE[key], chunk_size=10_000))
    assert b"".join(chunks) == decode(SINGLE[key])
    assert all(len(c) >= 10_000 for c in chunks[:-1])
    assert len(chunks[-1]) > 0


@pytest.mark.parametrize("key", sorted(SINGLE))
def test_concatenated_streams_decode_as_one(key: str, tmp_path: Path) -> None:
    once = decode(SINGLE[key])
    doubled = tmp_path / SINGLE[key].name
    doubled.write_bytes(SINGLE[key].read_bytes() * 2)
    assert decode(doubled) == once + once


def test_multi_member_gzip(tmp_path: Path) -> None:
    data = write_gzip_members(PLAIN, tmp_path / "eventlog-1.gz")
    assert decode(tmp_path / "eventlog-1.gz") == data


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_shared_corpus_decodes_like_the_reference_libraries(path: Path) -> None:
    if path.suffix == ".gz":
        reference = gzip.decompress(path.read_bytes())
    else:
        with path.open("rb") as fh:
            reader = zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True)
            reference = reader.read()
    ours = decode(path)
    assert ours == reference
    assert ours.startswith(b'{"Event":"')


def test_shared_corpus_is_present_and_has_both_codecs() -> None:
    if _SHARED is None:
        pytest.skip("../shared/data/external is not beside this checkout")
    assert {p.suffix for p in CORPUS} == {".zstd", ".gz"}


def test_gzip_named_zstd_is_refused_before_yielding(tmp_path: Path) -> None:
    fake = tmp_path / "x.zstd"
    write_gzip_members(PLAIN, fake)
    chunks = iter_decompressed(fake)
    with pytest.raises(
        IngestError, match=r"named \.zstd but content is not zstd \(starts with 1f8b"
    ):
        next(chunks)


@pytest.mark.parametrize("codec", ["lz4", "snappy", "lzf", "zstd", "gzip"])
def test_plain_text_named_compressed_is_refused(codec: str, tmp_path: Path) -> None:
    suffix = "gz" if codec == "gzip" else codec
    fake = tmp_path / f"x.{suffix}"
    shutil.copy(PLAIN, fake)
    with pytest.raises(IngestError, match=rf"named \.{suffix} but content is not {codec} \(starts"):
        decode(fake)


def test_compressed_content_without_suffix_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "eventlog"
    shutil.copy(SINGLE[ZSTD], fake)
    with pytest.raises(IngestError, match=r"no codec suffix but content is zstd"):
        decode(fake)


@pytest.mark.parametrize("key", [*sorted(SINGLE), "gzip"])
def test_truncated_stream_yields_the_prefix_then_raises(key: str, tmp_path: Path) -> None:
    if key == "gzip":
        source = tmp_path / "full.gz"
        write_gzip_members(PLAIN, source)
    else:
        source = SINGLE[key]
    full = decode(source)
    data = source.read_bytes()
    cut = tmp_path / f"cut{source.suffix}"
    cut.write_bytes(data[: len(data) * 3 // 4])
    received, info = decode_until_error(cut, r"truncated after \d+ decompressed bytes")
    assert 0 < len(received) < len(full)
    assert full.startswith(received)
    match = TRUNCATED.search(info.value.reason)
    assert match is not None and int(match.group(1)) == len(received)
    assert info.value.path == str(cut)


def test_lz4_without_end_block_is_truncated_but_complete(tmp_path: Path) -> None:
    data = SINGLE[LZ4].read_bytes()
    assert data[-21:] == b"LZ4Block\x15" + bytes(12)
    cut = tmp_path / "app.lz4"
    cut.write_bytes(data[:-21])
    received, _ = decode_until_error(cut, r"truncated after \d+ .*no end block")
    assert received == decode(SINGLE[LZ4])


def test_inprogress_truncation_says_so(tmp_path: Path) -> None:
    data = SINGLE[ZSTD].read_bytes()
    live = tmp_path / "app-1.zstd.inprogress"
    live.write_bytes(data[: len(data) // 2])
    received, _ = decode_until_error(live, r"truncated after \d+ .*\.inprogress")
    assert decode(SINGLE[ZSTD]).startswith(received)


@pytest.mark.parametrize("key", [k for k in sorted(SINGLE) if k.endswith(("/lz4", "/lzf"))])
def test_corrupt_second_block_header_yields_first_block(key: str, tmp_path: Path) -> None:
    data = bytearray(SINGLE[key].read_bytes())
    if key.endswith("/lz4"):
        second, magic, match = 21 + int.from_bytes(data[9:13], "little"), b"LZ4Block", "lz4 block"
    else:
        second = (5 if data[2] == 0 else 7) + int.from_bytes(data[3:5], "big")
        magic, match = b"ZV", "lzf chunk"
    assert data[second : second + len(magic)] == magic
    data[second] ^= 0xFF
    bad = tmp_path / SINGLE[key].name
    bad.write_bytes(bytes(data))
    received, _ = decode_until_error(bad, rf"{match} header corrupt after \d+ decompressed bytes")
    assert len(received) > 0
    assert decode(SINGLE[key]).startswith(received)


def test_corrupt_gzip_data_is_reported(tmp_path: Path) -> None:
    bad = tmp_path / "eventlog-1.gz"
    write_gzip_members(PLAIN, bad)
    data = bytearray(bad.read_bytes())
    data[len(data) // 4] ^= 0xFF
    bad.write_bytes(bytes(data))
    decode_until_error(bad, r"gzip data corrupt after \d+ decompressed bytes")


def test_directory_is_an_ingest_error(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match=r"cannot read file: Is a directory") as info:
        decode(tmp_path)
    assert info.value.path == str(tmp_path)


def test_missing_file_is_an_ingest_error(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match=r"cannot read file: No such file"):
        decode(tmp_path / "gone.lz4")


def test_empty_file_yields_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "app-1.lz4.inprogress"
    empty.touch()
    assert list(iter_decompressed(empty)) == []


def test_non_positive_chunk_size_is_refused() -> None:
    with pytest.raises(ValueError, match="chunk_size must be positive"):
        decode(PLAIN, chunk_size=0)
