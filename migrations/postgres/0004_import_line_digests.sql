-- 0004_import_line_digests (PostgreSQL): what each imported line of a legacy file was, as
-- migrations/0008_import_line_digests.sql says for SQLite: an 8-byte BLAKE2b digest of each
-- non-blank line, in file order, concatenated; NULL when not recorded.
ALTER TABLE legacy_imports ADD COLUMN line_digests bytea;
