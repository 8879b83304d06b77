-- 0002_portable_search_triggers: the observation triggers of 0001 without aggregate ORDER BY.
--
-- group_concat(x, sep ORDER BY id) needs SQLite 3.44+; an older sqlite3 shell (Debian 12 ships
-- 3.40) then reports the whole schema as malformed and cannot even read the file. The document is
-- now concatenated from an ordered subquery, which every SQLite since 3.8 parses. The order of
-- observations in a document never decides a search result (every candidate is checked against
-- the stored fields, and the FTS 'delete' uses the stored old values), so nothing is rebuilt.

DROP TRIGGER observations_ai;
DROP TRIGGER observations_au;
DROP TRIGGER observations_ad;

CREATE TRIGGER observations_ai AFTER INSERT ON observations
WHEN (SELECT enabled FROM search_sync WHERE id = 1) BEGIN
    UPDATE entity_search
       SET observations = (SELECT coalesce(group_concat(text, char(10)), '')
                             FROM (SELECT python_lower(content) AS text FROM observations
                                    WHERE entity_id = new.entity_id ORDER BY id))
     WHERE entity_id = new.entity_id;
END;
CREATE TRIGGER observations_au AFTER UPDATE OF content ON observations
WHEN (SELECT enabled FROM search_sync WHERE id = 1) BEGIN
    UPDATE entity_search
       SET observations = (SELECT coalesce(group_concat(text, char(10)), '')
                             FROM (SELECT python_lower(content) AS text FROM observations
                                    WHERE entity_id = new.entity_id ORDER BY id))
     WHERE entity_id = new.entity_id;
END;
CREATE TRIGGER observations_ad AFTER DELETE ON observations
WHEN (SELECT enabled FROM search_sync WHERE id = 1) BEGIN
    UPDATE entity_search
       SET observations = (SELECT coalesce(group_concat(text, char(10)), '')
                             FROM (SELECT python_lower(content) AS text FROM observations
                                    WHERE entity_id = old.entity_id ORDER BY id))
     WHERE entity_id = old.entity_id;
END;
