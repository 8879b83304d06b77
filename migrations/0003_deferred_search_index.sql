-- 0003_deferred_search_index: the FTS index catches up in batches instead of on every write.
--
-- Until now every write re-indexed each touched entity's whole search document at once: a FTS5
-- 'delete' of its old trigrams, an insert of its new ones and a new index segment at commit, most
-- of a small write's cost. Now a write only records which entities' documents changed, in
-- search_pending, together with the version the index still holds; the index catches up for all
-- of them at once (store.catch_up_search_index): before any search reads it, when the backlog
-- reaches store.SEARCH_BACKLOG entities, when the server has been idle for a moment, and when it
-- stops. A search therefore always sees every committed write.
--
-- Invariant: for an entity id with no search_pending row, entity_fts indexes exactly its
-- entity_search row (or nothing when there is none). With a row, entity_fts indexes the
-- (name, entity_type, observations) stored in it, or nothing when name IS NULL. INSERT OR IGNORE
-- keeps the first row, i.e. what the index held before the first change since the last catch-up.

CREATE TABLE search_pending (
    entity_id    INTEGER PRIMARY KEY,  -- entity_search.entity_id whose document changed
    name         TEXT,                 -- the indexed version (NULL: the index holds nothing for it)
    entity_type  TEXT,
    observations TEXT
);

DROP TRIGGER entity_search_ai;
DROP TRIGGER entity_search_ad;
DROP TRIGGER entity_search_au;

CREATE TRIGGER entity_search_ai AFTER INSERT ON entity_search
WHEN (SELECT enabled FROM search_sync WHERE id = 1) BEGIN
    INSERT OR IGNORE INTO search_pending (entity_id) VALUES (new.entity_id);
END;
CREATE TRIGGER entity_search_ad AFTER DELETE ON entity_search
WHEN (SELECT enabled FROM search_sync WHERE id = 1) BEGIN
    INSERT OR IGNORE INTO search_pending (entity_id, name, entity_type, observations)
    VALUES (old.entity_id, old.name, old.entity_type, old.observations);
END;
CREATE TRIGGER entity_search_au AFTER UPDATE ON entity_search
WHEN (SELECT enabled FROM search_sync WHERE id = 1) BEGIN
    INSERT OR IGNORE INTO search_pending (entity_id, name, entity_type, observations)
    VALUES (old.entity_id, old.name, old.entity_type, old.observations);
END;
