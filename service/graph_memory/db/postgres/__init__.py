"""The PostgreSQL backend (``MEMORY_DATABASE_URL=postgresql://…``): :class:`PostgresBackend` and
:class:`PostgresGraph` implement the storage boundary of :mod:`graph_memory.db.backend` with the
SQLite backend's graph semantics. Needs the ``postgres`` extra (psycopg 3 with its pool); only
:func:`graph_memory.db.backend.open_backend` imports it, when the URL is set."""
