"""The deferred full-text search index: the one module that knows it exists.

Each entity has a search document in ``entity_search`` (its name, type and observations,
lower-cased with ``python_lower``), which the FTS5 table ``entity_fts`` indexes (trigram
tokenizer). Writes keep the documents in step and queue every changed one in ``search_pending``
(triggers of migrations 0001–0003); the index itself catches up with the queue in batches:

* **sync of the documents** — per row (the triggers), batched (each touched document written
  once at the end of the write) or a rebuild of all documents and the index (a large import);
  :func:`sync_mode` chooses from the size of the write, :func:`keeping_in_sync` applies it;
* **catch-up** — :func:`catch_up` indexes the queue in the caller's transaction; a write whose
  queue reaches :data:`SEARCH_BACKLOG` catches up before it commits (:func:`catch_up_if_full`),
  a search catches up first (``Store.run_search``), and so do an idle server
  (:data:`IDLE_CATCH_UP_SECONDS`, :data:`CATCH_UP_POLL_SECONDS`) and shutdown
  (``Store.catch_up_when_idle``);
* **the backlog view** — a search that still finds documents waiting searches the index
  without them plus a connection-private index of just those documents (:func:`match_tables`),
  so every committed write is found whether or not the index caught up.

Applied migrations are history: the triggers stay as 0001–0003 created them, and the search
document built here (:data:`DOCUMENT`) is exactly the one the triggers of 0002 build, in the
same portable form (an ordered subquery, no aggregate ``ORDER BY``, which needs SQLite 3.44+).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from typing import cast

import apsw

from graph_memory.db import schema

# FTS5 'hashsize' (bytes of pending index terms kept in memory): its default, and the size used
# while a rebuild indexes every document.
_FTS_HASH = 1024 * 1024
_BULK_FTS_HASH = 128 * 1024 * 1024
# FTS5's merge settings while a rebuild writes the index: no merging as segments are written
# ('automerge' 0; 'crisismerge' at FTS5's largest value), since the 'optimize' that follows merges
# them all once; and the defaults they are set back to when the index had none of its own.
_REBUILD_MERGE = {"automerge": 0, "crisismerge": 1999}
_DEFAULT_MERGE = {"automerge": 4, "crisismerge": 16}
# The per-row sync triggers (those the search_sync switch guards), in creation order.
_SYNC_TRIGGERS = ("SELECT name, sql FROM sqlite_schema WHERE type = 'trigger' AND sql LIKE '%search_sync%' "
                  "ORDER BY rowid")
# An entity's search document, as the triggers of migration 0002 build it: its observations
# lower-cased with python_lower() and joined by newlines in id order ({0}: the entity id column).
DOCUMENT = ("(SELECT coalesce(group_concat(text, char(10)), '') "
            "FROM (SELECT python_lower(o.content) AS text FROM observations o WHERE o.entity_id = {0} "
            "ORDER BY o.id))")
# The same documents for many entities at once: the observations joined first and lower-cased
# in one call per entity (one Python call instead of one per observation, a fifth of a rebuild's
# document step). Equal to DOCUMENT: the newline that joins them is neither cased nor
# case-ignorable, so no lower-casing rule (Greek final sigma) looks across it.
_BULK_DOCUMENT = ("python_lower((SELECT coalesce(group_concat(content, char(10)), '') "
                  "FROM (SELECT o.content FROM observations o WHERE o.entity_id = {0} ORDER BY o.id)))")
_INSERT_DOCUMENTS = ("INSERT INTO entity_search (entity_id, name, entity_type, observations) "
                     "SELECT e.id, python_lower(e.name), python_lower(e.entity_type), "
                     + _BULK_DOCUMENT.format("e.id") + " FROM entities e")
# The FTS index catches up (catch_up) within the write that brings this many entities' changed
# documents into search_pending (migration 0003), so the backlog stays small and so does the
# catch-up a later search pays for. One catch-up writes one index segment for all of them, where
# indexing each write on its own wrote one per write: about 0.15 ms per write at 100k entities,
# most of a small write's cost (issue 6).
SEARCH_BACKLOG = 64
# How long a search waits for the write lock to catch the index up (ms; a write holds it for a
# few ms) before it searches around the backlog instead (match_tables).
SEARCH_LOCK_WAIT_MS = 250
# After a write, the FTS index catches up once no other write has come for this long (seconds),
# so changed documents wait for it only while writes keep coming.
IDLE_CATCH_UP_SECONDS = 0.5
# Between writes, how often a server looks for documents other processes left waiting (seconds):
# e.g. a server of a version before migration 0003 still running beside this one, whose own
# searches read the index alone.
CATCH_UP_POLL_SECONDS = 5.0
# A write adding at least this many observations to existing entities writes each touched
# document once at the end instead of once per observation, which is quadratic in the batch.
# Below it the per-row triggers are cheaper (two queries fewer).
BATCHED_SYNC_FROM = 16
# Rebuilding every document and the index costs about as much per entity already in the database
# as syncing row by row costs per merged entity divided by this factor; above it, a merge rebuilds.
BULK_FACTOR = 10

_SEARCH_BEHIND = "SELECT EXISTS (SELECT 1 FROM search_pending)"
_BACKLOG_FULL = "SELECT count(*) >= ? FROM search_pending"


class SyncMode(Enum):
    """How a write keeps the search documents in step (:func:`sync_mode`)."""

    ROW = "row"            # the per-row triggers
    BATCHED = "batched"    # each new or grown document written once, at the end of the write
    REBUILD = "rebuild"    # every document and the whole FTS index rebuilt once, at the end


def sync_mode(*, new_entities: int = 0, grown_observations: int = 0, merged_entities: int | None = None,
              existing_entities: int = 0) -> SyncMode:
    """The cheapest way to keep the search documents in step with a write of this size.

    Args:
        new_entities: entities the write creates (with their observations): batched, since the
            triggers would rewrite a new entity's document once per observation.
        grown_observations: observations it adds to entities that exist: batched from
            :data:`BATCHED_SYNC_FROM`, per row below.
        merged_entities: for a merge (an import), the entities it merges into what exists
            (created, or grown by the observations they lack), when ``existing_entities`` are
            already stored: a rebuild when ``merged_entities × BULK_FACTOR ≥ existing_entities``,
            per row below (the other two counts are then not looked at).
    """
    if merged_entities is not None:
        return SyncMode.REBUILD if merged_entities * BULK_FACTOR >= existing_entities else SyncMode.ROW
    if new_entities or grown_observations >= BATCHED_SYNC_FROM:
        return SyncMode.BATCHED
    return SyncMode.ROW


@contextmanager
def keeping_in_sync(conn: apsw.Connection, mode: SyncMode, *, grows_existing: bool = True) -> Iterator[None]:
    """Inside a write transaction: the body's writes keep the search documents in step in
    ``mode`` (:func:`sync_mode`). ``grows_existing`` (batched only): whether the body may add
    observations to entities that existed before it (False saves a query)."""
    if mode is SyncMode.BATCHED:
        with batched(conn, grows_existing=grows_existing):
            yield
    elif mode is SyncMode.REBUILD:
        with rebuild(conn):
            yield
    else:
        yield


@contextmanager
def rebuild(conn: apsw.Connection) -> Iterator[None]:
    """Inside a write transaction: switch the per-row search sync off, then rebuild the
    search documents and the FTS index once at the end (much faster for large imports).
    Everything stays in the caller's transaction, so a failure leaves no trace.

    The sync triggers are dropped for the body and created again from their own SQL (the text
    migrations 0001-0003 stored) at the end: switched off, each still tested the switch for every
    row inserted, about a third of an import's observation inserts (issue 15). If the body
    raises, they are created again before the error goes on, so a caller that commits anyway
    still has them."""
    conn.execute("UPDATE search_sync SET enabled = 0 WHERE id = 1")
    with schema.set_aside(conn, "TRIGGER", _SYNC_TRIGGERS):
        yield
        conn.execute("DELETE FROM entity_search")
        conn.execute(_INSERT_DOCUMENTS)
        _rebuild_fts(conn)
        conn.execute("DELETE FROM search_pending")  # the rebuilt index holds every document as it is
    conn.execute("UPDATE search_sync SET enabled = 1 WHERE id = 1")


def _rebuild_fts(conn: apsw.Connection) -> None:
    """Index every search document anew (FTS5 'rebuild'), then merge the index into one segment."""
    before = {cast(str, k): v for k, v in conn.execute(
        "SELECT k, v FROM entity_fts_config WHERE k IN ('automerge', 'crisismerge')").fetchall()}
    # A 128 MiB pending-terms hash instead of FTS5's 1 MiB, and no merging while the segments
    # are written: each segment is then written once and merged once, by the 'optimize' below.
    # At 1,000,000 entities rebuild + optimize took 34 + 11 s with a 32 MiB hash and FTS5's
    # merging, 19 + 10 s so (issue 15); that import's peak memory did not grow with the hash.
    _configure(conn, {"hashsize": _BULK_FTS_HASH, **_REBUILD_MERGE})
    conn.execute("INSERT INTO entity_fts (entity_fts) VALUES ('rebuild')")
    # One segment instead of the rebuild's dozens: a trigram lookup then reads one b-tree
    # (rare-term searches cost a third less at 100k entities), and the first writes after an
    # import no longer trigger a merge of the whole index (~1 s at 100k; issue 6). Costs about
    # 1 s per 100k entities, once.
    conn.execute("INSERT INTO entity_fts (entity_fts) VALUES ('optimize')")
    _configure(conn, {"hashsize": _FTS_HASH, **{k: before.get(k, v) for k, v in _DEFAULT_MERGE.items()}})


def _configure(conn: apsw.Connection, settings: dict[str, apsw.SQLiteValue]) -> None:
    """Set FTS5 configuration options of the index (stored in entity_fts_config)."""
    for key, value in settings.items():
        conn.execute("INSERT INTO entity_fts (entity_fts, rank) VALUES (?, ?)", (key, value))


@contextmanager
def batched(conn: apsw.Connection, *, grows_existing: bool = True) -> Iterator[None]:
    """Inside a write transaction that only *adds* entities and observations: switch the per-row
    search sync off, then write the search document of each new or grown entity once.

    The per-row triggers rewrite (and re-index) an entity's whole document for every observation
    added, which is quadratic in a large batch: 10,000 observations for one entity took minutes
    with the write lock held, and even one new entity with five observations was indexed eleven
    times. Here each touched document is written once (and the ``entity_search`` triggers queue
    it once for the FTS index, in search_pending). Rows of this transaction are recognised by
    their ids (INTEGER PRIMARY KEY: above the maximum before). A failure rolls the whole
    transaction back, the sync switch included. Inside an enclosing batch or :func:`rebuild`
    (sync already off) it does nothing: the enclosing one writes the documents.

    Args:
        grows_existing: whether the transaction may add observations to entities that existed
            before it (False for create_entities, which saves a query).
    """
    if not conn.execute("SELECT enabled FROM search_sync WHERE id = 1").fetchall()[0][0]:
        yield
        return
    (max_entity,) = conn.execute("SELECT coalesce(max(id), 0) FROM entities").fetchall()[0]
    max_observation: apsw.SQLiteValue = 0
    if grows_existing:
        (max_observation,) = conn.execute("SELECT coalesce(max(id), 0) FROM observations").fetchall()[0]
    conn.execute("UPDATE search_sync SET enabled = 0 WHERE id = 1")
    yield
    conn.execute("UPDATE search_sync SET enabled = 1 WHERE id = 1")
    if grows_existing:
        conn.execute(
            "UPDATE entity_search SET observations = " + DOCUMENT.format("entity_search.entity_id") +
            # No DISTINCT in the subquery: with it the planner scans the whole observations index
            # instead of the rowid range of this transaction (18 ms per call at 100k entities).
            " WHERE entity_id IN (SELECT entity_id FROM observations WHERE id > ?) AND entity_id <= ?",
            (max_observation, max_entity),
        )
    conn.execute(_INSERT_DOCUMENTS + " WHERE e.id > ?", (max_entity,))


# -- catch-up ---------------------------------------------------------------------------------


def behind(conn: apsw.Connection) -> bool:
    """Whether changed search documents wait for the FTS index (rows in search_pending)."""
    return bool(conn.execute(_SEARCH_BEHIND).fetchall()[0][0])


def backlog_full(conn: apsw.Connection) -> bool:
    """Whether :data:`SEARCH_BACKLOG` or more documents wait: a write then catches up before it
    commits."""
    return bool(conn.execute(_BACKLOG_FULL, (SEARCH_BACKLOG,)).fetchall()[0][0])


def catch_up(conn: apsw.Connection) -> int:
    """Bring the FTS index up to date with the search documents, in the caller's transaction.

    For every entity in search_pending: a FTS5 'delete' of the version the index holds (stored in
    that row), then an insert of the current document, if the entity still has one; the rows are
    then removed. All of it is one savepoint (all or nothing), and one new index segment. Plain
    SQL, no application function: any connection can run it, e.g. a backup's copy.

    Returns:
        How many entities' documents were indexed (0 when the index was up to date).
    """
    count = cast(int, conn.execute("SELECT count(*) FROM search_pending").fetchall()[0][0])
    if not count:
        return 0
    conn.execute("SAVEPOINT search_catch_up")
    try:
        conn.execute("INSERT INTO entity_fts (entity_fts, rowid, name, entity_type, observations) "
                     "SELECT 'delete', entity_id, name, entity_type, observations FROM search_pending "
                     "WHERE name IS NOT NULL ORDER BY entity_id")
        conn.execute("INSERT INTO entity_fts (rowid, name, entity_type, observations) "
                     "SELECT s.entity_id, s.name, s.entity_type, s.observations FROM search_pending p "
                     "JOIN entity_search s ON s.entity_id = p.entity_id ORDER BY p.entity_id")
        conn.execute("DELETE FROM search_pending")
    except BaseException:
        # SQLite may have rolled the whole transaction back itself (e.g. on a full disk): then
        # there is no savepoint left, and the original error is what the caller must see.
        if conn.in_transaction:
            conn.execute("ROLLBACK TO search_catch_up")
            conn.execute("RELEASE search_catch_up")
        raise
    conn.execute("RELEASE search_catch_up")
    return count


def catch_up_if_full(conn: apsw.Connection) -> int:
    """At the end of a write: :func:`catch_up` when the backlog is full, else nothing.

    Returns:
        How many documents were indexed.

    Raises:
        apsw.Error: the catch-up failed (its savepoint undone; the caller decides whether the
            write itself survived).
    """
    return catch_up(conn) if backlog_full(conn) else 0


# -- the backlog view for readers -------------------------------------------------------------

# The FTS5 tables a search matches against: "{t}" in search.py's SQL. While changed documents
# wait for the index (search_pending, migration 0003), the index's own entries for those entities
# are left out and a connection-private index of just their current documents is searched beside it.
MAIN = ("entity_fts", "")
_MAIN_CURRENT = ("entity_fts", " AND f.rowid NOT IN (SELECT entity_id FROM search_pending)")
BACKLOG = ("search_backlog", "")
_BACKLOG_TABLE = ("CREATE VIRTUAL TABLE IF NOT EXISTS temp.search_backlog USING fts5("
                  "name, entity_type, observations, tokenize = 'trigram case_sensitive 1')")


def match_tables(conn: apsw.Connection) -> tuple[tuple[str, str], ...]:
    """The FTS tables to match against, as ``(table, extra condition on f.rowid)``: the index
    alone when it is up to date; else the index without the entities whose documents changed,
    plus a temporary index (connection-private, in memory) of those documents as they are now
    (:data:`BACKLOG`). Writes nothing to the database, so a search works while another process
    holds the write lock or the disk is full; ``Store.run_search`` normally catches the index up
    first."""
    if not behind(conn):
        return (MAIN,)
    conn.execute(_BACKLOG_TABLE)
    conn.execute("DELETE FROM temp.search_backlog")
    conn.execute("INSERT INTO temp.search_backlog (rowid, name, entity_type, observations) "
                 "SELECT s.entity_id, s.name, s.entity_type, s.observations FROM search_pending p "
                 "JOIN entity_search s ON s.entity_id = p.entity_id")
    return (_MAIN_CURRENT, BACKLOG)
