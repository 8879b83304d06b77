"""What graph-memory does: one method per operation, over a storage backend.

:class:`MemoryService` is the facade the edges call — the MCP tool adapters
(:mod:`graph_memory.mcp.tools`, :mod:`graph_memory.mcp.typed`) and the resource. Each method
checks the input against the :class:`Limits`, runs the operation in one transaction of the
:class:`~graph_memory.db.backend.Backend` (a read, a search or a write: all of it or nothing)
and returns domain values (:mod:`graph_memory.models`, the result classes of
:mod:`graph_memory.db.graph`). The wire text (JSON, ``success``/``message``) is built at the edge.

The CLI's data commands call one function each (:func:`import_file`, :func:`export_graph`,
:func:`backup`, :func:`stats`; :func:`first_start` for ``serve``): each opens the SQLite database
in the mode its command needs and closes it, and returns a domain result the CLI prints.

Errors are :class:`~graph_memory.errors.GraphError` subclasses: ``InvalidInput`` for input over
a limit (nothing is written), ``EntityNotFound``/``Conflict``/``InvalidQuery`` from the graph,
``StoreError`` when the database cannot answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from itertools import accumulate, chain
from math import ceil
from operator import sub
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn, TextIO, TypeVar

from graph_memory import copying
from graph_memory.copying import CopyResult
from graph_memory.db import backend as backends
from graph_memory.db.backend import Backend, Graph, OpenMode
from graph_memory.db.backend import known_migrations as known_migrations  # for the CLI's migrate --check
from graph_memory.db.backend import open_backend as open_backend  # for the CLI's serve
from graph_memory.db.backup import BackupResult, GraphCounts, RestoreResult
from graph_memory.db.paths import side_files
from graph_memory.db.records import ImportRecord
from graph_memory.db.store import DatabaseAppeared, build_in_progress
from graph_memory.errors import (
    Conflict,
    EntityNotFound,
    GraphError,
    InvalidCursor,
    InvalidInput,
    LegacyFormatError,
    OutputError,
    ReplyTooLarge,
    StoreError,
)
from graph_memory.hints import graph_memory_command
from graph_memory.importer import (
    ImportReport,
    Progress,
    first_start_import,
    is_legacy_file,
    legacy_file_changed_since_recorded,
    load_graph,
    log_first_start_import,
    moved_from,
    plan_graph,
    read_legacy_file,
    record_export,
    record_path,
    refused,
    write_atomically,
)
from graph_memory.legacy import (
    LegacyGraph,
    LegacyStream,
    iter_legacy_lines,
    known_lines,
    line_digest,
    line_digests,
    parse_legacy,
    write_legacy,
)
from graph_memory.meshfile import MEMORYMESH, detect, iter_memorymesh_lines, stream_memory_file, write_memorymesh
from graph_memory.models import (
    DEFAULT_WEIGHT,
    AddedObservations,
    DeleteEntitiesResult,
    DeleteObservationsResult,
    DeleteRelationsResult,
    Entity,
    GraphSlice,
    Mode,
    ObservationUpdate,
    Relation,
    UpdatedObservations,
    View,
    WeightChange,
    observation_property,
)
from graph_memory.paging import ReadPosition, SearchPosition, binding, decode_cursor, encode_cursor, parse_since
from graph_memory.pictures import PICTURE_FORMATS, write_picture
from graph_memory.settings import DEFAULT_MAX_REPLY_BYTES, Settings
from graph_memory.wording import plural

if TYPE_CHECKING:
    from structlog.stdlib import BoundLogger


@dataclass(frozen=True, slots=True)
class Limits:
    """Size limits on tool input (configurable through settings; see README)."""

    max_name_length: int = 1024
    max_observation_length: int = 65536
    max_batch: int = 10_000
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES   # 0: no bound

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        """The limits ``MEMORY_MAX_*`` configure."""
        return cls(settings.max_name_length, settings.max_observation_length, settings.max_batch,
                   settings.max_reply_bytes)

    def batch(self, items: Sequence[object], what: str) -> None:
        """Raises InvalidInput when ``items`` has more than ``max_batch`` elements."""
        if len(items) > self.max_batch:
            raise InvalidInput(f"{what}: {len(items)} items in one call; the limit is {self.max_batch} "
                               f"(MEMORY_MAX_BATCH). Split the call.")

    def name(self, value: str, what: str) -> None:
        """Raises InvalidInput for a name/type over ``max_name_length`` or not encodable as UTF-8."""
        _text(value, self.max_name_length, what, "MEMORY_MAX_NAME_LENGTH")

    def observation(self, value: str, what: str) -> None:
        """Raises InvalidInput for an observation over ``max_observation_length`` or not UTF-8."""
        _text(value, self.max_observation_length, what, "MEMORY_MAX_OBSERVATION_LENGTH")


def _text(value: str, limit: int, what: str, setting: str) -> None:
    if len(value) > limit:
        raise InvalidInput(f"{what} is {len(value)} characters long; the limit is {limit} ({setting})")
    check_unicode(value, what)


def check_unicode(value: str, what: str) -> None:
    """Raises InvalidInput when ``value`` cannot be stored or searched: not encodable as UTF-8.

    Over stdio and HTTP a lone surrogate never gets here (the transports read it as U+FFFD, see
    :mod:`graph_memory.surrogates`); only an in-process Python caller can pass one."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{what} contains an unpaired surrogate (\\ud800–\\udfff), which is not "
                           f"valid Unicode text") from None


@dataclass(frozen=True, slots=True)
class TypedValue:
    """One property of a typed entity (see :mod:`graph_memory.mcp.typed`): its observation
    ``content`` (``"<Label>: value"``; None removes the property), the observations of the property
    found by ``key`` (:func:`graph_memory.models.property_key`), and, for a relationship property,
    the ``edge_type`` and the ``targets`` it points to."""

    key: str
    content: str | None
    edge_type: str | None = None
    targets: list[str] = field(default_factory=list)


@dataclass(slots=True)
class TypedUpdate:
    """What an update of a typed entity changed, and the entity afterwards."""

    entity: Entity
    updated: list[tuple[str, str]] = field(default_factory=list)   # (match, replacement)
    added: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    relations_created: list[Relation] = field(default_factory=list)
    relations_deleted: list[Relation] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """True when the update changed anything."""
        return bool(self.updated or self.added or self.deleted or self.relations_created
                    or self.relations_deleted)


class MemoryService:
    """The knowledge graph's operations over ``backend``, with input ``limits``; ``inverses``
    maps each declared relation type to its inverse (:func:`graph_memory.models.inverse_types`):
    every relation a call creates of such a type gets its materialized inverse in the same
    transaction (not listed in the call's result).

    The backend must stay open while the service is used (its owner closes it).
    """

    def __init__(self, backend: Backend, limits: Limits | None = None,
                 inverses: Mapping[str, str] | None = None) -> None:
        self.backend = backend
        self.limits = limits or Limits()
        self.inverses: Mapping[str, str] = inverses or {}

    def _created(self, g: Graph, relations: list[Relation]) -> list[Relation]:
        """``relations`` (just created by ``g``), after materializing their declared inverses."""
        if self.inverses and relations:
            g.create_inverses(relations, self.inverses)
        return relations

    # -- the reference server's tools ---------------------------------------------------------

    def create_entities(self, entities: Sequence[Entity]) -> list[Entity]:
        """Create ``entities`` (reference semantics: an existing name is skipped, not changed).

        Returns the entities created, in input order.
        Raises: InvalidInput (limits, as ``entities.<i>.name``).
        """
        lim = self.limits
        lim.batch(entities, "entities")
        for i, e in enumerate(entities):
            lim.name(e.name, f"entities.{i}.name")
            lim.name(e.entity_type, f"entities.{i}.entityType")
            lim.batch(e.observations, f"entities.{i}.observations")
            for j, o in enumerate(e.observations):
                lim.observation(o, f"entities.{i}.observations.{j}")
        return self.backend.run_write(lambda g: g.create_entities(entities))

    def create_relations(self, relations: Sequence[Relation]) -> list[Relation]:
        """Create ``relations`` (existing ones are skipped). Returns the relations created.

        Raises: InvalidInput (limits); EntityNotFound (an end does not exist: nothing is written).
        """
        self._check_relations(relations, "relations")
        return self.backend.run_write(lambda g: self._created(g, g.create_relations(relations)))

    def add_observations(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[AddedObservations]:
        """Add observations ``[(entity_name, contents)]``; contents an entity has are skipped.

        Raises: InvalidInput (limits); EntityNotFound (nothing is written).
        """
        self.limits.batch(items, "observations")
        for i, (name, contents) in enumerate(items):
            self._check_contents(name, contents, f"observations.{i}.contents")
        return self.backend.run_write(lambda g: g.add_observations(items))

    def delete_entities(self, names: Sequence[str]) -> DeleteEntitiesResult:
        """Delete entities with their observations and every relation naming them; unknown
        names are reported, not refused. Raises: InvalidInput (limits)."""
        self.limits.batch(names, "entityNames")
        for i, name in enumerate(names):
            self.limits.name(name, f"entityNames.{i}")
        return self.backend.run_write(lambda g: g.delete_entities(names))

    def delete_observations(self, items: Sequence[tuple[str, Sequence[str]]]) -> DeleteObservationsResult:
        """Delete observations (exact text) ``[(entity_name, observations)]``; reports what
        matched per entity. Raises: InvalidInput (limits)."""
        self.limits.batch(items, "deletions")
        for i, (name, observations) in enumerate(items):
            self._check_contents(name, observations, f"deletions.{i}.observations")
        return self.backend.run_write(lambda g: g.delete_observations(items))

    def delete_relations(self, relations: Sequence[Relation]) -> DeleteRelationsResult:
        """Delete relations by ``(from, to, relationType)``. Raises: InvalidInput (limits)."""
        self._check_relations(relations, "relations")
        return self.backend.run_write(lambda g: g.delete_relations(relations))

    def update_observations(self, updates: Sequence[ObservationUpdate]) -> list[UpdatedObservations]:
        """Replace observations in place, keeping their position: all or nothing.

        Returns ``[{"entityName", "updatedObservations": [{"match", "replacement"}]}]``.
        Raises: InvalidInput (limits); EntityNotFound, Conflict (a missing match, a replacement
        the entity already has: nothing is written).
        """
        self.limits.batch(updates, "updates")
        for i, u in enumerate(updates):
            self.limits.name(u.entity_name, f"updates.{i}.entityName")
            self.limits.observation(u.match, f"updates.{i}.match")
            self.limits.observation(u.replacement, f"updates.{i}.replacement")
        return self.backend.run_write(lambda g: g.update_observations(updates))

    def update_relations(self, relations: Sequence[Relation]) -> list[WeightChange]:
        """Weigh each relation's ``weight`` as new evidence: the stored weight becomes
        ``(weight + evidence) / 2``. All or nothing.

        Raises: InvalidInput (limits); EntityNotFound/Conflict (a relation does not exist).
        """
        self._check_relations(relations, "relations")
        items = [(r, r.weight) for r in relations]
        return self.backend.run_write(lambda g: g.update_relation_weights(items))

    def read_graph(self, *, since: str | None = None, limit: int | None = None, cursor: str | None = None,
                   timestamps: bool = False) -> GraphSlice:
        """Every entity and relation (also the ``memory://knowledge-graph`` resource).

        ``since`` (ISO 8601) keeps the entities created or changed at or after it and the
        relations created or re-weighed at or after it; ``limit`` (≥ 1) makes it a page of at most
        that many entities and relations together, ``cursor`` (a page's ``next_cursor``) reads the
        next page (pages: :mod:`graph_memory.db.pages`); ``timestamps`` loads the rows' times.

        Raises: InvalidInput (bad since, limit); InvalidCursor (see :func:`graph_memory.paging.decode_cursor`).
        """
        moment = _since(since)
        limit = _check_limit(limit)
        cursor = cursor or None   # "" is "not given", as null is
        if moment is None and limit is None and cursor is None:
            return self.backend.run_read(lambda g: g.with_times(g.read_graph()) if timestamps else g.read_graph())
        bound = binding("read_graph", moment)

        def read(g: Graph) -> GraphSlice:
            secret = g.cursor_secret()
            after = _position(decode_cursor(secret, bound, cursor), ReadPosition) if cursor else None
            page, following = g.read_page(moment, after, limit)
            page.next_cursor = encode_cursor(secret, bound, following) if following else None
            return g.with_times(page) if timestamps else page

        return self.backend.run_read(read)

    def search_nodes(self, query: str, mode: Mode = "substring", limit: int | None = None, *,
                     since: str | None = None, cursor: str | None = None, timestamps: bool = False) -> GraphSlice:
        """The entities ``query`` finds (``mode``: see :data:`graph_memory.models.Mode`), with the
        relations touching them and their neighbors.

        ``limit`` returns the first ``limit`` matches as it always has, and now a ``next_cursor``
        when more follow; ``cursor`` reads the next page; ``since`` keeps only matches created or
        changed at or after it; ``timestamps`` loads the rows' times (pages and ``since``:
        :mod:`graph_memory.db.pages`).

        Raises: InvalidInput (not UTF-8, bad since or limit); InvalidQuery (too long, bad fts
        syntax); InvalidCursor.
        """
        check_unicode(query, "query")
        moment = _since(since)
        limit = _check_limit(limit)
        cursor = cursor or None   # "" is "not given", as null is
        if moment is None and limit is None and cursor is None:
            return self.backend.run_search(
                lambda g: g.with_times(g.search(query, mode, None)) if timestamps else g.search(query, mode, None))
        bound = binding("search_nodes", query, mode, moment)

        def find(g: Graph) -> GraphSlice:
            secret = g.cursor_secret()
            after = _position(decode_cursor(secret, bound, cursor), SearchPosition) if cursor else None
            page, following = g.search_page(query, mode, moment, after, limit)
            page.next_cursor = encode_cursor(secret, bound, following) if following else None
            return g.with_times(page) if timestamps else page

        return self.backend.run_search(find)

    def open_nodes(self, names: Sequence[str], *, timestamps: bool = False) -> GraphSlice:
        """The named entities (unknown names skipped), the relations touching them, their
        neighbors; ``timestamps`` loads the rows' times.

        Raises: InvalidInput (limits).
        """
        self.limits.batch(names, "names")
        for i, name in enumerate(names):
            check_unicode(name, f"names.{i}")
        return self.backend.run_read(
            lambda g: g.with_times(g.open_nodes(names)) if timestamps else g.open_nodes(names))

    def check_reply(self, tool: str, result: GraphSlice, view: View, timestamps: bool, cursor: str | None = None
                    ) -> bool:
        """Refuse a reply too large for MCP clients (the official TypeScript client drops any
        message over 10 MiB, and the connection with it) rather than send or truncate it, before
        it is built. ``cursor``: the one the call was given (the pages it advises carry at least as
        long a one).

        The bound is ``max_reply_bytes`` (``MEMORY_MAX_REPLY_BYTES``; 0: none): a reply's JSON-RPC
        line, with its newline, must be shorter. :func:`reply_bytes` estimates it (within about a
        tenth): a reply surely over is refused here; one near the bound is to be measured once
        built (then :meth:`refuse_reply` if it is over), so no reply that fits is refused for the
        estimate's error (found by QA); the stdio transport checks every line exactly.

        Returns:
            True when the built reply must be measured (its estimate is near the bound).

        Raises:
            ReplyTooLarge: surely over the bound; the message says how to get all of it.
        """
        bound = self.limits.max_reply_bytes
        if not bound:
            return False
        size = reply_bytes(result, view, timestamps)
        if size < bound * _NEAR_BOUND:
            return False
        if size < bound * _SURELY_OVER:
            return True
        self.refuse_reply(tool, result, view, timestamps, cursor, size, estimated=True)

    def refuse_reply(self, tool: str, result: GraphSlice, view: View, timestamps: bool, cursor: str | None,
                     size: int, *, estimated: bool = False) -> NoReturn:
        """Raise the refusal of ``result``'s reply, ``size`` bytes (``estimated``: about that),
        with the advice that gets all of it (a page size that fits, the summary view, fewer names).

        Raises:
            ReplyTooLarge: always.
        """
        bound = self.limits.max_reply_bytes
        page, heaviest, cursor_bound = self._fitting_page(tool, result, view, timestamps, cursor)
        about = "about " if estimated else ""
        # "at" when the reply is exactly the bound's size: a line must be shorter than the bound
        what = (f"{tool}: this reply would be {about}{size:,} bytes ({plural(len(result.entities), 'entity')}, "
                f"{plural(len(result.relations), 'relation')}, {plural(len(result.neighbors), 'neighbor')}), "
                f"{'at' if size == bound else 'over'} the {bound:,}-byte bound on replies (MEMORY_MAX_REPLY_BYTES) "
                f"that keeps them within what MCP clients accept; nothing was sent. ")
        entity = next((e for e in result.entities if e.name == heaviest), None)
        if not page and cursor_bound:
            how = ("It matches too many entities to be read page by page within the bound: each page's cursor "
                   "carries what the earlier pages sent. Narrow the query (or set since), or read the whole graph "
                   "in pages with read_graph (limit, then cursor set to each reply's nextCursor until a reply has "
                   "none)")
        elif not page and tool == "open_nodes" and len(result.entities) > 1:
            how = self._open_in_parts(result, view, timestamps)
        elif not page and (tool == "read_graph" or entity is None or self._over_alone(entity, view, timestamps)):
            how = (f"{heaviest} alone is over the bound, even on a page of its own: raise MEMORY_MAX_REPLY_BYTES "
                   f"to read it whole")
        elif not page:
            # Fewer names or a smaller page cannot help: read_graph's pages carry every relation and neighbor.
            how = (f"The entity {heaviest} alone, with the relations touching it and their neighbors, is over "
                   f"the bound: read the whole graph in pages with read_graph (limit, then cursor set to each "
                   f"reply's nextCursor until a reply has none)")
        elif tool == "open_nodes":
            how = f"Open fewer names per call (about {page})"
        else:
            how = (f"Read it in pages: call {tool} again with the same arguments and limit {page} (or less), "
                   f"then with cursor set to each reply's nextCursor until a reply has none")
        if view == "full":
            short = reply_bytes(result, "summary", timestamps)
            if short < bound:
                how += f"; or ask for view 'summary' (names, types and observation counts: about {short:,} bytes)"
            elif tool != "open_nodes" and (summary_page := self._fitting_page(tool, result, "summary", timestamps,
                                                                              cursor)[0]):
                how += (f"; or ask for view 'summary' (names, types and observation counts: about {short:,} bytes, "
                        f"also over it: in pages of limit {summary_page})")
        raise ReplyTooLarge(what + how + ".")

    def _over_alone(self, entity: Entity, view: View, timestamps: bool) -> bool:
        """Whether ``entity``'s reply alone, without relations or neighbors, is not under the bound."""
        return reply_bytes(GraphSlice([entity], [], []), view, timestamps) >= self.limits.max_reply_bytes

    def _open_in_parts(self, result: GraphSlice, view: View, timestamps: bool) -> str:
        """Advice for an open_nodes reply where some names are over the bound on their own (with
        their relations and neighbors): how many of the others to open at a time, and to read those
        through read_graph's pages."""
        costs, labels = _page_items("open_nodes", result, view, timestamps)
        room = self._page_budget() - _REPLY_ENVELOPE
        heavy = [label for cost, label in zip(costs, labels, strict=True) if cost > room]
        others = _largest_window([cost for cost in costs if cost <= room], room)
        how = f"Open fewer names per call (about {others}); " if others else ""
        # An entity over the bound on its own, without relations: no page of read_graph holds it
        # either (found by QA: the advice sent there, where it was refused again).
        by_name = {e.name: e for e in result.entities}
        alone = [name for name in heavy if name in by_name and self._over_alone(by_name[name], view, timestamps)]
        if alone:
            shown = ", ".join(alone[:3]) + (f" and {len(alone) - 3} more" if len(alone) > 3 else "")
            return how + (f"{shown} alone {'is' if len(alone) == 1 else 'are'} over the bound, even without "
                          f"relations: raise MEMORY_MAX_REPLY_BYTES to read {'it' if len(alone) == 1 else 'them'} "
                          f"whole")
        shown = ", ".join(heavy[:3]) + (f" and {len(heavy) - 3} more" if len(heavy) > 3 else "")
        return how + (f"{shown}, with the relations touching {'it' if len(heavy) == 1 else 'them'} and their "
                      f"neighbors, {'is' if len(heavy) == 1 else 'are'} over the bound alone: read "
                      f"{'it' if len(heavy) == 1 else 'them'} through read_graph's pages (limit, then cursor set "
                      f"to each reply's nextCursor until a reply has none)")

    def fitting_page(self, tool: str, result: GraphSlice, view: View = "full", timestamps: bool = False) -> int:
        """A ``limit`` whose pages of ``tool``'s reply ``result`` fit the reply bound
        (``max_reply_bytes``, which must be set), 1 at least: see :meth:`_fitting_page`."""
        return max(1, self._fitting_page(tool, result, view, timestamps)[0])

    def _fitting_page(self, tool: str, result: GraphSlice, view: View, timestamps: bool,
                      cursor_in: str | None = None) -> tuple[int, str, bool]:
        """The largest ``limit`` whose every page of ``result`` fits 80 % of the reply bound, cut as
        pages cut it when nothing is written between them (read_graph: entities then relations,
        ``limit`` of them together; search_nodes: ``limit`` matches, each with the relations it
        brings first and the neighbors those reach first; open_nodes: ``limit`` names, each with
        every relation and far end, as a part of the names gets them), with room for the largest
        cursor a page may carry; else 1 when a page of one fits the whole bound, else 0. Also the
        heaviest item's name, and whether it is the cursor that leaves no room (found by QA: pages
        of the advised size were refused, part-way through a search as its cursor grew; a hub
        entity's search was advised ``limit 1`` again)."""
        costs, labels = _page_items(tool, result, view, timestamps)
        heaviest = labels[max(range(len(costs)), key=costs.__getitem__)] if costs else ""
        cursor = _cursor_bytes(tool, result, cursor_in)
        page = _largest_window(costs, self._page_budget() - _REPLY_ENVELOPE - cursor)
        if not page:   # the estimate's margin aside, a page of one may fit
            page = min(1, _largest_window(costs, self.limits.max_reply_bytes - _REPLY_ENVELOPE - cursor))
        cursor_bound = (tool == "search_nodes" and not page
                        and _largest_window(costs, self.limits.max_reply_bytes - _REPLY_ENVELOPE) > 0)
        return page, heaviest, cursor_bound

    def _page_budget(self) -> float:
        """What an advised page may weigh: 80 % of the reply bound (the estimate's margin)."""
        return self.limits.max_reply_bytes * 0.8

    # -- typed tools (schema files; graph_memory.mcp.typed parses and checks the arguments) -----

    def add_typed(self, entity: Entity, relations: Sequence[Relation]) -> tuple[Entity, list[Relation]]:
        """Create ``entity`` and its relationship ``relations`` in one transaction.

        Raises: Conflict (an entity of that name exists); EntityNotFound (a target is missing).
        """
        def write(g: Graph) -> tuple[Entity, list[Relation]]:
            existing = g.entity_type(entity.name)
            if existing is not None:
                hint = f"; change it with update_{entity.entity_type}" if existing == entity.entity_type else ""
                raise Conflict(f"Entity with name {entity.name} already exists (entityType {existing!r}){hint}")
            (created,) = g.create_entities([entity])
            return created, self._created(g, g.create_relations(relations))

        return self.backend.run_write(write)

    def update_typed(self, type_name: str, name: str, values: Sequence[TypedValue], tool: str) -> TypedUpdate:
        """Set (or remove) the properties ``values`` of the ``type_name`` entity ``name``, and
        make each relationship property's relations exactly its targets.

        A property's observations are those whose key (before the first ``": "``) is the
        property's in any spelling (:func:`graph_memory.models.property_key`: MemoryMesh writes
        ``currentLocation: …`` and ``Currentlocation: …`` where we write ``Current Location: …``;
        found by QA: an update added a second, contradicting value). Setting a property edits the
        first of them in place (its position and creation time kept) and deletes the others, so
        the property holds one value; an empty value deletes them all.

        Raises: EntityNotFound; InvalidInput (the entity has another type; ``tool`` names the call).
        """
        def write(g: Graph) -> TypedUpdate:
            _require_type(g, type_name, name, tool)
            out = TypedUpdate(Entity(name, type_name))
            (held,) = g.open_nodes([name]).entities
            observations = held.observations
            for value in values:
                found = [o for o in observations if observation_property(o) == value.key]
                outdated = [o for o in found if o != value.content]
                if value.content is not None and value.content not in found:
                    if outdated:
                        old = outdated.pop(0)
                        g.update_observations([ObservationUpdate(name, old, value.content)])
                        out.updated.append((old, value.content))
                        observations = [value.content if o == old else o for o in observations]
                    else:
                        g.add_observations([(name, [value.content])])
                        out.added.append(value.content)
                        observations = [*observations, value.content]
                if outdated:
                    g.delete_observations([(name, outdated)])
                    out.deleted += outdated
                    observations = [o for o in observations if o not in outdated]
                if value.edge_type is not None:
                    current = g.relations_from(name, value.edge_type)
                    stale = [r for r in current if r.target not in value.targets]
                    out.relations_deleted += g.delete_relations(stale).deleted
                    kept = {r.target for r in current}
                    fresh = [Relation(name, t, value.edge_type) for t in value.targets if t not in kept]
                    out.relations_created += self._created(g, g.create_relations(fresh))
            (out.entity,) = g.open_nodes([name]).entities
            return out

        return self.backend.run_write(write)

    def delete_typed(self, type_name: str, name: str, tool: str) -> GraphSlice:
        """Delete the ``type_name`` entity ``name`` with its observations and relations.

        Returns what was deleted (the entity and the relations touching it).
        Raises: EntityNotFound; InvalidInput (the entity has another type).
        """
        def write(g: Graph) -> GraphSlice:
            _require_type(g, type_name, name, tool)
            snapshot = g.open_nodes([name])
            g.delete_entities([name])
            return snapshot

        return self.backend.run_write(write)

    # -- the MemoryMesh profile (graph_memory.mcp.memorymesh parses the arguments) ---------------

    def add_nodes(self, entities: Sequence[Entity]) -> list[Entity]:
        """Create ``entities``, all or nothing (MemoryMesh's rule: an existing name is an error).

        Raises: InvalidInput (limits); Conflict (a name exists, or appears twice in the call).
        """
        self._check_entities(entities, "nodes", "nodeType", "metadata")

        def write(g: Graph) -> list[Entity]:
            seen: set[str] = set()
            for e in entities:
                if e.name in seen:
                    raise Conflict(f"Node {e.name} appears twice in this call; give each node once")
                seen.add(e.name)
                existing = g.entity_type(e.name)
                if existing is not None:
                    raise Conflict(f"Node already exists: {e.name} (nodeType {existing!r}); change it with "
                                   f"update_nodes or add_metadata")
            return g.create_entities(entities)

        return self.backend.run_write(write)

    def update_nodes(self, updates: Sequence[NodeUpdate]) -> list[Entity]:
        """Per update, give the node another type and/or replace its observations (in the given
        order), all or nothing. Returns the nodes afterwards, in call order.

        Raises: InvalidInput (limits); EntityNotFound.
        """
        lim = self.limits
        lim.batch(updates, "nodes")
        for i, u in enumerate(updates):
            lim.name(u.name, f"nodes.{i}.name")
            if u.entity_type is not None:
                lim.name(u.entity_type, f"nodes.{i}.nodeType")
            if u.observations is not None:
                lim.batch(u.observations, f"nodes.{i}.metadata")
                for j, o in enumerate(u.observations):
                    lim.observation(o, f"nodes.{i}.metadata.{j}")

        def write(g: Graph) -> list[Entity]:
            for u in updates:
                if u.entity_type is not None:
                    g.set_entity_type(u.name, u.entity_type)
                elif g.entity_type(u.name) is None:
                    raise EntityNotFound(u.name)
                if u.observations is not None:
                    g.replace_observations(u.name, u.observations)
            by_name = {e.name: e for e in g.open_nodes(_unique_names(u.name for u in updates)).entities}
            return [by_name[u.name] for u in updates]

        return self.backend.run_write(write)

    def add_edges(self, relations: Sequence[Relation]) -> list[Relation]:
        """Create ``relations``, all or nothing (MemoryMesh's rule: an existing triple is an error).

        Raises: InvalidInput (limits); EntityNotFound (an end does not exist); Conflict (the
        triple exists, or appears twice in the call).
        """
        self._check_relations(relations, "edges", "edgeType")

        def write(g: Graph) -> list[Relation]:
            seen: set[tuple[str, str, str]] = set()
            for r in relations:
                if r.key in seen:
                    raise Conflict(f"Edge {r.source} -[{r.relation_type}]-> {r.target} appears twice in this call")
                seen.add(r.key)
                if g.find_relation(*r.key) is not None:
                    raise Conflict(f"Edge already exists: {r.source} -[{r.relation_type}]-> {r.target}; change "
                                   f"its weight with update_edges")
            return self._created(g, g.create_relations(relations))

        return self.backend.run_write(write)

    def update_edges(self, updates: Sequence[EdgeUpdate]) -> list[tuple[Relation, Relation]]:
        """Re-point and/or re-weigh edges in call order, all or nothing: ``(before, after)`` each.

        Raises: InvalidInput (limits); RelationNotFound; EntityNotFound (a new end); Conflict
        (the new triple exists).
        """
        lim = self.limits
        lim.batch(updates, "edges")
        for i, u in enumerate(updates):
            for key, value in zip(("from", "to", "edgeType"), u.key, strict=True):
                lim.name(value, f"edges.{i}.{key}")
            for key, new in (("newFrom", u.new_source), ("newTo", u.new_target), ("newEdgeType", u.new_type)):
                if new is not None:
                    lim.name(new, f"edges.{i}.{key}")

        def write(g: Graph) -> list[tuple[Relation, Relation]]:
            changes = [g.move_relation(u.key, u.new_key, u.evidence) for u in updates]
            self._created(g, [after for before, after in changes if before.key != after.key])
            return changes

        return self.backend.run_write(write)

    def delete_metadata(self, items: Sequence[tuple[str, Sequence[str]]]) -> DeleteObservationsResult:
        """Delete observations (exact text) ``[(entity_name, observations)]``, all or nothing.

        Raises: InvalidInput (limits); EntityNotFound (MemoryMesh's rule: an unknown node is an error).
        """
        self.limits.batch(items, "deletions")
        for i, (name, observations) in enumerate(items):
            self._check_contents(name, observations, f"deletions.{i}.metadata")

        def write(g: Graph) -> DeleteObservationsResult:
            for name, _ in items:
                if g.entity_type(name) is None:
                    raise EntityNotFound(name)
            return g.delete_observations(items)

        return self.backend.run_write(write)

    # -- limits -----------------------------------------------------------------------------------

    def _check_entities(self, entities: Sequence[Entity], what: str, type_key: str, observations_key: str) -> None:
        lim = self.limits
        lim.batch(entities, what)
        for i, e in enumerate(entities):
            lim.name(e.name, f"{what}.{i}.name")
            lim.name(e.entity_type, f"{what}.{i}.{type_key}")
            lim.batch(e.observations, f"{what}.{i}.{observations_key}")
            for j, o in enumerate(e.observations):
                lim.observation(o, f"{what}.{i}.{observations_key}.{j}")

    def _check_relations(self, relations: Sequence[Relation], what: str, type_key: str = "relationType") -> None:
        lim = self.limits
        lim.batch(relations, what)
        for i, r in enumerate(relations):
            lim.name(r.source, f"{what}.{i}.from")
            lim.name(r.target, f"{what}.{i}.to")
            lim.name(r.relation_type, f"{what}.{i}.{type_key}")

    def _check_contents(self, name: str, contents: Sequence[str], what: str) -> None:
        self.limits.name(name, f"{what}.entityName")
        self.limits.batch(contents, what)
        for j, o in enumerate(contents):
            self.limits.observation(o, f"{what}.{j}")


# The JSON-RPC envelope and the result's own keys around a reading tool's payload.
_REPLY_ENVELOPE = 250
# Estimates from this share of the bound on are measured once built; from the other on, refused
# as they are (the estimate is kept within a tenth of the message by tests/test_reading.py).
_NEAR_BOUND, _SURELY_OVER = 0.85, 1.25


def reply_bytes(result: GraphSlice, view: View, timestamps: bool) -> int:
    """About how many bytes the JSON-RPC message of a reading tool's reply takes: the payload
    twice (the indented text item, escaped inside a JSON string, and the compact
    ``structuredContent``), in UTF-8, the smallest form a transport sends it in (the stdio
    transport escapes non-ASCII only when that still fits the bound: :mod:`graph_memory.mcp.bounds`).
    The per-item constants are the two copies' keys, quotes and indentation, measured on ASCII
    graphs (tests/test_reading.py keeps it within 10 %); the transport measures the line it
    writes exactly."""
    entity_bytes, relation_bytes = _reply_parts(result, view, timestamps)
    cursor = _cursor_reply_bytes(len(result.next_cursor)) if result.next_cursor else 0
    return _REPLY_ENVELOPE + ceil(entity_bytes + relation_bytes) + cursor


def _cursor_reply_bytes(length: int) -> int:
    """What a ``length``-character nextCursor adds to a reply: the value in both copies, and its key."""
    return 2 * length + 40


def _reply_parts(result: GraphSlice, view: View, timestamps: bool) -> tuple[float, float]:
    """:func:`reply_bytes` of the entities (and neighbors), and of the relations."""
    entities = result.entities + result.neighbors
    size = _line_length([e.name for e in entities]) + _line_length([e.entity_type for e in entities])
    observations = sum(map(len, [e.observations for e in entities]))
    if view == "full":
        size += _line_length(list(chain.from_iterable([e.observations for e in entities])))
    entity_bytes = _entities_bytes(size, len(entities), observations, view, timestamps)
    relations = result.relations
    size = (_line_length([r.source for r in relations]) + _line_length([r.target for r in relations])
            + _line_length([r.relation_type for r in relations]))
    weights = sum(map(_weight_bytes, relations))
    relation_bytes = 2 * size + _RELATION_BYTES[timestamps] * len(result.relations) + weights
    if timestamps:
        entity_bytes -= _UNKNOWN_TIME_BYTES * sum(_unknown_times(e, view) for e in entities)
        relation_bytes -= _UNKNOWN_TIME_BYTES * sum(map(_unknown_relation_times, relations))
    return entity_bytes, relation_bytes


# What a time shown as unknown (null: rows imported from a legacy file) saves against one shown
# as ``"2026-12-01T17:29:28.123Z"``, in a reply's two copies (found by QA: the estimate took every
# time as known, and a read of an imported memory with timestamps came out 37 % too large).
_UNKNOWN_TIME_BYTES = 46


def _unknown_times(entity: Entity, view: View) -> int:
    """How many of the times ``entity`` shows with ``timestamps`` are unknown (None)."""
    times = entity.times
    if times is None:
        return 0
    own = (times.entity.created_at is None) + (times.entity.updated_at is None)
    if view != "full":
        return own
    return own + sum((t.created_at is None) + (t.updated_at is None) for t in times.observations)


def _unknown_relation_times(relation: Relation) -> int:
    times = relation.times
    return 0 if times is None else (times.created_at is None) + (times.updated_at is None)


# A relation's keys, quotes and indentation in a reply's two copies (without / with timestamps).
_RELATION_BYTES = {False: 127, True: 309}


def _weight_bytes(relation: Relation) -> int:
    """What a relation's ``weight`` adds to a reply's two copies when it is not the default
    (``"weight": 0.5`` indented in the text item, escaped, and compact in the structured content)."""
    return 0 if relation.weight == DEFAULT_WEIGHT else 31 + 2 * len(repr(relation.weight))


def _entities_bytes(text: float, entities: int, observations: int, view: View, timestamps: bool) -> float:
    """The bytes of ``entities`` entities holding ``observations`` observations and ``text``
    bytes of text (:func:`_line_length`) in a reply's two copies: the texts twice, plus the
    keys, quotes and indentation per entity and per observation, measured on ASCII graphs."""
    if view == "full":
        per_entity, per_observation = (378, 236) if timestamps else (141, 20)
    else:
        per_entity, per_observation = (329 if timestamps else 147), 0
    return 2 * text + per_entity * entities + per_observation * observations


def _page_items(tool: str, result: GraphSlice, view: View, timestamps: bool) -> tuple[list[float], list[str]]:
    """The estimated bytes each page item of ``result`` brings to a page, in page order, and its
    name (:meth:`MemoryService._fitting_page`): each entity and relation measured on its own
    texts (a few entities full of CJK, emoji or escaped characters among plain ones make their
    pages heavier than the average: found by QA), adding up to :func:`reply_bytes` less the
    envelope."""
    full = view == "full"

    def entity(e: Entity) -> float:
        strings = [e.name, e.entity_type, *e.observations] if full else [e.name, e.entity_type]
        unknown = _UNKNOWN_TIME_BYTES * _unknown_times(e, view) if timestamps else 0
        return _entities_bytes(_line_length(strings), 1, len(e.observations), view, timestamps) - unknown

    def relation(r: Relation) -> float:
        unknown = _UNKNOWN_TIME_BYTES * _unknown_relation_times(r) if timestamps else 0
        return (2 * _line_length([r.source, r.target, r.relation_type]) + _RELATION_BYTES[timestamps]
                + _weight_bytes(r) - unknown)

    relations = result.relations
    if tool == "read_graph":
        return ([*map(entity, result.entities), *map(relation, relations)],
                [*(e.name for e in result.entities), *(f"{r.source} -{r.relation_type}-> {r.target}"
                                                       for r in relations)])
    position = {e.name: i for i, e in enumerate(result.entities)}
    costs = [entity(e) for e in result.entities]
    if tool == "open_nodes":
        # Opened a part at a time, a name gets every relation touching it and every far end as a
        # neighbor, the other names too (counted for each name: a bound, never short).
        weight = {e.name: cost for e, cost in zip(result.entities, costs, strict=True)}
        weight.update((e.name, entity(e)) for e in result.neighbors)
        own = list(costs)
        for r in relations:
            for near, far in ((r.source, r.target), (r.target, r.source)):
                if near in position:
                    own[position[near]] += relation(r) + (weight.get(far, 0.0) if far != near else 0.0)
        return own, [e.name for e in result.entities]
    # search_nodes: a relation comes with the first match (in page order) it touches, a
    # neighbor with the first match whose relations reach it
    first_reached: dict[str, int] = {}
    for r in relations:
        ends = [position[n] for n in (r.source, r.target) if n in position]
        if not ends:
            continue
        owner = min(ends)
        costs[owner] += relation(r)
        for name in (r.source, r.target):
            if name not in position and first_reached.get(name, owner) >= owner:
                first_reached[name] = owner
    for neighbor in result.neighbors:
        if neighbor.name in first_reached:
            costs[first_reached[neighbor.name]] += entity(neighbor)
    return costs, [e.name for e in result.entities]


def _cursor_bytes(tool: str, result: GraphSlice, cursor_in: str | None) -> int:
    """Room for the largest nextCursor a page of ``result`` may carry, in both copies: a search
    cursor carries every id the pages sent, those of the pages before ``cursor_in`` (the call's
    own; found by QA: a later page ignored it, and its advised pages were refused) and those of
    ``result`` (compressed: 0.9 characters each for the 7,346 ids of a 2.5 % search of a
    100,000-entity graph; counted 2); a read_graph cursor is a position."""
    if tool == "read_graph":
        return _cursor_reply_bytes(80)
    if tool != "search_nodes":
        return 0
    sent = max(len(result.next_cursor or ""), len(cursor_in or ""))
    return _cursor_reply_bytes(sent + 2 * (len(result.entities) + len(result.neighbors)) + 100)


def _largest_window(costs: list[float], budget: float) -> int:
    """The largest ``n`` such that every ``n`` consecutive ``costs`` add up to at most ``budget``
    (costs are ≥ 0, so a larger ``n`` never fits better); 0 when one cost alone is over it."""
    sums = [0.0, *accumulate(costs)]

    def fits(n: int) -> bool:
        return bool(max(map(sub, sums[n:], sums[:-n])) <= budget)

    low, high = 0, len(costs)   # fits(low) holds; the answer is in [low, high]
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


# What JSON escapes in a string, as UTF-8 bytes: a quote or a backslash (one more byte in the
# structured content, three more in the text item, which escapes the text's own escape), a
# control character with a short escape (\n: one more, then two more) and any other control
# character (\u001b: five more, then six more).
_SPECIAL = bytes(range(32)) + b'"\\'
_NOT_SPECIAL = bytes(b for b in range(256) if b not in _SPECIAL)
_EXTRA_BYTES = {**dict.fromkeys(range(32), 11), **dict.fromkeys(b"\n\r\t\b\f", 3), ord('"'): 4, ord("\\"): 4}


def _line_length(strings: list[str]) -> float:
    """The bytes ``strings`` take in each of a reply's two copies, on average: their UTF-8 length
    (a lone surrogate, which only a 6-byte escape carries, counts 3: the transport measures the
    line exactly) plus half of what escaping them adds to both copies (found by QA: text full
    of quotes or control characters was estimated 8 % to 2.6 times too small)."""
    encoded = "".join(strings).encode("utf-8", "surrogatepass")
    special = encoded.translate(None, _NOT_SPECIAL)   # one C pass; usually empty
    return len(encoded) + sum(map(_EXTRA_BYTES.__getitem__, special)) / 2


def _since(value: str | None) -> str | None:
    return None if value is None else parse_since(value)


# A larger page size reads as this one: more than any graph holds, and within the 64-bit
# integers the SQL LIMIT takes (2**63 failed with "datatype mismatch").
_LARGEST_LIMIT = 2**62


def _check_limit(limit: int | None) -> int | None:
    """``limit`` checked (≥ 1) and held to :data:`_LARGEST_LIMIT`. Raises: InvalidInput."""
    if limit is not None and limit < 1:
        raise InvalidInput(f"limit must be 1 or more (got {limit})")
    return None if limit is None else min(limit, _LARGEST_LIMIT)


P = TypeVar("P", ReadPosition, SearchPosition)


def _position(position: ReadPosition | SearchPosition, kind: type[P]) -> P:
    if not isinstance(position, kind):
        raise InvalidCursor("cursor belongs to another tool; call again without cursor to start from the first page")
    return position


@dataclass(frozen=True, slots=True)
class NodeUpdate:
    """One node of update_nodes: a new ``entity_type`` and/or the ``observations`` that replace
    the old ones (None: left as they are)."""

    name: str
    entity_type: str | None = None
    observations: Sequence[str] | None = None


@dataclass(frozen=True, slots=True)
class EdgeUpdate:
    """One edge of update_edges: the edge ``key`` ``(from, to, relationType)``, its new ends and
    type (None: unchanged) and the ``evidence`` folded into its weight (None: weight unchanged)."""

    key: tuple[str, str, str]
    new_source: str | None = None
    new_target: str | None = None
    new_type: str | None = None
    evidence: float | None = None

    @property
    def new_key(self) -> tuple[str, str, str]:
        """The triple after the update."""
        source, target, relation_type = self.key
        return (self.new_source or source, self.new_target or target, self.new_type or relation_type)


def _unique_names(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _require_type(g: Graph, type_name: str, name: str, tool: str) -> None:
    found = g.entity_type(name)
    if found is None:
        raise EntityNotFound(name)
    if found != type_name:
        raise InvalidInput(f"Entity with name {name} has entityType {found!r}, not {type_name!r}; {tool} "
                           f"only changes {type_name} entities")


# -- the data commands (import, export, backup, stats, the first start) -------------------------
#
# Each opens the database in the mode its command needs (:data:`~graph_memory.db.backend.OpenMode`)
# and closes it again: read-only (stats: works for a user who can only read the file), current
# without migrating (export, dry runs: refuses pending migrations), migrating (import, serve). The
# CLI parses arguments, calls one of them and prints the domain result.


@contextmanager
def opened(settings: Settings, mode: OpenMode) -> Iterator[Backend]:
    """The database ``settings`` name, opened as ``mode`` says and closed on leaving
    (:func:`~graph_memory.db.backend.open_backend`; its errors)."""
    backend = open_backend(settings, mode)
    try:
        yield backend
    finally:
        backend.close()


def import_file(settings: Settings, file: str, *, skip_invalid: bool = False, dry_run: bool = False,
                new_lines: bool = False,
                progress: Callable[[int | None], AbstractContextManager[Progress]] | None = None) -> ImportReport:
    """``graph-memory import FILE``: merge the legacy ``file`` into the database (one transaction,
    recorded in ``legacy_imports``), or with ``dry_run`` only report what that would do.

    The file is read whole first (it may be a pipe). Into a database whose graph holds anything it
    is checked line by line before the database is opened for writing, then read again record by
    record into the import's transaction; into an empty graph it is read once, checked as it is
    merged (a bad line rolls the import back). A new SQLite database is built aside that way
    (:func:`graph_memory.db.backend.building_new`), so a refused file never leaves a database
    behind. A dry run opens an existing database without migrating
    it (none: every item would be new). ``progress(total)`` (``total``: the file's entity and
    relation lines, None when not counted yet) gives the importer's progress for the import.
    ``new_lines``: merge only the lines that were not in the file when it was last imported into
    this database (its record keeps a digest of each line): what changed in the file since, and
    not what was deleted from the memory since (``unchanged_lines`` counts what was left out;
    ``lines_gone`` the lines of the file then that it no longer holds, which a merge cannot delete).

    Raises:
        LegacyFormatError: the file cannot be read or has a bad line (nothing was imported).
        InvalidInput: ``new_lines``, and the database has no record of the file's lines.
        PendingMigrationsError: a dry run on a database with pending migrations.
        StoreError: the database cannot be opened or written (nothing was).
    """
    path = settings.database_label
    known, lines_of = _imported_lines(settings, file, dry_run) if new_lines else (frozenset(), None)
    new = not dry_run and backends.database_missing(settings)
    # Into a graph that is empty the file is read once: nothing stored can merge with a repeat in
    # it, so the merge's reading is its check (8.8 s of a 1,000,000-entity file; issue 15).
    once = new or (not dry_run and _graph_is_empty(settings))
    flags = [*(["--new-lines"] if new_lines else []), *(["--dry-run"] if dry_run else [])]
    state, legacy = read_legacy_file(file, skip_invalid=skip_invalid, database=path, check=not once,
                                     known_lines=known, flags=flags)
    # What a merge cannot bring: lines of the file at its last import that are gone from it now
    # (deleted or edited there since; found by QA: nothing said so). The file's digests are the
    # new import record's too.
    current = line_digests(legacy.data, legacy.dialect) if new_lines else None
    gone_lines = known - known_lines(current or b"")
    gone = len(gone_lines) if new_lines else None
    # Named before the merge changes the entities whose lines are gone (found by QA: an entity that
    # lost an observation there and gained another was no longer listed after the real merge).
    held = (_still_held(settings, gone_lines, parse_legacy(legacy.data, skip_invalid=True, dialect=legacy.dialect),
                        mesh=legacy.dialect is MEMORYMESH) if gone else [])

    def load(backend: Backend, stream: LegacyStream) -> ImportReport:
        total = stream.entity_records + stream.relation_records if stream.checked else None
        with progress(total) if progress else nullcontext() as bar:
            try:
                return load_graph(backend, stream, source=file, progress=bar, record=state, digests=current)
            except LegacyFormatError as exc:  # found by the reading of a file not checked before
                raise refused(exc, file, skip_invalid=skip_invalid, database=path, flags=flags) from exc

    if new:
        try:
            with backends.building_new(settings) as backend:
                return load(backend, legacy)
        except DatabaseAppeared:  # a server started meanwhile, say: import into that database
            # (the file was read whole without a fault, so its check passes)
            legacy = stream_memory_file(legacy.data, skip_invalid=skip_invalid, path=file)
    if dry_run and backends.database_missing(settings):  # no database: everything would be new
        report = plan_graph(None, legacy, source=file, database=str(path))
    elif dry_run:
        with opened(settings, "current") as backend:  # no tables yet: everything would be new
            report = plan_graph(backend if backend.has_graph() else None, legacy, source=file, database=str(path))
    else:
        with opened(settings, "migrate") as backend:
            report = load(backend, legacy)
    report.lines_gone, report.lines_of, report.gone_held = gone, lines_of, held
    return report


def _still_held(settings: Settings, gone: frozenset[bytes], now: LegacyGraph, *,
                mesh: bool = False) -> list[dict[str, Any]]:
    """What the database still holds of the lines a legacy file held at its last record and holds
    no more (their digests: ``gone``), which a merge cannot delete; ``now`` is the file as it is.
    An entity or relation whose line, as ``export`` writes it (with or without weights), is gone
    and that the file no longer has: what the other program deleted, as its line's dict. An
    entity the file still has (its line edited there): the observations the file lost, as
    ``{"type": "observations", "entityName", "observations"}`` (found by QA: such entities were
    listed whole, as if deleted). Entities first, then relations, in the database's order. With
    ``mesh`` the file is MemoryMesh's: its lines are matched as ``export --format memorymesh``
    writes them (the items are still given in the reference shape).

    An item changed in the database after the record matches no gone line and is not listed."""
    if backends.database_missing(settings):
        return []
    with opened(settings, "current") as backend:
        if not backend.has_graph():
            return []
        graph, inverses = backend.run_read(lambda g: (g.read_graph(), g.inverse_links()))
    entities_now = {e.name: set(e.observations) for e in now.entities}
    relations_now = {r.key for r in now.relations}

    def gone_line(line: str) -> bool:
        return line_digest(line.encode("utf-8", "surrogatepass")) in gone

    held: list[dict[str, Any]] = []
    plain = iter_legacy_lines(graph.entities, graph.relations)
    weighted = (iter_memorymesh_lines(graph.entities, graph.relations) if mesh else
                iter_legacy_lines(graph.entities, graph.relations, with_weights=True, inverses=inverses))
    for line, with_weight in zip(plain, weighted, strict=True):   # one line per item, the same order
        if not ((not mesh and gone_line(line)) or gone_line(with_weight)):
            continue
        item = json.loads(line)
        if item["type"] == "relation":
            if (item["from"], item["to"], item["relationType"]) not in relations_now:
                held.append(item)
        elif item["name"] not in entities_now:
            held.append(item)
        elif lost := [o for o in item["observations"] if o not in entities_now[item["name"]]]:
            held.append({"type": "observations", "entityName": item["name"], "observations": lost})
    return held


def _imported_lines(settings: Settings, file: str, dry_run: bool) -> tuple[frozenset[bytes], str | None]:
    """The digests of the lines ``file`` had when it was last imported into the database (for a
    dry run read as it is; else migrated first, as the import will), and None; or, for a file
    recorded only under another path (its folder moved, or copied with the database:
    :func:`graph_memory.importer.moved_from`), those of that path's newest record, and that path.

    Raises:
        InvalidInput: no database, or no record of the file's lines in it (never imported into it,
            or by a version before these records); the message says what to do instead.
    """
    whole = graph_memory_command("import", "--dry-run", Path(file).absolute(), database=settings.database_label)
    digests, lines_of = None, None
    if not backends.database_missing(settings):
        with opened(settings, "current" if dry_run else "migrate") as backend:
            if backend.has_graph():
                digests = backend.run_read(lambda g: g.line_digests(record_path(file)))
                if digests is None and backend.run_read(lambda g: g.latest_record(record_path(file))) is None \
                        and (found := moved_from(backend, file)) is not None:
                    lines_of = found[0].path or ""
                    digests = backend.run_read(lambda g: g.line_digests(lines_of))
    if digests is None:
        elsewhere = f" (nor of {lines_of}, a file of the same name recorded before)" if lines_of else ""
        raise InvalidInput(f"--new-lines: {settings.database_label} has no record of the lines of {file}{elsewhere} "
                           f"(it was never imported into it, or by a version that kept none, or it is one JSON "
                           f"document, which has no lines), so nothing tells its new lines "
                           f"from those imported before. Without --new-lines the whole file is merged, bringing back "
                           f"what was deleted since; see what that would add first with: {whole}")
    return known_lines(digests), lines_of


def _graph_is_empty(settings: Settings) -> bool:
    """Whether the existing database ``settings`` names holds no entity and no relation, read
    without changing anything (False when that cannot be told, e.g. the database is unreadable:
    the caller then takes the way that works for any graph)."""
    try:
        with opened(settings, "readonly") as backend:
            return not backend.has_graph() or backend.run_read(lambda g: g.is_empty())
    except GraphError:
        return False


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What ``graph-memory export`` wrote: ``entities`` and ``relations`` (counts), ``weighted``
    (relations whose weight is not 1.0, whether written or not), ``recorded`` (the file is a
    legacy file of the database, and its new state was recorded:
    :func:`~graph_memory.importer.record_export`)."""

    entities: int
    relations: int
    weighted: int
    recorded: bool = False
    # The file is a legacy file of the database but its new state could not be recorded: why.
    not_recorded: str | None = None


def export_graph(settings: Settings, output: Path | Callable[[Callable[[TextIO], int]], None], *,
                 with_weights: bool = False, fmt: ExportFormat = "jsonl", entities: Sequence[str] = (),
                 hops: int = 1, force: bool = False) -> ExportResult:
    """``graph-memory export``: write the graph as reference-server JSONL (with ``with_weights``,
    relation weights other than 1.0 as a last ``"weight"`` key), with ``fmt="memorymesh"`` as
    MemoryMesh's node/edge lines (every weight included), or with ``fmt`` ``"mermaid"`` /
    ``"dot"`` as a picture (:mod:`graph_memory.pictures`), to the file ``output`` (replaced
    atomically) or through ``output(write)``, which runs ``write(stream)`` on the stream to write.

    With ``entities``, only their neighbourhood: the entities within ``hops`` relations of them
    (either direction) and the relations among those (unknown names refused).

    The database is opened without migrating, read in one transaction and closed before writing.

    Raises:
        PendingMigrationsError: migrations are pending. StoreError: no database, or it cannot be read.
        OutputError: ``output`` is the database file itself. EntityNotFound: an ``entities`` name is no entity.
        InvalidInput: ``hops`` is negative.
    """
    if hops < 0:
        raise InvalidInput(f"--hops must be 0 or more, not {hops}")
    inverses: dict[tuple[str, str, str], str] = {}
    with opened(settings, "current") as backend:
        if not backend.has_graph():
            snapshot = GraphSlice([], [])
        elif entities:
            snapshot = backend.run_read(lambda g: _neighborhood_slice(g, list(entities), hops))
        else:
            snapshot, inverses = backend.run_read(lambda g: (g.read_graph(), g.inverse_links()))
        whole = fmt in ("jsonl", "memorymesh") and not entities   # a memory file: what could be recorded
        if isinstance(output, Path) and not force:
            _refuse_a_lossy_overwrite(backend, output, settings.legacy_candidates, empty=not snapshot.entities,
                                      whole=whole, fmt=fmt)

    def write(out: TextIO) -> int:
        if fmt == "jsonl":
            return write_legacy(snapshot.entities, snapshot.relations, out, with_weights=with_weights,
                                inverses=inverses)
        if fmt == "memorymesh":
            return write_memorymesh(snapshot.entities, snapshot.relations, out)
        write_picture(fmt, [(e.name, e.entity_type) for e in snapshot.entities], snapshot.relations, out)
        return 0

    recorded, not_recorded = False, None
    if isinstance(output, Path):
        if isinstance(backend.path, Path) and output.exists() and output.samefile(backend.path):
            raise OutputError(f"{output} is the database itself; choose another output file")
        write_atomically(output, write)
        if whole:
            try:
                with opened(settings, "unmigrated") as writable:   # export reads through a read-only one
                    recorded = record_export(writable, output, settings.legacy_candidates)
            except GraphError as exc:   # locked, read-only: said (found by QA: only an info log said it)
                not_recorded = str(exc)
    else:
        output(write)
    return ExportResult(len(snapshot.entities), len(snapshot.relations),
                        sum(1 for r in snapshot.relations if r.weight != 1.0), recorded, not_recorded)


def _refuse_a_lossy_overwrite(backend: Backend, output: Path, legacy_files: Sequence[Path], *, empty: bool,
                              whole: bool, fmt: ExportFormat) -> None:
    """Refuse an export that would write over what the database does not hold (found by QA):
    a legacy file of the database that another program changed since it was recorded, or one
    never imported (:func:`~graph_memory.importer.legacy_file_changed_since_recorded`); a legacy
    file with a picture or a part of the graph (not ``whole``); or a non-empty file, with a graph
    that is empty (the wrong database, most likely); or a legacy file in the other memory format
    (the reference server's, MemoryMesh's) than ``fmt``: its program would read nothing back.

    Raises:
        OutputError: saying what would be lost and what to do; ``--force`` writes anyway.
    """
    problem = legacy_file_changed_since_recorded(backend, output, legacy_files)
    legacy = problem is None and output.is_file() and is_legacy_file(backend, output, legacy_files)
    if legacy and not whole:
        problem = (f"{output} is the memory file of the database {backend.path} (what the reference server reads "
                   f"when you switch back): a picture or a part of the graph written there would leave it only "
                   f"that; write it to another file")
    if legacy and whole:
        with output.open("rb") as head:
            held = detect(head.read(1 << 16))
        if (held is MEMORYMESH) != (fmt == "memorymesh"):   # found by QA: written silently
            wanted, name = ("memorymesh", "MemoryMesh's") if held is MEMORYMESH else ("jsonl", "the reference server's")
            problem = (f"{output} is the memory file of the database {backend.path} in {name} format, and this "
                       f"export would write the other one, which its program reads nothing of: add --format {wanted}")
    if problem is None and empty:
        try:
            size = output.stat().st_size if output.is_file() else 0
        except OSError:
            size = 0
        if size:
            setting = "MEMORY_DATABASE_URL" if backend.kind == "postgres" else "--database or MEMORY_FILE_PATH"
            problem = (f"the database {backend.path} holds no memory: writing it would empty {output} "
                       f"({plural(size, 'byte')}); check that {setting} names the database you mean")
    if problem is not None:
        raise OutputError(f"{problem}; or pass --force to write over it anyway. {output} was not changed.")


ExportFormat = Literal["jsonl", "memorymesh", "mermaid", "dot"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("jsonl", "memorymesh", *PICTURE_FORMATS)


def _neighborhood_slice(g: Graph, names: list[str], hops: int) -> GraphSlice:
    """The entities within ``hops`` of ``names`` (all of them, with observations) and the
    relations among them. Raises EntityNotFound for the first name that is no entity."""
    area = g.neighborhood(names, hops, None)
    for name in names:
        if name not in area.centers:
            raise EntityNotFound(name)
    chosen = g.open_nodes([n.name for n in area.nodes]).entities
    return GraphSlice(chosen, area.relations)


def backup(settings: Settings, dest: str, *, force: bool = False,
           progress: Callable[[int, int], None] | None = None) -> BackupResult:
    """``graph-memory backup DEST``: :func:`~graph_memory.db.backup.backup_database` of the existing
    database (``progress(done, total)`` in pages). Raises: StoreError/OutputError (nothing left at DEST)."""
    return backends.backup(settings, dest, force=force, progress=progress)


def restore(settings: Settings, backup_file: str) -> RestoreResult:
    """``graph-memory restore BACKUP``: :func:`~graph_memory.db.backup.restore_database` into the
    configured database (what it held is saved beside it first). Raises: StoreError/OutputError
    (nothing changed)."""
    return backends.restore(settings, backup_file)


@dataclass(frozen=True, slots=True)
class Stats:
    """``graph-memory stats``: the database ``path`` (a PostgreSQL URL with its password masked),
    its ``files`` (name → bytes: the database, WAL, shared memory; for PostgreSQL the database's
    size), schema ``version`` and ``pending`` migration names, the graph ``counts``, the
    import ``records`` (oldest first), what the next start still ``owes`` ('import', 'baseline'
    or None) and the ``backend`` kind ("sqlite", "postgres")."""

    path: Path | str
    files: dict[str, int]
    version: int
    pending: list[str]
    counts: GraphCounts
    records: list[ImportRecord]
    owes: str | None
    backend: str = "sqlite"

    def to_dict(self) -> dict[str, Any]:
        """The ``stats --json`` object."""
        return {
            "backend": self.backend,
            "database": str(self.path),
            "size_bytes": sum(self.files.values()),
            "files": self.files,
            "schema_version": self.version,
            "pending_migrations": self.pending,
            **self.counts.to_dict(),
            "legacy_imports": [r.to_dict() for r in self.records],
            "legacy_first_start_pending": self.owes,
        }


def stats(settings: Settings) -> Stats:
    """``graph-memory stats`` of the existing database, opened read-only (also with migrations
    pending). Raises: StoreError (no database, or it cannot be read)."""
    with opened(settings, "readonly") as backend:
        state = backend.schema_status()
        # One read transaction: the counts and the records describe the same moment.
        counts, records, owes = backend.run_read(lambda g: (g.counts(), g.import_records(), g.first_start_action()))
        files = backend.files()
    return Stats(backend.path, files, state.version, [m.name for m in state.pending], counts, records, owes,
                 backend.kind)


def database_being_built(settings: Settings) -> Path | None:
    """The temporary file of a SQLite database that does not exist yet and is being built beside
    its name (a first start importing its legacy file, or ``graph-memory import`` into a new
    database), else None."""
    if not backends.database_missing(settings):
        return None
    return build_in_progress(settings.database_path)


def first_start_built(settings: Settings, log: BoundLogger) -> Literal["built", "lost", "not built"]:
    """At ``serve``, before the database is opened: when the SQLite database ``settings`` name
    does not exist yet and a legacy file does, build the database beside its name with the file
    imported (:func:`first_start` on it: the same import, record and settled duty), then give it
    its name (:func:`~graph_memory.db.backend.building_new`). Without a write-ahead log a large
    file imports faster (300,000 entities: 24.5 s instead of 28.2 s), and a refused file leaves no
    database behind, as ``graph-memory import`` into a new database does.

    Returns ``"built"``; ``"lost"`` when another process created the database meanwhile (a
    server started on the same new file, ``graph-memory import``…): :func:`first_start` after
    the open is then told so (``lost_build``), and imports the file unless that database has a
    record of it; ``"not built"`` for PostgreSQL, an existing database or no legacy file.

    Raises:
        LegacyFormatError: the legacy file has a bad line (no database was created).
        StoreError: the database cannot be created.
    """
    if not backends.database_missing(settings) or not any(p.is_file() for p in settings.legacy_candidates):
        return "not built"
    try:
        with backends.building_new(settings) as backend:
            report = first_start(backend, settings, log, creating=True)
    except DatabaseAppeared:
        log.info("legacy_build_discarded", database=str(settings.database_label),
                 reason="another process created the database meanwhile; the legacy file is imported into it "
                        "unless it has a record of the file")
        return "lost"
    if report is not None:
        log_first_start_import(report)
    return "built"


def first_start(backend: Backend, settings: Settings, log: BoundLogger, *, creating: bool = False,
                lost_build: bool = False) -> ImportReport | None:
    """At ``serve``, on the migrated ``backend``: settle the legacy file
    (:func:`~graph_memory.importer.first_start_import`: import it when the database owes its first
    import), then, on the start that created the database, log the ``reference_memory_found`` hint
    on ``log`` when it is still empty. Returns the first-start import's report, else None.
    ``creating``: ``backend`` is being built beside its name (:func:`first_start_built`);
    ``lost_build``: this start's build lost to a database another process created
    (:func:`~graph_memory.importer.first_start_import`).

    Raises:
        LegacyFormatError: the legacy file to import has a bad line (the database stays empty;
            with ``creating``, it is not created).
        StoreError: the database cannot be read, or written for an owed import.
    """
    try:  # only for the hint: a damaged database still starts and answers with tool errors
        new_database = backend.run_read(lambda g: g.first_start_action()) == "import"
    except GraphError:
        new_database = False
    # a bad file stops the start here
    report = first_start_import(backend, settings.legacy_candidates, creating=creating, lost_build=lost_build)
    if new_database:  # only the start that created it: a database emptied on purpose stays quiet
        from graph_memory.discover import log_hint_if_reference_files  # not on every start's path

        log_hint_if_reference_files(backend, log)
    return report


def copy_memory(settings: Settings, dest: str, *, progress: Callable[[int], None] | None = None) -> CopyResult:
    """``graph-memory copy --to DEST``: copy the whole memory of the database ``settings`` name
    into ``dest`` — a SQLite file path or a ``postgresql://`` URL (its password from the URL or
    libpq's PGPASSWORD/~/.pgpass; ``MEMORY_DATABASE_PASSWORD_FILE`` is the source's) — exactly
    (:func:`graph_memory.copying.copy_memory`). The source is opened read-only and must be
    fully migrated; ``dest`` is created or migrated first and must hold nothing.
    ``progress(rows)`` is called after each batch written.

    Raises:
        OutputError: ``dest`` is the source itself or its SQLite -wal/-shm/-journal file, a legacy
            JSONL/JSON file, another kind of URL,
            or not empty (nothing written).
        PendingMigrationsError: the source has migrations pending.
        StoreError: either database cannot be opened, read or written (``dest`` left as it was,
            or newly created and empty).
    """
    target = destination_settings(settings, dest)
    with opened(settings, "current") as source:
        if not source.has_graph():
            raise StoreError(f"the database {source.path} holds no memory yet (no migration has set it up); "
                             f"nothing to copy")
        try:
            destination = open_backend(target, "migrate")
        except GraphError as exc:
            raise _about_destination(exc) from None
        try:
            return copying.copy_memory(source, destination, progress=progress)
        finally:
            destination.close()


# The settings a storage message tells the user to change name the source in `copy`: for the
# destination, --to is what to change (and MEMORY_DATABASE_PASSWORD_FILE is not read for it).
_DESTINATION_WORDING = (("MEMORY_FILE_PATH (or --database)", "--to"), ("MEMORY_FILE_PATH", "--to"),
                        ("MEMORY_DATABASE_URL", "the --to URL"), ("MEMORY_DATABASE_PASSWORD_FILE, ", ""))


def _about_destination(exc: GraphError) -> GraphError:
    """``exc``, raised opening the destination of ``copy``, saying ``--to`` where it says the
    setting that names the database (a message written for the configured database)."""
    message = str(exc)
    for setting, option in _DESTINATION_WORDING:
        message = message.replace(setting, option)
    try:
        return type(exc)(message)
    except TypeError:  # a class with other constructor arguments: keep it as it is
        return exc


def destination_settings(settings: Settings, dest: str) -> Settings:
    """``settings`` with the database ``dest`` (a SQLite file path or a ``postgresql://`` URL)
    instead of theirs: the destination of ``graph-memory copy``.

    Raises:
        OutputError: ``dest`` is empty, a URL of another kind, a legacy JSONL/JSON file, or the
            database ``settings`` name.
    """
    from graph_memory.settings import LEGACY_SUFFIXES, POSTGRES_SCHEMES, mask_database_url

    if not dest.strip():
        raise OutputError("--to needs a SQLite file path or a postgresql:// URL")
    if dest.startswith(POSTGRES_SCHEMES):
        if settings.database_url is not None and dest == settings.database_url.get_secret_value():
            raise OutputError(f"--to names the database being copied ({mask_database_url(dest)}); "
                              f"name another database")
        return Settings.load(database_url=dest, database_password_file=None, file_path=settings.file_path)
    if "://" in dest:
        raise OutputError(f"--to takes a SQLite file path or a postgresql:// URL, not a "
                          f"{dest.split('://', 1)[0][:20]!r} URL")
    target = Settings.load(database_url=None, database_password_file=None, file_path=dest)
    if target.file_path.suffix.lower() in LEGACY_SUFFIXES:
        export = graph_memory_command("export", "--with-weights", "-o", target.file_path,
                                      database=settings.database_label)
        raise OutputError(f"{target.file_path} is a legacy JSONL/JSON file name and copy writes a database: name "
                          f"a .db file, or write the graph as JSONL with: {export}")
    source = settings.database_path
    if settings.database_url is None and (target.file_path == source or (
            target.file_path.exists() and source.exists() and target.file_path.samefile(source))):
        raise OutputError(f"--to names the database being copied ({source}); name another file")
    if settings.database_url is None:
        # SQLite keeps the source's uncommitted pages and locks in files beside it; a database
        # there would be taken for (and overwritten as) the source's journal, or lose the source's.
        real = target.file_path.resolve()
        for companion in (side for p in {source, source.resolve()} for side in side_files(p)):
            if target.file_path == companion or real == companion:
                raise OutputError(f"--to names {companion}, a file SQLite keeps beside the database being "
                                  f"copied ({source}) for its journal; name another file, such as "
                                  f"{source.with_name(source.stem + '-copy.db')}")
    return target
