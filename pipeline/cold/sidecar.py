"""The lossless transcript sidecar: one compressed JSON-lines file beside a note.

Layout (before compression), one JSON value per line:

1. a header object: format and version, the unit's sessions, the schema version, the source
   database's columns per table and its ``sqlite_master`` DDL (so ``pull --into-db NEW`` can
   recreate a Hermes database, FTS tables and triggers included, from this file alone);
2. one row per line, ``["table", v1, v2, ...]``, values encoded by ``rows.encode_value``, in a
   fixed order (sessions parents first, messages by id, other tables sorted), so a database is
   checked against a sidecar by comparing lines;
3. a trailer object: row counts and the sha256 of every byte before it.

Compression is zstd (the ``zstandard`` package: maintained bindings to the reference library,
with a frame checksum) by default, or stdlib gzip (CRC32 + length). Either way a truncated or
flipped file is caught twice: by the codec's own check and by the trailer's sha256. The note's
frontmatter records the sha256 of the compressed file, its size and the row counts, so a
sidecar swapped for another one (valid, but not this note's) is caught too.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.atomic import atomic_write_bytes
from pipeline.cold.errors import SidecarError
from pipeline.cold.rows import Schema, Unit, encode_row, value_bytes

FORMAT = "hermes-distill-rows"
VERSION = 1
SUFFIX = {"zstd": ".hermes.jsonl.zst", "gzip": ".hermes.jsonl.gz"}
#: zstd level, measured on the 1,905 lineages of the 2,000-session database (evals/bench_cold.py):
#: level 10 is 0.307 of the raw row data in 2.6 s, level 19 0.294 in 61 s, level 3 0.339 in 0.4 s,
#: gzip -9 0.313 in 4.5 s.
ZSTD_LEVEL = 10
_ZSTD_MAGIC, _GZIP_MAGIC = b"\x28\xb5\x2f\xfd", b"\x1f\x8b"


def sidecar_path(note: Path, compression: str = "zstd") -> Path:
    """``2026/11/2026-11-02-fix-c11a01.md`` → ``2026/11/2026-11-02-fix-c11a01.hermes.jsonl.zst``."""
    return note.with_name(note.name.removesuffix(".md") + SUFFIX[compression])


@dataclass
class Payload:
    """The uncompressed sidecar of one unit, and what its note records about it."""

    text: bytes
    rows: dict[str, int]
    data_bytes: int
    #: sha256 of the row lines alone (not the header, which carries a timestamp): equal for two
    #: sidecars of the same rows, so an unchanged session is not rewritten
    rows_sha256: str = ""


def build(unit: Unit, schema: Schema, rows: Mapping[str, Sequence[Sequence[Any]]], *, source_db: Path,
          archived_at: datetime | None = None) -> Payload:
    """Header, one line per row, trailer."""
    tables = {name: list(t.columns) for name, t in schema.tables.items()}
    if "system_prompts" in rows:
        tables["system_prompts"] = ["hash", "prompt"]
    header = {
        "format": FORMAT, "version": VERSION, "root": unit.root, "sessions": list(unit.ids),
        "kinds": unit.kinds, "external_children": [list(p) for p in unit.external_children],
        "schema_version": schema.version, "source_db": str(source_db),
        "archived_at": (archived_at or datetime.now(UTC)).isoformat(timespec="seconds"),
        "tables": tables, "ddl": [list(d) for d in schema.ddl],
    }
    out = io.BytesIO()
    out.write(json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")
    start = out.tell()
    counts: dict[str, int] = {}
    data = 0
    for name in tables:
        for row in rows.get(name, ()):
            out.write(encode_row(name, row).encode("utf-8") + b"\n")
            data += sum(value_bytes(v) for v in row)
        counts[name] = len(rows.get(name, ()))
    body = out.getvalue()
    rows_sha = hashlib.sha256(body[start:]).hexdigest()
    trailer = {"end": True, "rows": counts, "rows_sha256": rows_sha, "sha256": hashlib.sha256(body).hexdigest()}
    body += json.dumps(trailer, separators=(",", ":")).encode("utf-8") + b"\n"
    return Payload(text=body, rows=counts, data_bytes=data, rows_sha256=rows_sha)


def compress(data: bytes, compression: str) -> bytes:
    if compression == "zstd":
        import zstandard

        return zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True).compress(data)
    if compression == "gzip":
        return gzip.compress(data, compresslevel=9, mtime=0)
    raise ValueError(f"unknown compression {compression!r}")


@dataclass
class Written:
    """What the note's frontmatter says about its sidecar."""

    path: Path
    sha256: str
    bytes: int
    raw_bytes: int
    data_bytes: int
    compression: str
    rows: dict[str, int]

    def frontmatter(self, unit: Unit, schema_version: int | None, archived_at: str) -> dict[str, Any]:
        return {
            "sidecar": self.path.name, "sha256": self.sha256, "bytes": self.bytes, "raw_bytes": self.raw_bytes,
            "data_bytes": self.data_bytes, "compression": self.compression, "format": f"{FORMAT}/{VERSION}",
            "schema_version": schema_version, "root": unit.root, "sessions": list(unit.ids),
            "rows": dict(self.rows), "archived_at": archived_at,
        }


def write(path: Path, payload: Payload, compression: str, *, sync_dir: bool = True) -> Written:
    """Compress and write atomically: temp file, fsync, rename, fsync of the directory.

    The directory fsync matters: prune deletes rows only after the sidecar's name is as durable as
    its bytes. ``sync_dir=False`` leaves that fsync to the caller, who does it once per directory
    before any prune (``archive.Archiver``).
    """
    blob = compress(payload.text, compression)
    atomic_write_bytes(path, blob, sync_dir=sync_dir)
    return Written(path=path, sha256=hashlib.sha256(blob).hexdigest(), bytes=len(blob),
                   raw_bytes=len(payload.text), data_bytes=payload.data_bytes, compression=compression,
                   rows=payload.rows)


# --------------------------------------------------------------------------- reading back


@dataclass
class Sidecar:
    """A sidecar read back and checked: header, the row lines per table, counts."""

    path: Path
    header: dict[str, Any]
    lines: dict[str, list[str]] = field(default_factory=dict)
    sha256: str = ""
    trailer: dict[str, Any] = field(default_factory=dict)

    @property
    def sessions(self) -> list[str]:
        return list(self.header["sessions"])

    @property
    def columns(self) -> dict[str, list[str]]:
        return dict(self.header["tables"])

    def rows(self, table: str) -> list[list[Any]]:
        """Decoded JSON rows (values still tagged, see ``rows.decode_value``) of one table."""
        return [json.loads(line)[1:] for line in self.lines.get(table, ())]


def _decompress(blob: bytes, path: Path) -> bytes:
    if blob.startswith(_ZSTD_MAGIC):
        import zstandard

        obj = zstandard.ZstdDecompressor().decompressobj()
        try:
            data = obj.decompress(blob)
        except zstandard.ZstdError as exc:
            raise SidecarError("corrupt", f"{path}: corrupted zstd data ({exc})") from exc
        if not obj.eof:
            raise SidecarError("truncated", f"{path}: truncated: the zstd frame ends early ({len(blob)} bytes on disk)")
        if obj.unused_data:
            raise SidecarError("corrupt", f"{path}: {len(obj.unused_data)} unexpected bytes after the zstd frame")
        return bytes(data)
    if blob.startswith(_GZIP_MAGIC):
        try:
            return gzip.decompress(blob)
        except EOFError as exc:
            raise SidecarError("truncated", f"{path}: truncated: the gzip stream ends early ({len(blob)} bytes on disk)") from exc
        except (OSError, zlib.error) as exc:
            raise SidecarError("corrupt", f"{path}: corrupted gzip data ({exc})") from exc
    if not blob:
        raise SidecarError("truncated", f"{path}: empty file (0 bytes)")
    raise SidecarError("format", f"{path}: not a zstd or gzip sidecar (starts with {blob[:4].hex()})")


def load(path: Path, expected: Mapping[str, Any] | None = None) -> Sidecar:
    """Read ``path`` and check it: against the note's record (``expected``: sha256, bytes, rows,
    sessions) when there is one, then the codec's checksum, the trailer's sha256 and counts.

    Raises ``SidecarError`` saying exactly what is wrong; never returns a partial sidecar.
    """
    path = Path(path)
    try:
        blob = path.read_bytes()
    except FileNotFoundError:
        raise SidecarError("missing", f"{path}: sidecar missing; without it the rows cannot be restored "
                           "(the note's summary can: distill pull NOTE --from-note)") from None
    except OSError as exc:
        raise SidecarError("missing", f"{path}: cannot read sidecar ({exc.strerror or exc})") from exc
    digest = hashlib.sha256(blob).hexdigest()
    if expected:
        if expected.get("bytes") is not None and int(expected["bytes"]) != len(blob):
            kind = "truncated" if len(blob) < int(expected["bytes"]) else "checksum"
            raise SidecarError(kind, f"{path}: {len(blob)} bytes on disk, the note records {expected['bytes']}"
                               + (" (truncated)" if kind == "truncated" else ""))
        if expected.get("sha256") and expected["sha256"] != digest:
            raise SidecarError("checksum", f"{path}: sha256 {digest[:12]}… differs from the note's "
                               f"{str(expected['sha256'])[:12]}…: the file was changed or corrupted")
    text = _decompress(blob, path)
    if not text.endswith(b"\n"):
        raise SidecarError("truncated", f"{path}: truncated: the last line is incomplete")
    body_end = text.rfind(b"\n", 0, len(text) - 1) + 1
    try:
        trailer = json.loads(text[body_end:])
    except ValueError:
        trailer = None
    if not isinstance(trailer, dict) or not trailer.get("end"):
        raise SidecarError("truncated", f"{path}: truncated: no trailer line (the file ends mid-table)")
    body = text[:body_end]
    if hashlib.sha256(body).hexdigest() != trailer.get("sha256"):
        raise SidecarError("corrupt", f"{path}: content does not match its own sha256 (corrupted inside)")
    lines = body.decode("utf-8").split("\n")[:-1]
    try:
        header = json.loads(lines[0])
    except (ValueError, IndexError) as exc:
        raise SidecarError("corrupt", f"{path}: unreadable header line") from exc
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise SidecarError("format", f"{path}: not a {FORMAT} sidecar")
    if int(header.get("version") or 0) > VERSION:
        raise SidecarError("format", f"{path}: sidecar format version {header.get('version')} is newer than "
                           "this distill understands; upgrade hermes-distill")
    sidecar = Sidecar(path=path, header=header, sha256=digest, trailer=trailer)
    known = set(header["tables"])
    for n, line in enumerate(lines[1:], start=2):
        table = _table_of(line)
        if table not in known:
            raise SidecarError("corrupt", f"{path}: line {n} names unknown table {table!r}")
        sidecar.lines.setdefault(table, []).append(line)
    counts = {t: len(sidecar.lines.get(t, ())) for t in header["tables"]}
    if counts != trailer.get("rows"):
        raise SidecarError("counts", f"{path}: row counts {counts} differ from the trailer's {trailer.get('rows')}")
    if expected and expected.get("rows") and dict(expected["rows"]) != counts:
        raise SidecarError("counts", f"{path}: row counts {counts} differ from the note's {dict(expected['rows'])}")
    if expected and expected.get("sessions") and list(expected["sessions"]) != sidecar.sessions:
        raise SidecarError("counts", f"{path}: holds sessions {sidecar.sessions}, the note lists {expected['sessions']}")
    return sidecar


def _table_of(line: str) -> str:
    # Every row line starts with '["<table>",'; parse just that much.
    if not line.startswith('["'):
        return ""
    end = line.find('"', 2)
    return line[2:end] if end > 0 else ""


def session_lines(sidecar: Sidecar, table: str, columns: Sequence[str], refs: Iterable[str],
                  present: set[str]) -> list[str]:
    """The lines of ``table`` that belong to a session in ``present``."""
    idx = [columns.index(c) for c in refs]
    out = []
    for line in sidecar.lines.get(table, ()):
        row = json.loads(line)[1:]
        if any(isinstance(row[i], str) and row[i] in present for i in idx):
            out.append(line)
    return out
