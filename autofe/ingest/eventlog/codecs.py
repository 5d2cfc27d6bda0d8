"""Stream the bytes of a Spark event log, whatever codec Spark (or Databricks) wrote it with.

Spark picks the codec from ``spark.eventLog.compression.codec`` and records it only in the file
name suffix (``app-1.lz4``, ``events_1_app-1.zstd``, ``eventlog-2021-06-15--15-00.gz``). The
lz4, snappy and lzf codecs are not the standard framed formats of those libraries but the
JVM libraries' own stream framings (lz4-java, snappy-java, compress-lzf), so they are decoded
here block by block with ``cramjam`` doing the raw block work.

Decoding never holds a whole file in memory, checks the magic bytes before yielding anything,
and on damage part-way (truncation, a corrupt block) first yields everything decodable before
it and then raises :class:`~autofe.errors.IngestError`, so the caller keeps the good prefix.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator
from io import BufferedReader
from pathlib import Path, PurePath

import cramjam
import zstandard

from autofe.errors import IngestError
from autofe.special_file import special_file

__all__ = ["CODEC_BY_SUFFIX", "codec_for", "iter_decompressed"]

CODEC_BY_SUFFIX: dict[str, str] = {
    ".gz": "gzip",
    ".zstd": "zstd",
    ".zst": "zstd",
    ".lz4": "lz4",
    ".snappy": "snappy",
    ".lzf": "lzf",
}

_INPROGRESS = ".inprogress"
# Compressed input is read in small pieces so one decompress call stays near a few MB of output
# even for highly compressible JSON (ratios of 10-30x are normal for event logs).
_READ_SIZE = 1 << 16

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_LZ4_MAGIC = b"LZ4Block"
_SNAPPY_MAGIC = b"\x82SNAPPY\x00"
_LZF_MAGIC = b"ZV"
_MAGIC_LEN = 8

# lz4-java LZ4BlockOutputStream: magic, token (method | level), compressed length,
# decompressed length, xxhash32 checksum of the decompressed block; all little-endian.
_LZ4_HEADER = struct.Struct("<8sBiii")
_LZ4_RAW = 0x10
_LZ4_COMPRESSED = 0x20
# snappy-java SnappyOutputStream: magic then two big-endian int32 (version, compatible version).
_SNAPPY_HEADER = struct.Struct(">8sii")
_BE_INT32 = struct.Struct(">i")
_BE_UINT16 = struct.Struct(">H")
# Blocks are 32 KiB by default (spark.io.compression.*.blockSize); anything near 2 GiB is garbage.
_MAX_BLOCK = 1 << 30


class _Damage(Exception):
    """A stream broke part-way; turned into an IngestError once the good prefix is yielded."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


def codec_for(path: Path) -> str:
    """Name the codec Spark used for an event log file, from its name alone.

    Spark appends ``.inprogress`` while the application runs, after the codec suffix.

    Args:
        path: The event log file (only its name is used).

    Returns:
        One of ``plain``, ``gzip``, ``zstd``, ``lz4``, ``snappy``, ``lzf``.

    >>> codec_for(Path("app-123.lz4.inprogress"))
    'lz4'
    >>> codec_for(Path("spark-events/eventlog-2021-06-15--15-00.gz"))
    'gzip'
    >>> codec_for(Path("local-1532512550423"))
    'plain'
    """
    name = path.name.removesuffix(_INPROGRESS)
    return CODEC_BY_SUFFIX.get(PurePath(name).suffix.lower(), "plain")


def iter_decompressed(path: Path, chunk_size: int = 1 << 20) -> Iterator[bytes]:
    """Yield the decompressed bytes of an event log in chunks of about ``chunk_size``.

    Args:
        path: The event log file; its codec comes from :func:`codec_for`.
        chunk_size: Target size of each yielded chunk (the last one may be smaller).

    Returns:
        An iterator of non-empty byte chunks whose concatenation is the decompressed file.
        An empty file yields nothing (Spark creates the file before its first block).

    Raises:
        IngestError: The file is a FIFO, device or socket (refused unopened: reading one can
            block forever), cannot be read, its content is not the codec its name says
            (raised before anything is yielded), or the stream is truncated or corrupt
            part-way (raised after every decodable chunk before the damage was yielded).
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    codec = codec_for(path)
    refused = special_file(path)
    if refused:
        raise IngestError(str(path), refused)
    try:
        with path.open("rb") as fh:
            head = fh.peek(_MAGIC_LEN)[:_MAGIC_LEN]
            if not head:
                return
            _check_magic(path, codec, head)
            yield from _rechunk(path, _DECODERS[codec](fh), chunk_size)
    except OSError as exc:
        raise IngestError(str(path), f"cannot read file: {exc.strerror or exc}") from exc


def _sniff(head: bytes) -> str | None:
    """Name the codec whose magic bytes start ``head``, if any.

    >>> _sniff(b"\\x1f\\x8b\\x08\\x00")
    'gzip'
    >>> _sniff(b'{"Event":') is None
    True
    """
    if head.startswith(_ZSTD_MAGIC) or _is_zstd_skippable(head):
        return "zstd"
    for codec, magic in (
        ("gzip", _GZIP_MAGIC),
        ("lz4", _LZ4_MAGIC),
        ("snappy", _SNAPPY_MAGIC),
        ("lzf", _LZF_MAGIC),
    ):
        if head.startswith(magic):
            return codec
    return None


def _is_zstd_skippable(head: bytes) -> bool:
    """Skippable zstd frames (magic 0x184D2A50-5F, little-endian) may lead a valid stream."""
    return len(head) >= 4 and head[1:4] == b"\x2a\x4d\x18" and head[0] & 0xF0 == 0x50


def _check_magic(path: Path, codec: str, head: bytes) -> None:
    """Refuse a file whose first bytes contradict its name, before anything is yielded."""
    found = _sniff(head)
    if found == codec or (codec == "plain" and found is None):
        return
    seen = f"starts with {head.hex()}…" + (f", looks like {found}" if found else "")
    if codec == "plain":
        reason = f"has no codec suffix but content is {found} ({seen})"
    else:
        suffix = PurePath(path.name.removesuffix(_INPROGRESS)).suffix
        reason = f"named {suffix} but content is not {codec} ({seen})"
    raise IngestError(str(path), reason)


def _rechunk(path: Path, blocks: Iterator[bytes], chunk_size: int) -> Iterator[bytes]:
    """Coalesce decoder blocks into ``chunk_size`` chunks; on damage flush, then raise."""
    pending = bytearray()
    produced = 0
    try:
        for block in blocks:
            pending += block
            if len(pending) >= chunk_size:
                produced += len(pending)
                yield bytes(pending)
                pending.clear()
    except (_Damage, OSError) as exc:
        produced += len(pending)
        if pending:
            yield bytes(pending)
        raise IngestError(str(path), _damage_reason(path, exc, produced)) from exc
    if pending:
        yield bytes(pending)


def _damage_reason(path: Path, exc: _Damage | OSError, produced: int) -> str:
    """Say what broke and how much good data came before it, for the ingest report."""
    if isinstance(exc, OSError):
        return f"read failed after {produced} decompressed bytes: {exc.strerror or exc}"
    reason = f"{exc.reason} after {produced} decompressed bytes"
    if exc.detail:
        reason += f" ({exc.detail})"
    if path.name.endswith(_INPROGRESS):
        reason += "; the log is .inprogress (application still running or killed)"
    return reason


def _read_exact(fh: BufferedReader, size: int, what: str) -> bytes:
    """Read exactly ``size`` bytes or report the truncation with its offset."""
    offset = fh.tell()
    data = fh.read(size)
    if len(data) < size:
        detail = f"{what} at byte {offset} needs {size} bytes, {len(data)} present"
        raise _Damage("compressed stream truncated", detail)
    return data


def _plain_blocks(fh: BufferedReader) -> Iterator[bytes]:
    """Uncompressed logs: the file's own bytes."""
    while chunk := fh.read(_READ_SIZE):
        yield chunk


def _gzip_blocks(fh: BufferedReader) -> Iterator[bytes]:
    """Gzip, possibly several members (Databricks rolls and concatenates ``eventlog-*.gz``)."""
    member: zlib._Decompress | None = None
    while chunk := fh.read(_READ_SIZE):
        while chunk:
            if member is None:
                # Zero padding between or after members is legal; the gzip module skips it too.
                chunk = chunk.lstrip(b"\0")
                if not chunk:
                    break
                member = zlib.decompressobj(wbits=31)
            try:
                out = member.decompress(chunk)
            except zlib.error as exc:
                raise _Damage("gzip data corrupt", str(exc)) from exc
            if out:
                yield out
            chunk = member.unused_data if member.eof else b""
            if member.eof:
                member = None
    if member is not None:
        raise _Damage("compressed stream truncated", "gzip member has no end")


def _zstd_blocks(fh: BufferedReader) -> Iterator[bytes]:
    """Zstd, possibly several frames; a frame without its end is a truncation."""
    decompressor = zstandard.ZstdDecompressor()
    frame = None
    while chunk := fh.read(_READ_SIZE):
        while chunk:
            if frame is None:
                frame = decompressor.decompressobj()
            try:
                out = frame.decompress(chunk)
            except zstandard.ZstdError as exc:
                raise _Damage("zstd data corrupt", str(exc)) from exc
            if out:
                yield out
            chunk = frame.unused_data if frame.eof else b""
            if frame.eof:
                frame = None
    if frame is not None:
        raise _Damage("compressed stream truncated", "zstd frame has no end")


def _lz4_blocks(fh: BufferedReader) -> Iterator[bytes]:
    """Spark's lz4: lz4-java ``LZ4BlockOutputStream`` blocks, ended by an empty block.

    Spark reads with concatenation enabled, so another stream may follow an end block. The
    xxhash32 checksum is not verified (no xxhash in our dependencies); a corrupt block still
    fails the lz4 decode or the exact-length check.
    """
    ended = False
    while True:
        offset = fh.tell()
        head = fh.read(_LZ4_HEADER.size)
        if not head:
            break
        if len(head) < _LZ4_HEADER.size:
            detail = f"lz4 block header at byte {offset} has {len(head)} of 21 bytes"
            raise _Damage("compressed stream truncated", detail)
        magic, token, packed_len, block_len, _checksum = _LZ4_HEADER.unpack(head)
        method = token & 0xF0
        if magic != _LZ4_MAGIC or method not in (_LZ4_RAW, _LZ4_COMPRESSED):
            raise _Damage("lz4 block header corrupt", f"at byte {offset}")
        if not 0 <= packed_len <= _MAX_BLOCK or not 0 <= block_len <= _MAX_BLOCK:
            raise _Damage("lz4 block header corrupt", f"lengths out of range at byte {offset}")
        ended = block_len == 0
        if not ended:
            payload = _read_exact(fh, packed_len, "lz4 block")
            yield _lz4_block(payload, block_len, method, offset)
    if not ended:
        raise _Damage("compressed stream truncated", "lz4 stream has no end block")


def _lz4_block(payload: bytes, block_len: int, method: int, offset: int) -> bytes:
    """Decode one lz4-java block; the header's length must come out exactly."""
    if method == _LZ4_RAW:
        if len(payload) != block_len:
            raise _Damage("lz4 block corrupt", f"raw block length mismatch at byte {offset}")
        return payload
    out = bytearray(block_len)
    try:
        written = cramjam.lz4.decompress_block_into(payload, out)
    except cramjam.DecompressionError as exc:
        raise _Damage("lz4 block corrupt", f"at byte {offset}: {exc}") from exc
    if written != block_len:
        raise _Damage("lz4 block corrupt", f"decoded {written} of {block_len} bytes at {offset}")
    return bytes(out)


def _snappy_blocks(fh: BufferedReader) -> Iterator[bytes]:
    """Spark's snappy: snappy-java ``SnappyOutputStream`` (header, then length-prefixed blocks).

    A second stream header may appear between blocks (concatenated streams); snappy-java's
    reader skips it, and so do we. The stream has no end marker, so EOF between blocks is clean.
    """
    _read_snappy_header(fh, fh.tell())
    while True:
        offset = fh.tell()
        prefix = fh.read(4)
        if not prefix:
            return
        if prefix == _SNAPPY_MAGIC[:4]:
            fh.seek(offset)
            _read_snappy_header(fh, offset)
            continue
        if len(prefix) < 4:
            detail = f"snappy block length at byte {offset} has {len(prefix)} of 4 bytes"
            raise _Damage("compressed stream truncated", detail)
        (packed_len,) = _BE_INT32.unpack(prefix)
        if not 0 <= packed_len <= _MAX_BLOCK:
            raise _Damage("snappy block corrupt", f"length {packed_len} at byte {offset}")
        payload = _read_exact(fh, packed_len, "snappy block")
        try:
            yield bytes(cramjam.snappy.decompress_raw(payload))
        except cramjam.DecompressionError as exc:
            raise _Damage("snappy block corrupt", f"at byte {offset}: {exc}") from exc


def _read_snappy_header(fh: BufferedReader, offset: int) -> None:
    """Consume one 16-byte snappy-java stream header."""
    head = _read_exact(fh, _SNAPPY_HEADER.size, "snappy stream header")
    magic, _version, _compatible = _SNAPPY_HEADER.unpack(head)
    if magic != _SNAPPY_MAGIC:
        raise _Damage("snappy stream header corrupt", f"at byte {offset}")


def _lzf_blocks(fh: BufferedReader) -> Iterator[bytes]:
    """Spark's lzf: compress-lzf ``LZFOutputStream`` chunks ('ZV', type, big-endian lengths)."""
    while True:
        offset = fh.tell()
        head = fh.read(5)
        if not head:
            return
        if len(head) < 5:
            detail = f"lzf chunk header at byte {offset} has {len(head)} of 5 bytes"
            raise _Damage("compressed stream truncated", detail)
        if head[:2] != _LZF_MAGIC or head[2] not in (0, 1):
            raise _Damage("lzf chunk header corrupt", f"at byte {offset}")
        (packed_len,) = _BE_UINT16.unpack_from(head, 3)
        if head[2] == 0:
            yield _read_exact(fh, packed_len, "lzf chunk")
            continue
        (block_len,) = _BE_UINT16.unpack(_read_exact(fh, 2, "lzf chunk header"))
        payload = _read_exact(fh, packed_len, "lzf chunk")
        try:
            yield _lzf_decompress(payload, block_len)
        except ValueError as exc:
            raise _Damage("lzf chunk corrupt", f"at byte {offset}: {exc}") from exc


def _lzf_decompress(src: bytes, size: int) -> bytes:
    """Decode one raw LZF block (liblzf format, as compress-lzf writes it) of ``size`` bytes.

    No Python package we depend on decodes LZF; the format is small enough to do here.
    Literal runs and non-overlapping back-references are slice copies; an overlapping
    back-reference (distance < length) repeats its period.

    >>> _lzf_decompress(b"\\x02abc\\x20\\x02", 6)  # literal "abc", then copy 3 from 3 back
    b'abcabc'
    >>> _lzf_decompress(b"\\x00a\\x60\\x00", 6)  # literal "a", then copy 5 from 1 back
    b'aaaaaa'
    """
    out = bytearray()
    pos, end = 0, len(src)
    try:
        while pos < end:
            ctrl = src[pos]
            pos += 1
            if ctrl < 32:
                run_end = pos + ctrl + 1
                if run_end > end:
                    raise ValueError("literal run past end of block")
                out += src[pos:run_end]
                pos = run_end
                continue
            length = ctrl >> 5
            if length == 7:
                length += src[pos]
                pos += 1
            distance = ((ctrl & 0x1F) << 8) + src[pos] + 1
            pos += 1
            _copy_back(out, distance, length + 2)
    except IndexError as exc:
        raise ValueError("back-reference past end of block") from exc
    if len(out) != size:
        raise ValueError(f"decoded {len(out)} bytes, header says {size}")
    return bytes(out)


def _copy_back(out: bytearray, distance: int, length: int) -> None:
    """Append ``length`` bytes copied from ``distance`` back in ``out`` (LZ77 semantics)."""
    start = len(out) - distance
    if start < 0:
        raise ValueError("back-reference before start of block")
    if length <= distance:
        out += out[start : start + length]
    else:
        period = out[start:]
        out += (period * (length // distance + 1))[:length]


_DECODERS: dict[str, Callable[[BufferedReader], Iterator[bytes]]] = {
    "plain": _plain_blocks,
    "gzip": _gzip_blocks,
    "zstd": _zstd_blocks,
    "lz4": _lz4_blocks,
    "snappy": _snappy_blocks,
    "lzf": _lzf_blocks,
}
