-- 0003_short_gin_pending_lists (PostgreSQL): keep the trigram indexes' pending lists short.
--
-- A GIN index with fastupdate (the default) queues each new entry in a pending list that every
-- search reads whole, until the list passes gin_pending_list_limit (4 MB by default) or a vacuum
-- merges it. Every write rewrites its entity's search document, so the lists filled up to ~1,000
-- documents (observations) and ~10,000 (names, types) and a one-hit search at 100,000 entities
-- cost 3-10 ms instead of ~1 ms (docs/benchmarks.md, PostgreSQL). With these limits a search reads
-- at most ~250 pending documents' observations and a few hundred names and types, and a write
-- keeps its cheap append: the merge into the index comes every few hundred writes, in smaller
-- steps. fastupdate=off (every write merges its own entries) cost 8x more per write.
ALTER INDEX entity_search_observations_trgm SET (gin_pending_list_limit = 1024);  -- kB
ALTER INDEX entity_search_name_trgm SET (gin_pending_list_limit = 64);
ALTER INDEX entity_search_type_trgm SET (gin_pending_list_limit = 64);
