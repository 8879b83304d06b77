-- 0006_times_and_cursors: honest times for `timestamps`/`since`, and the key that signs cursors.
--
-- Times are ISO 8601 UTC text (strftime('%Y-%m-%dT%H:%M:%fZ')). An entity's updated_at is its last
-- change: from now on every write that adds, edits or removes one of its observations sets it
-- (graph.py), so `since` finds entities whose observations changed.
--
-- Unknown times. A legacy memory.jsonl keeps no times, so rows imported from one have none: the
-- import moment is not when the fact was learned. SQLite cannot drop the NOT NULL of the 0001
-- columns without rebuilding the tables (and a rebuild inside this transaction, with foreign keys
-- on, would cascade-delete every observation), so the empty string stands for "unknown": it
-- sorts before every time (no `since` selects it) and readers show it as null. Imports write it
-- from this version on (graph.merging); the PostgreSQL backend stores NULL.

-- A relation's last weight change (update_relations); NULL: never changed, read as created_at.
ALTER TABLE relations ADD COLUMN updated_at TEXT;

-- Backfill, 1: until now adding or removing an observation left its entity's updated_at alone.
-- The observations' own times are known: an entity changed at least when its newest one was
-- added or edited (a removal before this version left no trace and cannot be recovered).
-- (An observation's updated_at is never before its created_at.)
UPDATE entities
   SET updated_at = (SELECT max(o.updated_at) FROM observations o WHERE o.entity_id = entities.id)
 WHERE (SELECT max(o.updated_at) FROM observations o WHERE o.entity_id = entities.id) > updated_at;

-- Backfill, 2: the rows of a first-start import (0004 records it in the same transaction, at its
-- end) are exactly the rows created at or before that record: the start that imports is the one
-- that creates the database, so nothing older exists. Their times are the import moment: unknown.
-- A time after the record (an observation added or edited later, a later weight change) is real
-- and stays. Rows of `graph-memory import` into a database that already held data cannot be told
-- apart from the rows around them by time, so they keep the import moment; databases older than
-- 0004 (an 'upgrade' record) likewise.
UPDATE entities SET updated_at = ''
 WHERE updated_at <= (SELECT max(recorded_at) FROM legacy_imports WHERE kind = 'first_start');
UPDATE entities SET created_at = ''
 WHERE created_at <= (SELECT max(recorded_at) FROM legacy_imports WHERE kind = 'first_start');
UPDATE observations SET updated_at = ''
 WHERE updated_at <= (SELECT max(recorded_at) FROM legacy_imports WHERE kind = 'first_start');
UPDATE observations SET created_at = ''
 WHERE created_at <= (SELECT max(recorded_at) FROM legacy_imports WHERE kind = 'first_start');
UPDATE relations SET created_at = ''
 WHERE created_at <= (SELECT max(recorded_at) FROM legacy_imports WHERE kind = 'first_start');

-- `since` on read_graph: the entities changed at or after a moment.
CREATE INDEX entities_updated_at ON entities (updated_at);

-- The key that signs paging cursors (HMAC-SHA256): a cursor of another database, or an altered
-- one, is refused. Made once per database; never leaves it.
CREATE TABLE cursor_secret (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    secret BLOB NOT NULL
);
INSERT INTO cursor_secret (id, secret) VALUES (1, randomblob(32));
