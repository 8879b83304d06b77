"""The read-only service behind ``graph-memory view``: bounded reads of a database opened read-only.

:class:`GraphBrowser` keeps one read-only :class:`~graph_memory.db.backend.Backend` (the
database opened as ``export`` opens it: no file created or changed, pending migrations refused)
and runs every read in one read transaction. It
never writes, not even the search index's catch-up: a search runs as a plain read, which searches
around documents still waiting for the index (:func:`graph_memory.db.index.match_tables`), so it
finds every committed write of a server working on the same file.

A read-only connection may read a frozen picture of the file (SQLite's ``immutable`` mode, used
when no other connection is open; see :meth:`Store.open_readonly`); the browser therefore opens
the file again whenever the database, its ``-wal`` or its ``-shm`` changed since it opened it,
which costs about a millisecond and happens only after another process wrote. The overview,
whose counts scan tables, is kept until the graph changes (``graph_version``).

Every method is safe to call from several threads (one lock around the connection). Errors:
``StoreError`` (the database cannot be read), ``InvalidQuery`` (a search that cannot run).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from graph_memory.db.backend import Backend, Graph
from graph_memory.db.explore import Change, EntityPage, Neighborhood
from graph_memory.errors import GraphError, StoreError
from graph_memory.hints import graph_memory_command
from graph_memory.logs import get_logger
from graph_memory.models import Entity, Mode
from graph_memory.service import check_unicode, open_backend
from graph_memory.settings import Settings

T = TypeVar("T")
log = get_logger("graph_memory.browse")

# Caps of the page: no answer grows with the graph.
MAX_SEARCH_RESULTS = 200
MAX_NEIGHBORHOOD = 150
MAX_HOPS = 2
ENTITY_PAGE_ITEMS = 200
OVERVIEW_ITEMS = 15
# Characters of an observation shown around its first hit.
_BEFORE_HIT, _AFTER_HIT = 60, 160
# fts-mode words that are syntax, not text to highlight.
_FTS_SYNTAX = {"and", "or", "not", "near"}


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One search result: the entity's ``name`` and ``entity_type``, ``field`` where the query was
    found first (``"name"``, ``"entityType"``, ``"observation"``; ``""`` when the page cannot
    point at it, e.g. an empty query), and ``snippet``: that text cut around the hit, as
    ``(text, is_hit)`` pieces in order."""

    name: str
    entity_type: str
    field: str
    snippet: list[tuple[str, bool]]
    observations: int

    def to_dict(self) -> dict[str, Any]:
        """``{"name", "entityType", "field", "snippet": [{"text", "hit"}], "observations"}``."""
        return {"name": self.name, "entityType": self.entity_type, "field": self.field,
                "snippet": [{"text": text, "hit": hit} for text, hit in self.snippet],
                "observations": self.observations}


@dataclass(frozen=True, slots=True)
class SearchPage:
    """The first ``len(hits)`` results of ``query`` in ``mode``; ``more``: further results exist."""

    query: str
    mode: Mode
    hits: list[SearchHit]
    more: bool

    def to_dict(self) -> dict[str, Any]:
        """``{"query", "mode", "results", "more"}``."""
        return {"query": self.query, "mode": self.mode, "results": [h.to_dict() for h in self.hits],
                "more": self.more}


@dataclass(slots=True)
class Overview:
    """What the memory holds: ``totals``, the most frequent entity and relation types (with
    counts), the most connected entities (these counted at ``counted_at``, ISO 8601 UTC;
    ``stale``: the graph changed since and a new count is under way) and the latest additions."""

    totals: dict[str, int]
    entity_types: list[tuple[str, int]]
    relation_types: list[tuple[str, int]]
    most_connected: list[tuple[str, str | None, int]]
    counted_at: str = ""
    stale: bool = False
    recent: list[Change] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The viewer's JSON shape."""
        return {
            "totals": dict(self.totals),
            "entityTypes": [{"type": t, "count": n} for t, n in self.entity_types],
            "relationTypes": [{"type": t, "count": n} for t, n in self.relation_types],
            "mostConnected": [{"name": name, "entityType": kind, "degree": n} for name, kind, n in self.most_connected],
            "countedAt": self.counted_at,
            "stale": self.stale,
            "recent": [c.to_dict() for c in self.recent],
        }


def _file_state(path: Path) -> tuple[tuple[int, int, int] | None, ...]:
    """``(inode, size, mtime)`` of the database, its ``-wal`` and ``-shm`` (None when absent)."""
    out: list[tuple[int, int, int] | None] = []
    for suffix in ("", "-wal", "-shm"):
        try:
            st = os.stat(f"{path}{suffix}")
        except FileNotFoundError:
            out.append(None)
        else:
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


class GraphBrowser:
    """Bounded, read-only reads of one database for the viewer (see the module docstring).

    Create with :meth:`open` (raises what ``open_backend(settings, "current")`` raises);
    :meth:`close` when done.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._backend: Backend | None = None
        self._state: tuple[tuple[int, int, int] | None, ...] = ()
        self._counted: tuple[int | None, Overview] | None = None   # (graph_version, counts)
        self._count_lock = threading.Lock()
        self._counting: threading.Thread | None = None

    @classmethod
    def open(cls, settings: Settings) -> GraphBrowser:
        """Open the database read-only now, so that a missing or unusable one is refused at start."""
        browser = cls(settings)
        with browser._lock:
            backend = browser._current()
            if not backend.has_graph():   # an empty file: every page would fail (found by QA)
                backend.close()
                browser._backend = None
                raise StoreError(f"the database {settings.database_label} holds no memory yet (no migration has "
                                 f"set it up: an empty file?); the server's first start sets it up, as does "
                                 f"{graph_memory_command('migrate', database=settings.database_label)}")
        browser._start_count()  # the overview's counts, ready by the time a page asks
        return browser

    @property
    def path(self) -> Path:
        """The database file."""
        return self.settings.database_path

    def close(self) -> None:
        """Close the database (after a count under way)."""
        if self._counting is not None:
            self._counting.join()
        with self._lock:
            if self._backend is not None:
                self._backend.close()
                self._backend = None

    def _current(self) -> Backend:
        """The open backend, opened again when another process changed the files since (a
        read-only SQLite file may be read as a frozen picture; see the module docstring)."""
        state = _file_state(self.settings.database_path) if self.settings.database_url is None else ()
        if self._backend is not None and state != self._state:
            self._backend.close()
            self._backend = None
        if self._backend is None:
            self._backend = open_backend(self.settings, "current")
            self._state = state
        return self._backend

    def _read(self, operation: Callable[[Graph], T]) -> T:
        with self._lock:
            return self._current().run_read(operation)

    # -- the reads ------------------------------------------------------------------------------

    def search(self, query: str, mode: Mode = "substring", limit: int = 50) -> SearchPage:
        """The first ``limit`` (at most :data:`MAX_SEARCH_RESULTS`) entities ``query`` finds in
        ``mode`` (the ``search_nodes`` rules), each with where it matched.

        Raises: InvalidQuery (too long, bad fts syntax, unknown mode); InvalidInput (not UTF-8).
        """
        check_unicode(query, "query")
        limit = max(1, min(int(limit), MAX_SEARCH_RESULTS))
        # A plain read: it searches around documents waiting for the index and never writes.
        found = self._read(lambda g: g.find_entities(query, mode, limit + 1))
        terms = _terms(query, mode)
        return SearchPage(query, mode, [_hit(e, terms) for e in found[:limit]], len(found) > limit)

    def entity(self, name: str, offset: int = 0) -> EntityPage | None:
        """The entity page of ``name`` (:data:`ENTITY_PAGE_ITEMS` observations and relations each
        way at most, from position ``offset`` of each list on, with totals), or None when there is
        no such entity."""
        check_unicode(name, "name")
        offset = max(0, min(int(offset), 1 << 62))   # SQLite integers are 64-bit
        return self._read(lambda g: g.entity_page(name, ENTITY_PAGE_ITEMS, offset))

    def neighborhood(self, name: str, hops: int = 1, limit: int = 40) -> Neighborhood:
        """The neighbourhood of ``name``: ``hops`` (1 or 2) relations away, at most ``limit``
        (≤ :data:`MAX_NEIGHBORHOOD`) entities, nearest first, with how much is left out."""
        check_unicode(name, "name")
        hops = max(0, min(int(hops), MAX_HOPS))
        limit = max(1, min(int(limit), MAX_NEIGHBORHOOD))
        return self._read(lambda g: g.neighborhood([name], hops, limit))

    def overview(self, *, fresh: bool = False) -> Overview:
        """Totals, types, the most connected entities and the latest additions (``fresh``: wait
        for counts of the graph as it is now).

        The counts scan tables (a few hundred milliseconds at 100,000 entities), so they are
        counted on a connection of their own in a background thread, when the browser opens and
        again whenever the graph changed (``graph_version``); meanwhile the last counts are
        answered, marked ``stale``. Only the very first overview waits for a count.
        """
        with self._lock:
            backend = self._current()
            counters = backend.change_counters()
            version = counters[1] if counters else None
            recent = backend.run_read(lambda g: g.recent_changes(OVERVIEW_ITEMS))
        counted = self._counted
        if counted is None:
            self._start_count().join()
            counted = self._counted
            if counted is None:  # the count failed (logged): count here, raising what it raises
                self._count()
                counted = self._counted
            assert counted is not None
        stale = version is None or counted[0] != version
        if stale:
            counting = self._start_count()
            if fresh:
                counting.join()
                counted = self._counted or counted
                stale = False
        base = counted[1]
        return Overview(base.totals, base.entity_types, base.relation_types, base.most_connected,
                        base.counted_at, stale, recent)

    def _start_count(self) -> threading.Thread:
        """The running count, or a new one started."""
        with self._count_lock:
            if self._counting is None or not self._counting.is_alive():
                self._counting = threading.Thread(target=self._count_logged, name="graph-memory-view-count",
                                                  daemon=True)
                self._counting.start()
            return self._counting

    def _count_logged(self) -> None:
        try:
            self._count()
        except GraphError as exc:
            log.warning("view_count_failed", error=str(exc)[:500])

    def _count(self) -> None:
        """Count on a read-only connection of its own (the page's reads go on meanwhile)."""
        backend = open_backend(self.settings, "current")
        try:
            def counts(g: Graph) -> Overview:
                entity_types, relation_types = g.type_counts(OVERVIEW_ITEMS)
                return Overview(g.totals(), entity_types, relation_types, g.most_connected(OVERVIEW_ITEMS),
                                datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))

            counters = backend.change_counters()  # before counting: a write landing meanwhile counts again
            overview = backend.run_read(counts)
        finally:
            backend.close()
        self._counted = (counters[1] if counters else None, overview)


# -- where a search hit is ----------------------------------------------------------------------


def _terms(query: str, mode: Mode) -> list[str]:
    """The lower-cased texts to point at in a result: the query (substring), its words (words),
    its words outside the syntax (fts)."""
    if mode == "substring":
        return [query.lower()] if query else []
    words = [w.lower() for w in (query.split() if mode == "words" else re.findall(r"\w+", query))]
    if mode == "fts":
        words = [w for w in words if w not in _FTS_SYNTAX and len(w) >= 3]
    return list(dict.fromkeys(w for w in words if w))


def _hit(entity: Entity, terms: list[str]) -> SearchHit:
    fields = [("name", entity.name), ("entityType", entity.entity_type)]
    fields += [("observation", o) for o in entity.observations]
    for kind, text in fields:
        if snippet := _snippet(text, terms):
            return SearchHit(entity.name, entity.entity_type, kind, snippet, len(entity.observations))
    if entity.observations:  # found by terms spread over fields, or an empty query: show the first fact
        return SearchHit(entity.name, entity.entity_type, "", _cut(entity.observations[0], 0, 0),
                         len(entity.observations))
    return SearchHit(entity.name, entity.entity_type, "", [], 0)


def _snippet(text: str, terms: list[str]) -> list[tuple[str, bool]]:
    """``text`` around its first hit of a term, as pieces; [] when no term is in it. Positions
    are found in ``text.lower()``, and used only when lower-casing kept the length (it does not
    for a few letters such as 'İ'): then the whole piece is marked instead of a wrong span."""
    lowered = text.lower()
    best: tuple[int, int] | None = None
    for term in terms:
        at = lowered.find(term)
        if at >= 0 and (best is None or at < best[0]):
            best = (at, at + len(term))
    if best is None:
        return []
    if len(lowered) != len(text):
        return [(text[:_BEFORE_HIT + _AFTER_HIT] + ("…" if len(text) > _BEFORE_HIT + _AFTER_HIT else ""), True)]
    return _cut(text, *best)


def _cut(text: str, start: int, end: int) -> list[tuple[str, bool]]:
    """``text`` as (before, hit, after) pieces, cut to a window around the hit."""
    left = max(0, start - _BEFORE_HIT)
    right = min(len(text), end + _AFTER_HIT)
    pieces = [("…" if left else "") + text[left:start], text[start:end],
              text[end:right] + ("…" if right < len(text) else "")]
    return [(piece, i == 1) for i, piece in enumerate(pieces) if piece]
