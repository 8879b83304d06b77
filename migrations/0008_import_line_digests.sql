-- 0008_import_line_digests: what each imported line of a legacy file was, so a changed file can
-- be merged by what changed in it.
--
-- A user who switched keeps deleting and editing memories here while the legacy file may change
-- too (the reference server still writing it for a while). Merging the whole file again brings
-- back every memory deleted since its import. `graph-memory import --new-lines` merges only the
-- lines that were not in the file when it was last imported; for that, each import records an
-- 8-byte BLAKE2b digest of each of the file's non-blank lines (in file order, concatenated).
-- NULL: recorded before this migration, or not a JSONL file (the single-document form).
ALTER TABLE legacy_imports ADD COLUMN line_digests BLOB;
