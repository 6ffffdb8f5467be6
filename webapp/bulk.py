"""Bulk loading: many rows of one table, written the way each database loads fastest, inside the caller's
transaction: ``COPY ... FROM STDIN`` on PostgreSQL, one prepared ``INSERT`` run by ``executemany`` on SQLite.

Rows are plain tuples in the order of the columns given (an importer builds them straight from its records,
without a model instance per row: building ~27,000 Message instances and their SQL was most of an import's
time). The values are what Django's ORM stores for the same fields: a JSONField's value is written as
``json.dumps(value)`` text (SQLite keeps that text; PostgreSQL parses it into jsonb), a DateTimeField's
through the backend's own adapter, the rest as they are. So a bulk-loaded row equals one saved by
``bulk_create`` (tests/webapp/test_import_rows_identical.py compares them field by field).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

from django.db import connection
from django.db.models import DateTimeField, JSONField, Model

_dumps = json.JSONEncoder().encode  # what json.dumps(value) gives, which is what Django's JSONField writes


class Table:
    """One model's table and the columns a loader writes (named by column, checked against the model)."""

    def __init__(self, model: type[Model], columns: Sequence[str]):
        by_column = {f.column: f for f in model._meta.concrete_fields}
        unknown = [c for c in columns if c not in by_column]
        if unknown:
            raise ValueError(f"{model.__name__} has no column {', '.join(unknown)}")
        self.model = model
        self.name = model._meta.db_table
        self.columns = tuple(columns)
        self._json = tuple(i for i, c in enumerate(columns) if isinstance(by_column[c], JSONField))
        self._datetimes = tuple(i for i, c in enumerate(columns) if isinstance(by_column[c], DateTimeField))

    def json_text(self, rows: Iterable[tuple]) -> Iterator[list]:
        """The rows with each JSONField value as the text Django writes for it (``json.dumps``), which both
        databases take. Pure: a reader process can do it, leaving ``load(..., json_as_text=True)`` only the
        writing."""
        json_at = self._json
        for row in rows:
            row = list(row)
            for i in json_at:
                value = row[i]
                if value is not None:
                    # most messages have no tool calls and no meta: json.dumps of an empty list or dict, 50,000
                    # times a file, was a tenth of an import
                    row[i] = ("[]" if type(value) is list else "{}" if type(value) is dict else _dumps(value)) \
                        if not value else _dumps(value)
            yield row

    def load(self, rows: Iterable[tuple | list], *, json_as_text: bool = False) -> int:
        """Write the rows in the caller's transaction (their JSON values already text, with ``json_as_text``);
        returns how many. A row the database refuses raises Django's DatabaseError (IntegrityError...), as the ORM
        would."""
        connection.ensure_connection()
        with connection.wrap_database_errors:  # the driver's own errors become Django's
            return self._load(rows, json_as_text)

    def _load(self, rows: Iterable[tuple | list], json_as_text: bool) -> int:
        if not json_as_text and self._json:
            rows = self.json_text(rows)
        if connection.vendor == "postgresql":
            return copy_rows(self.name, self.columns, rows)
        if connection.vendor != "sqlite":
            raise NotImplementedError(f"bulk loading into {connection.vendor}")
        if self._datetimes:
            rows = self._adapted(rows)
        stored = rows if isinstance(rows, list) else list(rows)
        sql = (f'INSERT INTO "{self.name}" ({", ".join(f"{chr(34)}{c}{chr(34)}" for c in self.columns)}) '
               f"VALUES ({', '.join('?' * len(self.columns))})")
        connection.connection.executemany(sql, stored)  # the raw sqlite3 connection: no per-row wrapping
        return len(stored)

    def _adapted(self, rows: Iterable[tuple | list]) -> Iterator[list]:
        """SQLite stores a datetime as the text Django's backend makes of it."""
        adapt, at = connection.ops.adapt_datetimefield_value, self._datetimes
        for row in rows:
            row = list(row)
            for i in at:
                row[i] = adapt(row[i])
            yield row


def copy_rows(table: str, columns: Sequence[str], rows: Iterable[tuple | list]) -> int:
    """``COPY table (columns) FROM STDIN`` of the rows, on PostgreSQL, in the caller's transaction; how many. Also for
    a table that is not a model's (the search index). The driver's errors become Django's DatabaseError."""
    n = 0
    quoted = ", ".join(connection.ops.quote_name(c) for c in columns)
    sql = f"COPY {connection.ops.quote_name(table)} ({quoted}) FROM STDIN"
    connection.ensure_connection()
    with connection.wrap_database_errors, connection.cursor() as cur, cur.cursor.copy(sql) as copy:
        for row in rows:
            copy.write_row(row)
            n += 1
    return n


@contextmanager
def checked_as_written(*models: type[Model]):
    """Inside the caller's transaction, the foreign keys of these models' tables checked at the end of each statement
    rather than at commit (PostgreSQL; Django makes them DEFERRABLE INITIALLY DEFERRED): an import that loads rows
    in their order (tasks, trajectories, messages) meets no violation either way, and the checks of its ~27 message
    rows a trajectory then run while its readers go on, instead of all at once in a commit they hold up (1.2 s of
    10,000 trajectories' import). Deferred again on the way out; a violation raises IntegrityError at the
    statement. SQLite keeps a count, not a queue, of deferred violations: nothing to do there."""
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cur:
        cur.execute("SELECT quote_ident(n.nspname) || '.' || quote_ident(c.conname) FROM pg_constraint c "
                    "JOIN pg_namespace n ON n.oid = c.connamespace "
                    "WHERE c.contype = 'f' AND c.condeferrable AND c.condeferred AND c.conrelid = ANY(%s::regclass[])",
                    [[m._meta.db_table for m in models]])
        names = ", ".join(name for (name,) in cur.fetchall())
        if not names:
            yield
            return
        cur.execute(f"SET CONSTRAINTS {names} IMMEDIATE")
    yield  # on an error the caller's transaction (or savepoint) is rolled back, which undoes SET CONSTRAINTS
    with connection.cursor() as cur:
        cur.execute(f"SET CONSTRAINTS {names} DEFERRED")
