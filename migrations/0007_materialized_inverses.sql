-- 0007_materialized_inverses: relations created as the declared inverse of another.
--
-- With inverse pairs declared (MEMORY_INVERSE_RELATIONS, or a typed schema's relationship
-- "inverse"), creating `a -[manages]-> b` also creates `b -[reports_to]-> a`, which points at the
-- relation it was made for. Deleting that primary deletes its inverse with it (the cascade), and
-- the tools report only what they were asked to delete. NULL: an ordinary relation.
ALTER TABLE relations ADD COLUMN inverse_of INTEGER REFERENCES relations(id) ON DELETE CASCADE;
CREATE INDEX relations_inverse_of ON relations (inverse_of) WHERE inverse_of IS NOT NULL;
