-- 0005_moved_and_exported_legacy_files (PostgreSQL): import records of kinds 'moved' and 'export',
-- as migrations/0009_moved_and_exported_legacy_files.sql says for SQLite: the bytes of a legacy
-- file recorded under another path, found under a new one; a legacy file written by
-- `graph-memory export`. Neither is imported.
ALTER TABLE legacy_imports DROP CONSTRAINT legacy_imports_kind_check;
ALTER TABLE legacy_imports ADD CONSTRAINT legacy_imports_kind_check
    CHECK (kind IN ('first_start', 'import', 'upgrade', 'baseline', 'moved', 'export'));
