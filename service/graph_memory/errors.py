"""The exception tree of graph-memory.

Every failure the product reports on purpose is a :class:`GraphError`. Tool adapters turn
these into MCP tool results with ``isError: true`` (one place: ``server``); the CLI turns them
into a message on stderr and a non-zero exit (one place: ``cli``). Anything else escaping is a
bug and is logged with its traceback, never shown to the caller.

::

    GraphError                      base: message is safe to show to a person or a model
    ├── InvalidInput                arguments that break the contract (types, sizes, empty names)
    │   ├── InvalidQuery            a search query that cannot be run (too long, bad FTS syntax)
    │   └── InvalidCursor           a paging cursor that is malformed, stale, foreign or altered
    ├── ReplyTooLarge               a reply over MEMORY_MAX_REPLY_BYTES (page it, ask for less, split the call)
    ├── EntityNotFound              "Entity with name {name} not found" (upstream's wording)
    ├── RelationNotFound            a relation an edit names does not exist (update_relations)
    ├── Conflict                    a write that would break a uniqueness rule
    ├── StoreError                  the database cannot be used (path, permissions, corruption, locks)
    │   └── MigrationError          schema history edited, missing or newer than this code
    │       └── PendingMigrationsError  older than this code: ``graph-memory migrate`` first
    ├── LegacyFormatError           an upstream JSONL/JSON file that cannot be imported as is
    ├── SchemaError                 a typed-tool schema file (MEMORY_SCHEMAS_DIR) that cannot be used
    ├── OutputError                 a file a command writes (export, backup) cannot be written there
    ├── ServeError                  the server could not start serving (e.g. its HTTP port is taken)
    └── SettingsError               MEMORY_* settings (or the command's options) that do not validate
"""

from __future__ import annotations


class GraphError(Exception):
    """Base of every deliberate graph-memory failure; ``str(exc)`` is the user-facing message."""


class InvalidInput(GraphError):
    """Tool or CLI arguments that break the contract (wrong type, over a size limit, empty name)."""


class InvalidQuery(InvalidInput):
    """A search query that cannot be run: over 2048 characters, or malformed FTS5 syntax."""


class InvalidCursor(InvalidInput):
    """A ``cursor`` this database did not issue for this request: malformed, from another format
    version, from another database, altered, or from other arguments. The message says what to do."""


class ReplyTooLarge(GraphError):
    """A reply (of a tool or the knowledge-graph resource) that would be larger than
    ``MEMORY_MAX_REPLY_BYTES``; the message says how to get all of it (pages, the summary view,
    fewer names, a split call) and, for a write, whether it was saved."""


class EntityNotFound(GraphError):
    """An operation named an entity that does not exist.

    The message is exactly ``Entity with name {name} not found``, the reference server's wording,
    because callers written against it match on that text.
    """

    def __init__(self, name: str) -> None:
        super().__init__(f"Entity with name {name} not found")
        self.name = name


class RelationNotFound(GraphError):
    """An edit named a relation ``from -[relationType]-> to`` that does not exist."""

    def __init__(self, source: str, target: str, relation_type: str) -> None:
        super().__init__(f"Relation {source} -[{relation_type}]-> {target} not found")
        self.key = (source, target, relation_type)


class Conflict(GraphError):
    """A write that would break a uniqueness rule (e.g. an observation replaced by one that exists)."""


class OutputError(GraphError):
    """A file a command writes (an export, a backup) cannot be written where asked: it exists
    (without ``--force``), is the database itself or a directory, or its folder is not writable.
    Nothing was written there."""


class ServeError(GraphError):
    """The server could not start serving (the HTTP port is taken or cannot be bound)."""


class StartRefused(GraphError):
    """A call in a stdio session whose server refused its start (its database, a setting, a file):
    the message says why and what to fix (``graph_memory.mcp.server.build_refusing_server``)."""


class StoreError(GraphError):
    """The database cannot be opened or used: bad path, permissions, not SQLite, corrupt, locked."""


class MigrationError(StoreError):
    """The database's migration history does not match the code: edited, missing, or newer."""


class PendingMigrationsError(MigrationError):
    """The database has older migrations applied than this code reads; the message gives the
    ``graph-memory migrate --database …`` command to run first."""


class LegacyFormatError(GraphError):
    """An upstream memory file that cannot be imported as it is.

    Attributes:
        path: the file, when reading from disk (``None`` for in-memory data).
        line: 1-based line number of the offending line, when the fault is on one line.
        offset: 0-based byte offset, for byte-level faults such as invalid UTF-8.
        reason: what is wrong, without the location prefix.
        skippable: the fault is in one line or item, which ``import --skip-invalid`` would skip
            (False for a file that cannot be read at all, or whose structure is wrong).
        advice: what happened to the database and what to do, appended to the message as is
            (:meth:`advised`); empty where the caller knows no more than the fault.
    """

    def __init__(
        self,
        reason: str,
        *,
        path: str | None = None,
        line: int | None = None,
        offset: int | None = None,
        skippable: bool = False,
        advice: str = "",
    ) -> None:
        where = path or "legacy file"
        if line is not None:
            where += f", line {line}"
        if offset is not None:
            where += f", byte offset {offset}"
        super().__init__(f"{where}: {reason}{advice}")
        self.path = path
        self.line = line
        self.offset = offset
        self.reason = reason
        self.skippable = skippable
        self.advice = advice

    def advised(self, advice: str) -> LegacyFormatError:
        """The same fault, its message followed by ``advice`` (which starts with its own
        punctuation, e.g. ``". Nothing was imported"``)."""
        return LegacyFormatError(self.reason, path=self.path, line=self.line, offset=self.offset,
                                 skippable=self.skippable, advice=advice)


class SchemaError(GraphError):
    """A typed-tool schema file that cannot be used; the message names the file and the problem.

    Attributes:
        path: the schema file (or the folder, for problems with the folder itself).
        problem: what is wrong, without the file name.
    """

    def __init__(self, problem: str, *, path: str) -> None:
        super().__init__(f"schema {path}: {problem}")
        self.path = path
        self.problem = problem


class SettingsError(GraphError):
    """Settings that do not validate; the message names each ``MEMORY_*`` variable and its problem."""
