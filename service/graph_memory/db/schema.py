"""Schema objects a bulk write sets aside: dropped for the write, created again from their own SQL.

SQLite keeps the text each trigger and index was created with (``sqlite_schema.sql``): creating
them again from it restores exactly what the migrations made, inside the caller's transaction, so
a rollback restores them too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import cast

import apsw

__all__ = ["set_aside"]


@contextmanager
def set_aside(conn: apsw.Connection, kind: str, query: str) -> Iterator[None]:
    """Inside a write transaction: drop the ``kind`` objects (``"TRIGGER"`` or ``"INDEX"``) that
    ``query`` selects as ``(name, sql)`` rows (in creation order) for the body, and create them
    again at its end. If the body raises, they are created again before the error goes on (while
    the transaction is still open), so a caller that carries on and commits still has them."""
    found = conn.execute(query).fetchall()
    for name, _ in found:
        conn.execute(f'DROP {kind} "{cast(str, name)}"')
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            _create(conn, found)
        raise
    _create(conn, found)


def _create(conn: apsw.Connection, found: list[tuple[apsw.SQLiteValue, ...]]) -> None:
    for _, sql in found:
        conn.execute(cast(str, sql))
