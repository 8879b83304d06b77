-- 0001_initial: the knowledge graph and its search index.
--
-- Names are the keys of the graph, exactly as the reference server treats them (exact,
-- case-sensitive). Rows keep creation order through their INTEGER PRIMARY KEY (rowid), which is
-- the order every tool returns them in.

CREATE TABLE entities (
    id          INTEGER PRIMARY KEY,            -- creation order
    name        TEXT NOT NULL UNIQUE,           -- the entity's key
    entity_type TEXT NOT NULL,                  -- e.g. person, organization, event
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TABLE observations (
    id          INTEGER PRIMARY KEY,            -- insertion order within an entity
    entity_id   INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    content     TEXT NOT NULL,                  -- one atomic fact
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (entity_id, content)                 -- observations are unique per entity
);

-- Relations name their endpoints instead of referencing entity rows: a legacy file may hold
-- relations to entities that do not exist, and those are kept exactly as stored. Deleting an
-- entity deletes the relations naming it (graph.delete_entities).
CREATE TABLE relations (
    id            INTEGER PRIMARY KEY,          -- creation order
    from_name     TEXT NOT NULL,
    to_name       TEXT NOT NULL,
    relation_type TEXT NOT NULL,                -- active voice, e.g. works_at
    weight        REAL NOT NULL DEFAULT 1.0 CHECK (weight >= 0.0 AND weight <= 1.0),
    created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (from_name, to_name, relation_type)
);
CREATE INDEX relations_to_name ON relations (to_name);

-- Search documents: one row per entity holding its text lower-cased with Python's str.lower()
-- (the reference server's case rule; SQLite's own case folding differs on İ, ẞ, final sigma…).
-- python_lower() is registered on every connection graph-memory opens; a connection without it
-- (e.g. the sqlite3 shell) can read everything but cannot write entities or observations, which
-- keeps the index from drifting. Observations are joined with a newline in id order.
CREATE TABLE entity_search (
    entity_id    INTEGER PRIMARY KEY REFERENCES entities(id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    entity_type  TEXT NOT NULL,
    observations TEXT NOT NULL
);

-- FTS5 over the search documents, external-content: the index stores no text of its own.
-- trigram answers substring queries of 3+ characters; case_sensitive 1 because the documents
-- are already lower-cased by the rule above.
CREATE VIRTUAL TABLE entity_fts USING fts5(
    name, entity_type, observations,
    content = 'entity_search', content_rowid = 'entity_id',
    tokenize = 'trigram case_sensitive 1'
);

-- Bulk loads (legacy import) switch the per-row sync off inside their own transaction, then
-- rebuild entity_search and the FTS index once at the end (store.bulk_load); every other write
-- keeps both in sync row by row through the triggers below.
CREATE TABLE search_sync (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    enabled INTEGER NOT NULL DEFAULT 1
);
INSERT INTO search_sync (id, enabled) VALUES (1, 1);

-- entity_search -> entity_fts: the external-content pattern, 'delete' with the old values.
CREATE TRIGGER entity_search_ai AFTER INSERT ON entity_search
WHEN (SELECT enabled FROM search_sync WHERE id = 1) BEGIN
    INSERT INTO entity_fts (rowid, name, entity_type, observations)
    VALUES (new.entity_id, new.name, new.entity_type, new.observations);
END;
CREATE TRIGGER entity_search_ad AFTER DELETE ON entity_search
WHEN (SELECT enabled FROM search_sync WHERE id = 1) BEGIN
    INSERT INTO entity_fts (entity_fts, rowid, name, entity_type, observations)
    VALUES ('delete', old.entity_id, old.name, old.entity_type, old.observations);
END;
CREATE TRIGGER entity_search_au AFTER UPDATE ON entity_search
WHEN (SELECT enabled FROM search_sync WHERE id = 1) BEGIN
    INSERT INTO entity_fts (entity_fts, rowid, name, entity_type, observations)
    VALUES ('delete', old.entity_id, old.name, old.entity_type, old.observations);
    INSERT INTO entity_fts (rowid, name, entity_type, observations)
    VALUES (new.entity_id, new.name, new.entity_type, new.observations);
END;

-- entities / observations -> entity_search.
CREATE TRIGGER entities_ai AFTER INSERT ON entities
WHEN (SELECT enabled FROM search_sync WHERE id = 1) BEGIN
    INSERT INTO entity_search (entity_id, name, entity_type, observations)
    VALUES (new.id, python_lower(new.name), python_lower(new.entity_type), '');
END;
CREATE TRIGGER entities_au AFTER UPDATE OF name, entity_type ON entities
WHEN (SELECT enabled FROM search_sync WHERE id = 1) BEGIN
    UPDATE entity_search
       SET name = python_lower(new.name), entity_type = python_lower(new.entity_type)
     WHERE entity_id = new.id;
END;
-- Runs before the row goes, so the observation triggers fired by the cascade find no document
-- to rewrite (deleting an entity stays linear in its observations).
CREATE TRIGGER entities_bd BEFORE DELETE ON entities BEGIN
    DELETE FROM entity_search WHERE entity_id = old.id;
END;

CREATE TRIGGER observations_ai AFTER INSERT ON observations
WHEN (SELECT enabled FROM search_sync WHERE id = 1) BEGIN
    UPDATE entity_search
       SET observations = (SELECT coalesce(group_concat(python_lower(content), char(10) ORDER BY id), '')
                             FROM observations WHERE entity_id = new.entity_id)
     WHERE entity_id = new.entity_id;
END;
CREATE TRIGGER observations_au AFTER UPDATE OF content ON observations
WHEN (SELECT enabled FROM search_sync WHERE id = 1) BEGIN
    UPDATE entity_search
       SET observations = (SELECT coalesce(group_concat(python_lower(content), char(10) ORDER BY id), '')
                             FROM observations WHERE entity_id = new.entity_id)
     WHERE entity_id = new.entity_id;
END;
CREATE TRIGGER observations_ad AFTER DELETE ON observations
WHEN (SELECT enabled FROM search_sync WHERE id = 1) BEGIN
    UPDATE entity_search
       SET observations = (SELECT coalesce(group_concat(python_lower(content), char(10) ORDER BY id), '')
                             FROM observations WHERE entity_id = old.entity_id)
     WHERE entity_id = old.entity_id;
END;
