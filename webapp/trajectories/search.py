"""Full-text search over trajectories, one document per trajectory (its messages'
text, tool names and tool arguments), in the database's own full-text index:
an FTS5 table on SQLite, a GIN-indexed tsvector on PostgreSQL.

System messages are left out: they hold the policy, the same in every episode of
a run, so their words would match everything and tell nothing (and they are most
of each document's size, which is what a PostgreSQL scan pays for).

Words, not substrings: ``mia_li_3668`` or ``refund policy`` match where those
words appear, in any message. The table is not a Django model (neither index
type is), so the SQL lives here and in migration 0003, and nowhere else.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from django.db import connection, connections
from django.db.models import QuerySet
from django.db.models.expressions import RawSQL

from nlac_core.records import TrajectoryRecord

TABLE = "trajectory_search"
MAX_DOCUMENT_CHARS = 500_000  # PostgreSQL caps a tsvector at 1 MB; the opening of an episode is what people search

CREATE_SQLITE = f"CREATE VIRTUAL TABLE IF NOT EXISTS {TABLE} USING fts5(body, content='')"
DROP_SQLITE = f"DROP TABLE IF EXISTS {TABLE}"
# No foreign key: Django flushes test databases with TRUNCATE, which a referencing table would block.
# A deleted trajectory's row stays until the next ``prune``: harmless, since every match is joined to
# the live trajectories and ids are not reused (a flush, which resets ids, prunes).
CREATE_POSTGRES = [
    f"CREATE TABLE IF NOT EXISTS {TABLE} (trajectory_id bigint PRIMARY KEY, document tsvector NOT NULL)",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_document ON {TABLE} USING gin (document)",
]
DROP_POSTGRES = f"DROP TABLE IF EXISTS {TABLE}"

_WORD = re.compile(r"\w+", re.UNICODE)


def document(record: TrajectoryRecord) -> str:
    parts = []
    for m in record.messages:
        if m.role == "system":
            continue
        if m.content:
            parts.append(m.content)
        for tc in m.tool_calls:
            parts.append(tc.name)
            parts.append(json.dumps(tc.arguments, ensure_ascii=False))
    if record.error:
        parts.append(record.error)
    return "\n".join(parts)[:MAX_DOCUMENT_CHARS]


def index(rows: Iterable[tuple[int, str]]) -> None:
    """Add (trajectory id, document) pairs to the index, in the caller's transaction."""
    rows = list(rows)
    if not rows:
        return
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.executemany(f"INSERT INTO {TABLE} (trajectory_id, document) "
                            "VALUES (%s, strip(to_tsvector('simple', %s))) "
                            "ON CONFLICT (trajectory_id) DO UPDATE SET document = EXCLUDED.document",
                            [(tid, text.replace("\x00", "")) for tid, text in rows])
        else:
            cur.executemany(f"INSERT INTO {TABLE} (rowid, body) VALUES (%s, %s)", rows)


def clear() -> None:
    """Empty the index (the rebuild command fills it again)."""
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute(f"DELETE FROM {TABLE}")
        else:
            cur.execute(f"INSERT INTO {TABLE} ({TABLE}) VALUES ('delete-all')")


def prune(using: str = "default") -> None:
    """Forget documents whose trajectory is gone. Runs after every migrate and flush
    (post_migrate): a flush empties the tables and resets ids, which would otherwise
    let old documents match new trajectories. The contentless FTS5 table of SQLite can
    only be emptied as a whole, so there it acts when no trajectory is left."""
    conn = connections[using]
    table_names = conn.introspection.table_names()
    if "trajectories_trajectory" not in table_names:
        return
    with conn.cursor() as cur:
        if conn.vendor == "postgresql":
            if TABLE in table_names:
                cur.execute(f"DELETE FROM {TABLE} s WHERE NOT EXISTS "
                            "(SELECT 1 FROM trajectories_trajectory t WHERE t.id = s.trajectory_id)")
            return
        cur.execute("SELECT name FROM sqlite_master WHERE name = %s", [TABLE])
        if cur.fetchone() is None:
            return
        cur.execute("SELECT EXISTS (SELECT 1 FROM trajectories_trajectory)")
        if not cur.fetchone()[0]:
            cur.execute(f"INSERT INTO {TABLE} ({TABLE}) VALUES ('delete-all')")


def words(query: str) -> list[str]:
    return _WORD.findall(query)[:20]


def matching(qs: QuerySet, query: str) -> QuerySet:
    """``qs`` narrowed to trajectories containing every word of ``query``."""
    terms = words(query)
    if not terms:
        return qs
    if connection.vendor == "postgresql":
        # Every lexeme of every word. Documents are stored stripped of positions (a tsvector is capped
        # at 1 MB), so mia_li_3668 matches its three lexemes anywhere rather than only in a row.
        text = " ".join(terms)
        sql = f"SELECT trajectory_id FROM {TABLE} WHERE document @@ plainto_tsquery('simple', %s)"
        if not _common_on_postgres(text):
            # A rare word: OFFSET 0 keeps the planner from folding the subquery into an id-ordered
            # walk that tests every document (2 s on 100k); the GIN index answers it at once.
            # A common word is best left to that walk: it finds a page of matches in a few rows.
            sql += " OFFSET 0"
        return qs.filter(id__in=RawSQL(sql, [text]))
    # FTS5: each word quoted (so nothing the user types is FTS syntax), all required.
    fts_query = " ".join('"' + t.replace('"', '""') + '"' for t in terms)
    return qs.filter(id__in=RawSQL(f"SELECT rowid FROM {TABLE} WHERE {TABLE} MATCH %s", [fts_query]))


def _common_on_postgres(text: str, share: float = 0.02) -> bool:
    """Whether the words match more than ``share`` of the documents, by the planner's own
    statistics (ANALYZE keeps the most common lexemes of the column): a millisecond to ask."""
    with connection.cursor() as cur:
        cur.execute(f"EXPLAIN (FORMAT JSON) SELECT 1 FROM {TABLE} WHERE document @@ plainto_tsquery('simple', %s)",
                    [text])
        plan = cur.fetchone()[0]
        plan = json.loads(plan) if isinstance(plan, str) else plan
        cur.execute("SELECT reltuples FROM pg_class WHERE relname = %s", [TABLE])
        row = cur.fetchone()
    total = row[0] if row else 0
    return total > 0 and plan[0]["Plan"]["Plan Rows"] > share * total


def create(schema_editor) -> None:
    statements = [CREATE_SQLITE] if schema_editor.connection.vendor == "sqlite" else CREATE_POSTGRES
    for sql in statements:
        schema_editor.execute(sql)


def drop(schema_editor) -> None:
    schema_editor.execute(DROP_SQLITE if schema_editor.connection.vendor == "sqlite" else DROP_POSTGRES)
