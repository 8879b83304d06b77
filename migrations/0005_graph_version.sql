-- 0005_graph_version: a counter of committed graph changes, so a server can tell another
-- process's change to the graph from its mere search-index upkeep.
--
-- Subscribers of memory://knowledge-graph are told of every committed change, also those made by
-- other processes on the same file (server.ExternalChanges notices them through PRAGMA
-- data_version). data_version also moves when another process only brings the FTS index up to
-- date, which changes no entity, observation or relation. Every write transaction that changed
-- the graph adds one here (Store.write, once per transaction, not per row); index catch-ups do
-- not, so a foreign commit that leaves this number alone is not a change of the graph.

CREATE TABLE graph_version (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
INSERT INTO graph_version (id, version) VALUES (1, 0);
