-- 0002_times_cursors_inverses (PostgreSQL): what the SQLite migrations 0006 and 0007 add, for
-- `timestamps`/`since`, paging cursors and materialized inverse relations.
--
-- Unknown times are NULL here (SQLite stores '' only because it cannot drop a NOT NULL in place):
-- rows imported from a legacy memory.jsonl keep no times, the import moment is not when the fact
-- was learned. No `since` selects NULL, and readers show it as null. An entity's updated_at is its
-- last change: every write that adds, edits or removes one of its observations sets it.
ALTER TABLE entities ALTER COLUMN created_at DROP NOT NULL;
ALTER TABLE entities ALTER COLUMN updated_at DROP NOT NULL;
ALTER TABLE observations ALTER COLUMN created_at DROP NOT NULL;
ALTER TABLE observations ALTER COLUMN updated_at DROP NOT NULL;
ALTER TABLE relations ALTER COLUMN created_at DROP NOT NULL;

-- A relation's last weight change (update_relations); NULL: never changed, read as created_at.
ALTER TABLE relations ADD COLUMN updated_at timestamptz;

-- Backfill, 1 (as SQLite's 0006): until now adding or removing an observation left its entity's
-- updated_at alone; an entity changed at least when its newest observation was added or edited.
UPDATE entities e
   SET updated_at = o.newest
  FROM (SELECT entity_id, max(updated_at) AS newest FROM observations GROUP BY entity_id) o
 WHERE o.entity_id = e.id AND o.newest > e.updated_at;

-- Backfill, 2 (as SQLite's 0006): the rows of a first-start import are exactly those created at
-- or before its record (the start that imports is the one that creates the graph); their times
-- are the import moment: unknown. Later times are real and stay.
UPDATE entities SET updated_at = NULL
 WHERE updated_at <= (SELECT max(recorded_at) FROM legacy_imports WHERE kind = 'first_start');
UPDATE entities SET created_at = NULL
 WHERE created_at <= (SELECT max(recorded_at) FROM legacy_imports WHERE kind = 'first_start');
UPDATE observations SET updated_at = NULL
 WHERE updated_at <= (SELECT max(recorded_at) FROM legacy_imports WHERE kind = 'first_start');
UPDATE observations SET created_at = NULL
 WHERE created_at <= (SELECT max(recorded_at) FROM legacy_imports WHERE kind = 'first_start');
UPDATE relations SET created_at = NULL
 WHERE created_at <= (SELECT max(recorded_at) FROM legacy_imports WHERE kind = 'first_start');

-- `since` on read_graph: the entities changed at or after a moment.
CREATE INDEX entities_updated_at ON entities (updated_at);

-- The key that signs paging cursors (HMAC-SHA256): a cursor of another database, or an altered
-- one, is refused. Made once per database from two random UUIDs (gen_random_uuid is built in
-- since PostgreSQL 13 and uses the strong random source); never leaves the database.
CREATE TABLE cursor_secret (
    id     integer PRIMARY KEY CHECK (id = 1),
    secret bytea NOT NULL
);
INSERT INTO cursor_secret (id, secret) VALUES (1, uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()));

-- Relations created as the declared inverse of another (SQLite's 0007): deleting the primary
-- deletes its inverse (the cascade); NULL: an ordinary relation.
ALTER TABLE relations ADD COLUMN inverse_of bigint REFERENCES relations (id) ON DELETE CASCADE;
CREATE INDEX relations_inverse_of ON relations (inverse_of) WHERE inverse_of IS NOT NULL;
