"""Everything about the database: the storage layer.

``store`` opens the file (pragmas, read/write transactions with retry) and holds the only
apsw → :class:`~graph_memory.errors.StoreError` map (``translate``); ``migrations`` applies the
numbered SQL files of ``migrations/``; ``index`` owns the deferred full-text search index (the
search document, its sync modes, catch-up, the backlog view and the idle policy); ``graph`` and
``search`` hold the SQL of the graph operations and of ``search_nodes``; ``records`` holds the rows
of legacy imports and the first-start duty; ``backup`` copies and checks a database file through
the store; ``paths`` vets a database path; ``backend`` is the
boundary the service calls (the ``Backend`` and ``Graph`` protocols) with its SQLite implementation.

Nothing outside this package imports apsw or runs SQL. A second backend (PostgreSQL, a later
issue) goes beside these modules in its own subpackage (e.g. ``db/postgres/``) with its own
migrations folder, implementing the same graph semantics; the SQLite-specific choices (apsw,
WAL, trigram FTS5) stay in the modules here.
"""
