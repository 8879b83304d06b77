-- 0009_moved_and_exported_legacy_files: a legacy file found under a new path with the bytes of one
-- recorded under another (its folder moved or copied together with the database, e.g. into a
-- container's /data) is recorded as kind 'moved': not imported again, its state kept under the new
-- path so later starts and `graph-memory import --new-lines` compare it as usual (importer.py).
-- A legacy file `graph-memory export -o` wrote (switching back to the reference server) is
-- recorded as kind 'export': the next start does not take graph-memory's own lines for a change,
-- and a later `import --new-lines` merges only what another program changed in it since.
--
-- SQLite cannot change a CHECK constraint in place: the table is rebuilt with the same columns,
-- rows and ids (a few rows, one per import), and its index made again.
CREATE TABLE legacy_imports_0009 (
    id           INTEGER PRIMARY KEY,   -- order of the records
    kind         TEXT NOT NULL CHECK (kind IN ('first_start', 'import', 'upgrade', 'baseline', 'moved',
                                                   'export')),
                                        -- first_start, import, upgrade, baseline: see 0004;
                                        -- moved: the bytes of a file recorded under another path,
                                        --   found here; NOT imported again;
                                        -- export: written by `graph-memory export` from this
                                        --   database; NOT imported
    path         TEXT,                  -- absolute path of the legacy file (NULL for upgrade)
    size_bytes   INTEGER,               -- the file's size when it was read
    sha256       TEXT,                  -- hex digest of its bytes
    mtime        TEXT,                  -- its modification time, ISO 8601 UTC
    mtime_ns     INTEGER,               -- the same in nanoseconds since the epoch (exact comparison)
    entities     INTEGER,               -- rows the import created (NULL for upgrade, baseline, moved, export)
    observations INTEGER,
    relations    INTEGER,
    recorded_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    line_digests BLOB                   -- see 0008
);
INSERT INTO legacy_imports_0009 (id, kind, path, size_bytes, sha256, mtime, mtime_ns, entities, observations,
                                 relations, recorded_at, line_digests)
SELECT id, kind, path, size_bytes, sha256, mtime, mtime_ns, entities, observations, relations, recorded_at,
       line_digests
FROM legacy_imports;
DROP TABLE legacy_imports;
ALTER TABLE legacy_imports_0009 RENAME TO legacy_imports;
CREATE INDEX legacy_imports_path ON legacy_imports (path);
