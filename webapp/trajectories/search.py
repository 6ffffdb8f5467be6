"""Full-text search over trajectories, one document per trajectory (its messages'
text, tool names and tool arguments), in the database's own full-text index:
an FTS5 table on SQLite, a GIN-indexed tsvector on PostgreSQL.

System messages are left out: they hold the policy, the same in every episode of
a run, so their words would match everything and tell nothing (and they are most
of each document's size, which is what a PostgreSQL scan pays for).

Words, not substrings: ``mia_li_3668`` or ``refund policy`` match where those
words appear, in any message. A word is a run of letters and digits, its case and
accents dropped: what SQLite's unicode61 tokenizer makes of a document. On
PostgreSQL the same cut (``terms``) is made here, in Python, of the document and of
the query alike, and the document is stored as its set of words (a tsvector
literal): PostgreSQL's own parser, ``to_tsvector``, cost an import of 10,000
trajectories 13 of its 22 seconds. The table is not a Django model (neither index
type is), so the SQL lives here and in migration 0003, and nowhere else.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable

from django.db import connection, connections
from django.db.models import QuerySet
from django.db.models.expressions import RawSQL

from nlac_core.records import TaskRecord, TrajectoryRecord
from webapp import bulk

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
_TERM = re.compile(r"[^\W_]+")  # letters and digits: underscores and punctuation cut words, as in unicode61
MAX_TERM_BYTES = 2046  # a longer lexeme is refused by PostgreSQL (to_tsvector used to skip it)


def _without_latin_accents(word: str) -> str:
    kept: list[str] = []
    for c in unicodedata.normalize("NFKD", word):
        if unicodedata.combining(c) and kept and kept[-1] < "\u0250":  # a mark on a Latin letter
            continue
        kept.append(c)
    return unicodedata.normalize("NFC", "".join(kept))


# ASCII letters lower-cased, every other ASCII character but a digit made a space: str.translate then split cut an
# ASCII text into words three times faster than the regular expression.
_ASCII_CUT = str.maketrans({i: chr(i).lower() if chr(i).isalnum() else " " for i in range(128)})


def terms(text: str) -> set[str]:
    """The words of a text as the index cuts them (see the module's docstring): runs of letters and digits, lower
    case, the accents of Latin letters dropped as unicode61 drops them (Greek or Cyrillic keep theirs)."""
    words = set(text.translate(_ASCII_CUT).split())
    if not text.isascii():
        for w in [w for w in words if not w.isascii()]:
            words.discard(w)
            for x in _TERM.findall(unicodedata.normalize("NFC", w.lower())):
                # NFKD can make punctuation of a letter (U+2474 is "(1)"): cut what folding gave again
                words.update([x] if x.isascii() else _TERM.findall(_without_latin_accents(x)))
    if words and max(map(len, words)) * 4 > MAX_TERM_BYTES:  # rare: only then is a word's UTF-8 length worth asking
        words = {w for w in words if len(w.encode()) <= MAX_TERM_BYTES}
    return words


def indexed(record: TrajectoryRecord) -> str:
    """What the index stores of a trajectory on this database: its document, which FTS5 cuts into words itself
    (SQLite), or the tsvector literal of its words (PostgreSQL). Made where the record is read (an import reader)."""
    text = document(record)
    if connection.vendor != "postgresql":
        return text
    words = terms(text)
    return "'" + "' '".join(words) + "'" if words else ""  # in any order: PostgreSQL sorts a tsvector's words


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


def index(rows: Iterable[tuple[int, str]], *, replace: bool = False) -> None:
    """Add (trajectory id, ``indexed(record)``) pairs to the index, in the caller's transaction. On PostgreSQL the
    documents of new trajectories (an import's) are loaded by COPY; ``replace`` (a rebuild) upserts them in one
    statement instead, replacing a document an id already had. (A deleted trajectory's document may stay until the
    next ``prune``, but its id is never given again: a new trajectory has none.)"""
    rows = list(rows)
    if not rows:
        return
    if connection.vendor == "postgresql" and not replace:
        bulk.copy_rows(TABLE, ("trajectory_id", "document"), rows)
        return
    with connection.cursor() as cur:
        if connection.vendor != "postgresql":
            cur.executemany(f"INSERT INTO {TABLE} (rowid, body) VALUES (%s, %s)", rows)
        else:
            cur.execute(f"INSERT INTO {TABLE} (trajectory_id, document) "
                        "SELECT * FROM unnest(%s::bigint[], %s::text[]::tsvector[]) "
                        "ON CONFLICT (trajectory_id) DO UPDATE SET document = EXCLUDED.document",
                        [[tid for tid, _ in rows], [doc for _, doc in rows]])


def reindex(trajectory_model, message_model, chunk: int = 500) -> int:
    """Index every stored trajectory (again: a document already there is replaced on PostgreSQL; on SQLite ``clear``
    first), from its messages and error, a chunk at a time; how many. Takes the models, so that a migration can
    pass its historical ones."""
    from webapp.trajectories.convert import message_record

    last, n = 0, 0
    while True:
        rows = list(trajectory_model.objects.filter(id__gt=last).order_by("id").values_list("id", "error")[:chunk])
        if not rows:
            return n
        by_trajectory: dict[int, list] = {pk: [] for pk, _ in rows}
        for m in message_model.objects.filter(trajectory_id__in=by_trajectory).order_by("trajectory_id", "position"):
            by_trajectory[m.trajectory_id].append(message_record(m))
        index(((pk, indexed(TrajectoryRecord(task=TaskRecord(external_id=""), messages=tuple(by_trajectory[pk]),
                                             error=error))) for pk, error in rows), replace=True)
        n += len(rows)
        last = rows[-1][0]


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
    typed = words(query)
    if not typed:
        return qs
    if connection.vendor == "postgresql":
        # Every word of every word typed, cut as the documents were. Documents hold no positions (a
        # tsvector is capped at 1 MB), so mia_li_3668 matches its three words anywhere rather than only in a row.
        query = " & ".join(f"'{t}'" for t in sorted(terms(" ".join(typed))))
        if not query:  # words with no letter or digit in them (underscores): nothing holds them, as on SQLite
            return qs.none()
        sql = f"SELECT trajectory_id FROM {TABLE} WHERE document @@ %s::tsquery"
        if not _common_on_postgres(query):
            # A rare word: OFFSET 0 keeps the planner from folding the subquery into an id-ordered
            # walk that tests every document (2 s on 100k); the GIN index answers it at once.
            # A common word is best left to that walk: it finds a page of matches in a few rows.
            sql += " OFFSET 0"
        return qs.filter(id__in=RawSQL(sql, [query]))
    # FTS5: each word quoted (so nothing the user types is FTS syntax), all required.
    fts_query = " ".join('"' + t.replace('"', '""') + '"' for t in typed)
    return qs.filter(id__in=RawSQL(f"SELECT rowid FROM {TABLE} WHERE {TABLE} MATCH %s", [fts_query]))


def _common_on_postgres(query: str, share: float = 0.02) -> bool:
    """Whether the words match more than ``share`` of the documents, by the planner's own
    statistics (ANALYZE keeps the most common lexemes of the column): a millisecond to ask."""
    with connection.cursor() as cur:
        cur.execute(f"EXPLAIN (FORMAT JSON) SELECT 1 FROM {TABLE} WHERE document @@ %s::tsquery", [query])
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
