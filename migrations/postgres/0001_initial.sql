-- 0001_initial (PostgreSQL): the knowledge graph, its search documents and the legacy-import
-- records, in one migration (the SQLite history 0001-0005 as it stands today).
--
-- Names are the keys of the graph, exact and case-sensitive, as the reference server treats them.
-- Rows keep creation order through their identity id, the order every tool returns them in.
--
-- Text columns are COLLATE "C" (byte order, exact comparisons) and hold the text as given, except
-- that NUL (which PostgreSQL text cannot hold) and U+10FFFF are escaped reversibly
-- (db/postgres/text.py). Uniqueness is enforced on sha256 keys computed by graph-memory, because
-- a B-tree entry cannot exceed about 2700 bytes and names, types and observations may be longer.

CREATE EXTENSION IF NOT EXISTS pg_trgm;  -- trusted since PostgreSQL 13: the database owner may create it

CREATE TABLE entities (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- creation order
    name        text COLLATE "C" NOT NULL,                         -- the entity's key
    name_key    bytea NOT NULL UNIQUE,                             -- sha256 of the name (UTF-8)
    entity_type text COLLATE "C" NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE observations (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- position within its entity
    entity_id   bigint NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    content     text COLLATE "C" NOT NULL,
    content_key bytea NOT NULL,                                    -- sha256 of the content (UTF-8)
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (entity_id, content_key)                                -- observations are unique per entity
);

-- Relations name their endpoints instead of referencing entity rows: a legacy file may hold
-- relations to entities that do not exist, and those are kept exactly as stored.
CREATE TABLE relations (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    from_name     text COLLATE "C" NOT NULL,
    to_name       text COLLATE "C" NOT NULL,
    relation_type text COLLATE "C" NOT NULL,
    from_key      bytea NOT NULL,                                  -- sha256 of from_name
    to_key        bytea NOT NULL,                                  -- sha256 of to_name
    relation_key  bytea NOT NULL UNIQUE,                           -- sha256 of the (from, to, type) triple
    weight        double precision NOT NULL DEFAULT 1.0 CHECK (weight >= 0.0 AND weight <= 1.0),
    created_at    timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX relations_from_key ON relations (from_key);
CREATE INDEX relations_to_key ON relations (to_key);

-- Search documents: one row per entity, its name, type and observations (joined by newlines in id
-- order) lower-cased with Python's str.lower() by graph-memory itself (PostgreSQL's lower()
-- differs on characters such as İ and ẞ), written in the same transaction as the change. The
-- trigram indexes only narrow the candidates of a search; LIKE on these columns decides.
CREATE TABLE entity_search (
    entity_id    bigint PRIMARY KEY REFERENCES entities (id) ON DELETE CASCADE,
    name         text COLLATE "C" NOT NULL,
    entity_type  text COLLATE "C" NOT NULL,
    observations text COLLATE "C" NOT NULL
);
CREATE INDEX entity_search_name_trgm ON entity_search USING gin (name gin_trgm_ops);
CREATE INDEX entity_search_type_trgm ON entity_search USING gin (entity_type gin_trgm_ops);
CREATE INDEX entity_search_observations_trgm ON entity_search USING gin (observations gin_trgm_ops);

-- Which legacy file was imported (see the SQLite migration 0004 for the kinds).
CREATE TABLE legacy_imports (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind         text NOT NULL CHECK (kind IN ('first_start', 'import', 'upgrade', 'baseline')),
    path         text,
    size_bytes   bigint,
    sha256       text,
    mtime        text,
    mtime_ns     bigint,
    entities     bigint,
    observations bigint,
    relations    bigint,
    recorded_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX legacy_imports_path ON legacy_imports (path);

-- What the next start still owes: a new database imports the legacy file once ('import').
CREATE TABLE legacy_first_start (
    id     integer PRIMARY KEY CHECK (id = 1),
    action text CHECK (action IN ('import', 'baseline'))
);
INSERT INTO legacy_first_start (id, action) VALUES (1, 'import');
