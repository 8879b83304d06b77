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

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from graph_memory.db import graph
from graph_memory.db.backend import Backend, Graph, SqliteGraph
from graph_memory.db.backup import BackupResult, GraphCounts, backup_database, database_files, graph_counts
from graph_memory.db.graph import (
    AddedObservations,
    DeleteEntitiesResult,
    DeleteObservationsResult,
    DeleteRelationsResult,
    ObservationUpdate,
    WeightChange,
)
from graph_memory.db.paths import check_database_path
from graph_memory.db.records import ImportRecord, first_start_action, import_records
from graph_memory.db.store import Connection, Store
from graph_memory.discover import log_hint_if_reference_files
from graph_memory.errors import Conflict, EntityNotFound, GraphError, InvalidInput
from graph_memory.importer import (
    ImportReport,
    Progress,
    export_file,
    first_start_import,
    load_graph,
    plan_graph,
    read_legacy_file,
    write_atomically,
)
from graph_memory.legacy import write_legacy
from graph_memory.models import Entity, GraphSlice, Mode, Relation
from graph_memory.pictures import PICTURE_FORMATS, write_picture
from graph_memory.settings import Settings

if TYPE_CHECKING:
    from structlog.stdlib import BoundLogger


@dataclass(frozen=True, slots=True)
class Limits:
    """Size limits on tool input (configurable through settings; see README)."""

    max_name_length: int = 1024
    max_observation_length: int = 65536
    max_batch: int = 10_000

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        """The limits ``MEMORY_MAX_*`` configure."""
        return cls(settings.max_name_length, settings.max_observation_length, settings.max_batch)

    def batch(self, items: Sequence[Any], what: str) -> None:
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
    ``content`` (``"<Label>: value"``; None removes the property) found by ``prefix``, and, for
    a relationship property, the ``edge_type`` and the ``targets`` it points to."""

    prefix: str
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
    """The knowledge graph's operations over ``backend``, with input ``limits``.

    The backend must stay open while the service is used (its owner closes it).
    """

    def __init__(self, backend: Backend, limits: Limits | None = None) -> None:
        self.backend = backend
        self.limits = limits or Limits()

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
        return self.backend.run_write(lambda g: g.create_relations(relations))

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

    def update_observations(self, updates: Sequence[ObservationUpdate]) -> list[dict[str, Any]]:
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

    def read_graph(self) -> GraphSlice:
        """Every entity and relation (also the ``memory://knowledge-graph`` resource)."""
        return self.backend.run_read(_read_graph)

    def search_nodes(self, query: str, mode: Mode = "substring", limit: int | None = None) -> GraphSlice:
        """The entities ``query`` finds (``mode``: see :data:`graph_memory.models.Mode`; at most
        ``limit``), with the relations touching them and their neighbors.

        Raises: InvalidInput (not UTF-8); InvalidQuery (too long, bad fts syntax).
        """
        check_unicode(query, "query")
        return self.backend.run_search(lambda g: g.search(query, mode, limit))

    def open_nodes(self, names: Sequence[str]) -> GraphSlice:
        """The named entities (unknown names skipped), the relations touching them, their neighbors.

        Raises: InvalidInput (limits).
        """
        self.limits.batch(names, "names")
        for i, name in enumerate(names):
            check_unicode(name, f"names.{i}")
        return self.backend.run_read(lambda g: g.open_nodes(names))

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
            return created, g.create_relations(relations)

        return self.backend.run_write(write)

    def update_typed(self, type_name: str, name: str, values: Sequence[TypedValue], tool: str) -> TypedUpdate:
        """Set (or remove) the properties ``values`` of the ``type_name`` entity ``name``, and
        make each relationship property's relations exactly its targets.

        Raises: EntityNotFound; InvalidInput (the entity has another type; ``tool`` names the call).
        """
        def write(g: Graph) -> TypedUpdate:
            _require_type(g, type_name, name, tool)
            out = TypedUpdate(Entity(name, type_name))
            for value in values:
                if value.content is None:
                    out.deleted += g.delete_observations_by_prefix(name, value.prefix)
                else:
                    edit = g.set_observation_by_prefix(name, value.prefix, value.content)
                    if edit.kind == "updated":
                        out.updated.append((str(edit.old), edit.new))
                    elif edit.kind == "added":
                        out.added.append(edit.new)
                if value.edge_type is not None:
                    current = g.relations_from(name, value.edge_type)
                    stale = [r for r in current if r.target not in value.targets]
                    out.relations_deleted += g.delete_relations(stale).deleted
                    kept = {r.target for r in current}
                    fresh = [Relation(name, t, value.edge_type) for t in value.targets if t not in kept]
                    out.relations_created += g.create_relations(fresh)
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

    # -- limits -----------------------------------------------------------------------------------

    def _check_relations(self, relations: Sequence[Relation], what: str) -> None:
        lim = self.limits
        lim.batch(relations, what)
        for i, r in enumerate(relations):
            lim.name(r.source, f"{what}.{i}.from")
            lim.name(r.target, f"{what}.{i}.to")
            lim.name(r.relation_type, f"{what}.{i}.relationType")

    def _check_contents(self, name: str, contents: Sequence[str], what: str) -> None:
        self.limits.name(name, f"{what}.entityName")
        self.limits.batch(contents, what)
        for j, o in enumerate(contents):
            self.limits.observation(o, f"{what}.{j}")


def _read_graph(g: Graph) -> GraphSlice:
    return g.read_graph()


def _require_type(g: Graph, type_name: str, name: str, tool: str) -> None:
    found = g.entity_type(name)
    if found is None:
        raise EntityNotFound(name)
    if found != type_name:
        raise InvalidInput(f"Entity with name {name} has entityType {found!r}, not {type_name!r}; {tool} "
                           f"only changes {type_name} entities")


# -- the data commands (import, export, backup, stats, the first start) -------------------------
#
# Each opens the SQLite database in the mode its command needs and closes it again: read-only
# (stats: works for a user who can only read the file), current without migrating (export, dry
# runs: refuses pending migrations), migrating (import, serve). The CLI parses arguments, calls
# one of them and prints the domain result.


def existing_database(settings: Settings) -> Path:
    """The database path, refused (StoreError saying what to set) when no file is there: the
    read-only commands never create one."""
    check_database_path(settings.database_path, must_exist=True)
    return settings.database_path


def open_readonly(settings: Settings) -> Store:
    """The existing database opened read-only (:meth:`Store.open_readonly`): works when this user
    can only read it, creates and changes nothing."""
    return Store.open_readonly(existing_database(settings), busy_timeout_ms=settings.busy_timeout_ms)


def open_current(settings: Settings) -> Store:
    """The existing database opened without migrating it (:meth:`Store.open_current`: raises
    PendingMigrationsError with the ``migrate`` command when migrations are pending)."""
    return Store.open_current(existing_database(settings), busy_timeout_ms=settings.busy_timeout_ms)


def import_file(settings: Settings, file: str, *, skip_invalid: bool = False, dry_run: bool = False,
                progress: Callable[[int], AbstractContextManager[Progress]] | None = None) -> ImportReport:
    """``graph-memory import FILE``: merge the legacy ``file`` into the database (one transaction,
    recorded in ``legacy_imports``), or with ``dry_run`` only report what that would do.

    The file is read and parsed first, once (it may be a pipe): a refused file never opens (or
    creates) the database. A dry run opens an existing database without migrating it (none: every
    item would be new); an import opens it migrating (creating a new one). ``progress(total)``
    (``total``: the file's entities and relations) gives the importer's progress for the import.

    Raises:
        LegacyFormatError: the file cannot be read or has a bad line (nothing was imported).
        PendingMigrationsError: a dry run on a database with pending migrations.
        StoreError: the database cannot be opened or written (nothing was).
    """
    state, legacy = read_legacy_file(file, skip_invalid=skip_invalid, database=settings.database_path)
    path = settings.database_path
    if dry_run:
        store = open_current(settings) if path.is_file() else None
        try:  # no database (or no tables yet): everything would be new
            compare = store if store is not None and store.has_graph_tables() else None
            return plan_graph(compare, legacy, source=file, database=str(path))
        finally:
            if store is not None:
                store.close()
    store = Store.open(path, busy_timeout_ms=settings.busy_timeout_ms)
    try:
        with progress(len(legacy.entities) + len(legacy.relations)) if progress else nullcontext() as bar:
            return load_graph(store, legacy, source=file, progress=bar, record=state)
    finally:
        store.close()


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What ``graph-memory export`` wrote: ``entities`` and ``relations`` (counts), ``weighted``
    (relations whose weight is not 1.0, whether written or not)."""

    entities: int
    relations: int
    weighted: int


def export_graph(settings: Settings, output: Path | Callable[[Callable[[Any], int]], None], *,
                 with_weights: bool = False, fmt: ExportFormat = "jsonl", entities: Sequence[str] = (),
                 hops: int = 1) -> ExportResult:
    """``graph-memory export``: write the graph as reference-server JSONL (with ``with_weights``,
    relation weights other than 1.0 as a last ``"weight"`` key), or with ``fmt`` ``"mermaid"`` /
    ``"dot"`` as a picture (:mod:`graph_memory.pictures`), to the file ``output`` (replaced
    atomically) or through ``output(write)``, which runs ``write(stream)`` on the stream to write.

    With ``entities``, only their neighbourhood: the entities within ``hops`` relations of them
    (either direction) and the relations among those (unknown names refused).

    The database is opened without migrating, read in one transaction and closed before writing.

    Raises:
        PendingMigrationsError: migrations are pending. StoreError: no database, or it cannot be read.
        GraphError: ``output`` is the database file itself. EntityNotFound: an ``entities`` name is no entity.
        InvalidInput: ``hops`` is negative.
    """
    if hops < 0:
        raise InvalidInput(f"--hops must be 0 or more, not {hops}")
    store = open_current(settings)
    try:
        if not store.has_graph_tables():
            snapshot = GraphSlice([], [])
        elif entities:
            snapshot = store.run_read(lambda conn: _neighborhood_slice(conn, list(entities), hops))
        else:
            snapshot = store.run_read(graph.read_graph)
    finally:
        store.close()

    def write(out: Any) -> int:
        if fmt == "jsonl":
            return write_legacy(snapshot.entities, snapshot.relations, out, with_weights=with_weights)
        write_picture(fmt, [(e.name, e.entity_type) for e in snapshot.entities], snapshot.relations, out)
        return 0

    if isinstance(output, Path):
        if output.exists() and output.samefile(store.path):
            raise GraphError(f"{output} is the database itself; choose another output file")
        if fmt == "jsonl":
            export_file(output, snapshot.entities, snapshot.relations, with_weights=with_weights)
        else:
            write_atomically(output, write)
    else:
        output(write)
    return ExportResult(len(snapshot.entities), len(snapshot.relations),
                        sum(1 for r in snapshot.relations if r.weight != 1.0))


ExportFormat = Literal["jsonl", "mermaid", "dot"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("jsonl", *PICTURE_FORMATS)


def _neighborhood_slice(conn: Connection, names: list[str], hops: int) -> GraphSlice:
    """The entities within ``hops`` of ``names`` (all of them, with observations) and the
    relations among them. Raises EntityNotFound for the first name that is no entity."""
    area = SqliteGraph(conn).neighborhood(names, hops, None)
    for name in names:
        if name not in area.centers:
            raise EntityNotFound(name)
    chosen = graph.open_nodes(conn, [n.name for n in area.nodes]).entities
    return GraphSlice(chosen, area.relations)


def backup(settings: Settings, dest: str, *, force: bool = False,
           progress: Callable[[int, int], None] | None = None) -> BackupResult:
    """``graph-memory backup DEST``: :func:`~graph_memory.db.backup.backup_database` of the existing
    database (``progress(done, total)`` in pages). Raises: StoreError/GraphError (nothing left at DEST)."""
    return backup_database(existing_database(settings), dest, force=force,
                           busy_timeout_ms=settings.busy_timeout_ms, progress=progress)


@dataclass(frozen=True, slots=True)
class Stats:
    """``graph-memory stats``: the database ``path``, its ``files`` (name → bytes: the database, WAL,
    shared memory), schema ``version`` and ``pending`` migration names, the graph ``counts``, the
    import ``records`` (oldest first) and what the next start still ``owes`` ('import', 'baseline'
    or None)."""

    path: Path
    files: dict[str, int]
    version: int
    pending: list[str]
    counts: GraphCounts
    records: list[ImportRecord]
    owes: str | None

    def to_dict(self) -> dict[str, Any]:
        """The ``stats --json`` object."""
        return {
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
    store = open_readonly(settings)
    try:
        state = store.schema_status()
        # One read transaction: the counts and the records describe the same moment.
        counts, records, owes = store.run_read(lambda conn: (graph_counts(conn), import_records(conn),
                                                             first_start_action(conn)))
    finally:
        store.close()
    return Stats(store.path, database_files(store.path), state.version, [m.name for m in state.pending],
                 counts, records, owes)


def first_start(store: Store, settings: Settings, log: BoundLogger) -> ImportReport | None:
    """At ``serve``, on the migrated ``store``: settle the legacy file
    (:func:`~graph_memory.importer.first_start_import`: import it when the database owes its first
    import), then, on the start that created the database, log the ``reference_memory_found`` hint
    on ``log`` when it is still empty. Returns the first-start import's report, else None.

    Raises:
        LegacyFormatError: the legacy file to import has a bad line (the database stays empty).
        StoreError: the database cannot be read, or written for an owed import.
    """
    try:  # only for the hint: a damaged database still starts and answers with tool errors
        new_database = store.run_read(first_start_action) == "import"
    except GraphError:
        new_database = False
    report = first_start_import(store, settings.legacy_candidates)  # a bad file stops the start here
    if new_database:  # only the start that created it: a database emptied on purpose stays quiet
        log_hint_if_reference_files(store, log)
    return report
