"""What distill pushed to which gbrain: ``<out>/.distill/gbrain.db`` (sqlite-utils).

One row per (brain, note): the page's slug, the note's stat and hash when it was pushed, the hash
and (compressed) text of the page sent, the tags pushed (so a tag removed from the note is removed
in gbrain, where ``put_page`` only ever adds tags), the edges added with ``add_link`` and those
still waiting for their target, and how many versions distill's writes made. Each row is written
in one transaction right after its page's gbrain calls succeed, so a push that crashed resumes
where it stopped, and a page put again after a crash is one gbrain answers ``skipped``.

The archive index (``pipeline/archive``) is the long-term home for this state; until it can hold
it, it lives here, in its own file beside the notes, keyed by the brain (``$GBRAIN_HOME``) so two
brains never share a row.
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pipeline.errors import OutputError

STATE_FILE = "gbrain.db"
SCHEMA_VERSION = 1


@dataclass
class PushRow:
    brain: str
    note_id: str
    slug: str
    note_path: str
    note_size: int = 0
    note_mtime_ns: int = 0
    note_sha: str = ""
    page_sha: str = ""
    page_text: str = ""
    active_at: str = ""
    tags: list[str] = field(default_factory=list)
    links: list[list[str]] = field(default_factory=list)
    pending: list[list[str]] = field(default_factory=list)
    version: int = 0
    pushed_at: str = ""


class PushState:
    """The push state of one output folder."""

    def __init__(self, out: Path, *, create: bool = True) -> None:
        import sqlite_utils

        self.path = Path(out) / ".distill" / STATE_FILE
        if not create and not self.path.exists():
            self.db = sqlite_utils.Database(memory=True)
        else:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.db = sqlite_utils.Database(self.path)
            except (OSError, sqlite3.Error) as exc:
                raise OutputError(f"cannot open the push state {self.path}: {exc}") from exc
        self._migrate()

    def _migrate(self) -> None:
        pages = self.db["pages"]
        if not pages.exists():
            pages.create(  # type: ignore[union-attr]
                {"brain": str, "note_id": str, "slug": str, "note_path": str, "note_size": int,
                 "note_mtime_ns": int, "note_sha": str, "page_sha": str, "page_text": bytes, "active_at": str,
                 "tags": str, "links": str, "pending": str, "version": int, "pushed_at": str},
                pk=("brain", "note_id"))
            pages.create_index(["brain", "slug"])  # type: ignore[union-attr]
            pages.create_index(["brain", "note_path"])  # type: ignore[union-attr]
        projects = self.db["projects"]
        if not projects.exists():
            projects.create({"brain": str, "slug": str, "name": str}, pk=("brain", "slug"))  # type: ignore[union-attr]
        self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------------ rows

    def rows(self, brain: str) -> Iterator[PushRow]:
        for raw in self.db["pages"].rows_where("brain = ?", [brain]):
            yield _row(raw)

    def save(self, row: PushRow) -> None:
        """One transaction: the row is all there or not at all."""
        data: dict[str, Any] = asdict(row)
        data["page_text"] = zlib.compress(row.page_text.encode("utf-8"))
        for key in ("tags", "links", "pending"):
            data[key] = json.dumps(data[key], ensure_ascii=False)
        with self.db.conn:
            self.db["pages"].upsert(data, pk=("brain", "note_id"))  # type: ignore[union-attr]

    def projects(self, brain: str) -> set[str]:
        return {r["slug"] for r in self.db["projects"].rows_where("brain = ?", [brain])}

    def remember_project(self, brain: str, slug: str, name: str) -> None:
        with self.db.conn:
            self.db["projects"].upsert({"brain": brain, "slug": slug, "name": name},  # type: ignore[union-attr]
                                       pk=("brain", "slug"))


def _row(raw: dict[str, Any]) -> PushRow:
    data = dict(raw)
    data["page_text"] = zlib.decompress(data["page_text"]).decode("utf-8") if data.get("page_text") else ""
    for key in ("tags", "links", "pending"):
        data[key] = json.loads(data[key] or "[]")
    return PushRow(**data)
