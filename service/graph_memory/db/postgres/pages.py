"""The rows of read_graph's and search_nodes's pages on PostgreSQL (:class:`PostgresPages`): the
rules that cut them are :mod:`graph_memory.db.pages`'s, written once for both backends, with the
same keys (entity and relation ids in creation order) and the same cursor positions.

``since`` compares the timestamptz columns with the moment (whole milliseconds), which selects
exactly the rows whose shown time (milliseconds cut) is at or after it; unknown times (NULL)
are never selected.
"""

from __future__ import annotations

from collections.abc import Iterable

from graph_memory.db.pages import RELATION_COLUMNS, keyset_params, limit_clause
from graph_memory.db.postgres.graph import PostgresGraph, relations_of
from graph_memory.db.postgres.search import match_ids, substring_among, substring_matches
from graph_memory.db.postgres.text import decode, key
from graph_memory.models import Entity, Mode, Relation


class PostgresPages:
    """The :class:`~graph_memory.db.pages.PageSource` of a PostgreSQL graph."""

    def __init__(self, graph: PostgresGraph) -> None:
        self.graph = graph

    def now(self) -> str:
        # clock_timestamp(), microseconds: as precise as created_at
        row = self.graph._one(
            "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')", ())
        assert row is not None
        return str(row[0])

    def entity_ids(self, after: int, since: str | None, limit: int | None) -> list[int]:
        changed = " AND updated_at >= %s::timestamptz" if since is not None else ""
        return [int(row[0]) for row in self.graph._rows(
            f"SELECT id FROM entities WHERE id > %s{changed} ORDER BY id{limit_clause(limit)}",
            keyset_params(after, since))]

    def relations(self, after: int, since: str | None, limit: int | None) -> tuple[list[int], list[Relation]]:
        changed = " AND coalesce(updated_at, created_at) >= %s::timestamptz" if since is not None else ""
        rows = self.graph._rows(
            f"SELECT {RELATION_COLUMNS} FROM relations WHERE id > %s{changed} ORDER BY id{limit_clause(limit)}",
            keyset_params(after, since))
        return [int(r[0]) for r in rows], relations_of(r[1:] for r in rows)

    def substring_page(self, query: str, after: int, since: str | None,
                       limit: int | None) -> tuple[list[int], list[Entity], bool]:
        found = substring_matches(self.graph, query, None if limit is None else limit + 1, after=after, since=since)
        page = found if limit is None else found[:limit]
        return [i for i, _ in page], [e for _, e in page], len(found) > len(page)

    def substring_among(self, query: str, ids: set[int], since: str | None) -> set[int]:
        return substring_among(self.graph, query, ids, since)

    def match_ids(self, query: str, mode: Mode) -> list[int]:
        return match_ids(self.graph, query, mode)

    def changed(self, ids: list[int], since: str) -> set[int]:
        return {int(row[0]) for row in self.graph._rows(
            "SELECT id FROM entities WHERE id = ANY(%s) AND updated_at >= %s::timestamptz", (ids, since))}

    def existing(self, ids: Iterable[int]) -> set[int]:
        return {int(row[0]) for row in self.graph._rows("SELECT id FROM entities WHERE id = ANY(%s)", (list(ids),))}

    def created_after(self, ids: Iterable[int], moment: str) -> set[int]:
        # identity columns never give an id twice: no id names another entity
        return set()

    def touching(self, names: list[str]) -> list[Relation]:
        return self.graph._relations_touching(names)

    def ids(self, names: set[str]) -> dict[str, int]:
        if not names:
            return {}
        return {decode(name): int(i) for name, i in self.graph._rows(
            "SELECT name, id FROM entities WHERE name_key = ANY(%s)", ([key(n) for n in names],))}

    def load_names(self, names: list[str]) -> list[Entity]:
        return self.graph._entities_named(names)

    def load_ids(self, ids: list[int], *, ordered: bool = False) -> list[Entity]:
        if not ids:
            return []
        if not ordered:
            return self.graph._entities_by("WHERE e.id = ANY(%s)", (ids,))
        heads = {int(row[0]): row for row in self.graph._rows(
            "SELECT id, name, entity_type FROM entities WHERE id = ANY(%s)", (ids,))}
        return self.graph._with_observations([heads[i] for i in ids if i in heads])
