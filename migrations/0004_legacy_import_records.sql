-- 0004_legacy_import_records: which legacy file was imported, so the automatic import runs once.
--
-- Until now a start imported the legacy file (memory.jsonl) whenever the database held no entity
-- and no relation, so a user who deleted everything got the whole file back on the next start.
-- Now only the start that CREATES the database imports it, and every import is recorded here:
-- a later start compares the file with its record and warns when it changed (importer.py).
--
-- temp.migration_context (migrations.py) says whether this transaction creates the database
-- (new_database = 1; then every migration runs in this one transaction) or upgrades one.

CREATE TABLE legacy_imports (
    id           INTEGER PRIMARY KEY,   -- order of the records
    kind         TEXT NOT NULL CHECK (kind IN ('first_start', 'import', 'upgrade', 'baseline')),
                                        -- first_start: imported by the start that created the database;
                                        -- import: `graph-memory import` (not a dry run);
                                        -- upgrade: the database predates these records (created before
                                        --   0004), whether it imported a file then is unknown;
                                        -- baseline: the legacy file as the first start after that
                                        --   upgrade found it, NOT imported by this version
    path         TEXT,                  -- absolute path of the legacy file (NULL for upgrade)
    size_bytes   INTEGER,               -- the file's size when it was read
    sha256       TEXT,                  -- hex digest of its bytes
    mtime        TEXT,                  -- its modification time, ISO 8601 UTC
    mtime_ns     INTEGER,               -- the same in nanoseconds since the epoch (exact comparison)
    entities     INTEGER,               -- rows the import created (NULL for upgrade and baseline)
    observations INTEGER,
    relations    INTEGER,
    recorded_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX legacy_imports_path ON legacy_imports (path);

-- What the next start still has to do about the legacy file, at most once: 'import' (a new
-- database: import the file, if there is one), 'baseline' (an upgraded database: record the
-- file's state without importing it), NULL (done). The transaction that does it clears it, so a
-- crash before that leaves the duty to the next start, and of two racing starts only one does it.
CREATE TABLE legacy_first_start (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    action TEXT CHECK (action IN ('import', 'baseline'))
);
INSERT INTO legacy_first_start (id, action)
SELECT 1, CASE new_database WHEN 1 THEN 'import' ELSE 'baseline' END FROM temp.migration_context;
INSERT INTO legacy_imports (kind) SELECT 'upgrade' FROM temp.migration_context WHERE new_database = 0;
