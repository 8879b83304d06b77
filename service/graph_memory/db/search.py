"""search_nodes: the three search modes over the FTS5 trigram index.

The search documents (``entity_search``, migration 0001) hold each entity's name, type and
observations lower-cased with Python ``str.lower()`` (observations joined with ``"\\n"``);
``entity_fts`` indexes them with the trigram tokenizer. Every mode lower-cases the caller's text
the same way, so case never matters and the rule is the reference server's.

``substring`` (default)
    The reference server's rule, exactly: ``query.lower()`` is a substring of the lower-cased name,
    type or one observation. Empty query matches everything. Entities in rowid order.
``words``
    Every whitespace-separated term (``str.split()``) is such a substring of some field (not
    necessarily the same one). Ranked by BM25 (name over type over observations), ties by rowid.
    A blank query matches everything, in rowid order, like an empty ``substring`` query.
``fts``
    SQLite FTS5 query syntax (phrases, ``prefix*``, ``AND``/``OR``/``NOT``, ``NEAR``, ``^``,
    column filters), parsed and checked by :mod:`apsw.fts5query` before it reaches SQLite; ranked
    like ``words``. Terms are lower-cased and must be 3+ characters (a trigram index cannot match
    shorter ones).

The index only narrows candidates: trigram matching is a superset of substring matching (the
tokenizer skips NUL and maps U+FFFE/U+FFFF to U+FFFD, on both sides), and every candidate is
checked against the rule itself with ``instr`` over the stored lower-cased documents, so the index
can make a search faster but never changes its result. Texts the index cannot answer (under 3
characters, or containing NUL) are found by scanning the documents.

Writes do not update the index themselves: they queue the changed documents (``search_pending``,
migration 0003) and the index catches up in batches (:mod:`graph_memory.db.index`; the server
does it before each search). A search that still finds documents waiting — another process holds
the write lock, the disk is full, or it was called inside a read transaction — searches the index
without them plus a temporary index of just those documents
(:func:`graph_memory.db.index.match_tables`), so every mode still finds every committed write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

import apsw

if TYPE_CHECKING:   # imported where an fts query is parsed: not on the start path (cold start)
    import apsw.fts5query as fq

from graph_memory.db import index
from graph_memory.db.graph import bind_members, fill_observations, load_entities, unique, with_neighborhood
from graph_memory.errors import InvalidQuery
from graph_memory.models import MODES, Entity, GraphSlice, Mode

MAX_QUERY_LENGTH = 2048
# The trigram index answers texts of at least this many characters (after lower-casing).
TRIGRAM = 3
# bm25() column weights for (name, entity_type, observations): a name hit outranks a type hit,
# which outranks an observation hit.
WEIGHTS = (10.0, 4.0, 1.0)


# Column names accepted in fts column filters (ASCII case-insensitive) -> index column.
FTS_COLUMNS = {
    "name": "name",
    "entitytype": "entity_type",
    "entity_type": "entity_type",
    "type": "entity_type",
    "observations": "observations",
    "observation": "observations",
}
_SQL_MAX = 2**63 - 1  # LIMIT is a signed 64-bit integer in SQLite
# Searches select entity heads with this, then read observations for all of them in one query.
_HEAD = "e.id, e.name, e.entity_type"
_Heads = list[tuple[int, str, str]]


def match_ids(conn: apsw.Connection, query: str, mode: Mode) -> list[int]:
    """The ids of every entity ``query`` matches in ``mode``, in the order :func:`search` returns
    them (rowid order for ``substring``, best first for the ranked modes): what paging
    (:mod:`graph_memory.db.pages`) cuts into pages.

    Raises:
        InvalidQuery: as :func:`search`.
    """
    if mode == "substring":
        check_query(query)
        needle = query.lower()
        if not needle:
            return [row[0] for row in conn.execute("SELECT id FROM entities ORDER BY id")]
        if not _storable(needle):
            return []
        if "\n" in needle:
            heads = _substring_heads(conn, needle, None, verify=False)
            return [h[0] for h, e in zip(heads, _entities(conn, heads), strict=True) if entity_matches(e, needle)]
        return [h[0] for h in _substring_heads(conn, needle, None, verify=True)]
    if mode == "words":
        check_query(query)
        if not query.split():
            return [row[0] for row in conn.execute("SELECT id FROM entities ORDER BY id")]
        return [h[0] for h in _words_heads(conn, query, None)]
    if mode == "fts":
        check_query(query)
        return [h[0] for h in _fts_heads(conn, query, None)]
    raise InvalidQuery(f"unknown search mode {mode!r}; use one of: {', '.join(MODES)}")


def search(conn: apsw.Connection, query: str, mode: Mode = "substring", limit: int | None = None, *,
           related: bool = True) -> GraphSlice:
    """Run ``search_nodes``: the matching entities (at most ``limit``), the relations with at least
    one endpoint among them (rowid order) and the neighbors those relations reach (with
    ``related=False`` the entities only: a page of results, whose cost does not grow with the
    relations of the entities found).

    Every committed write is found, whether or not the FTS index has caught up with it yet
    (:func:`graph_memory.db.index.match_tables`).

    Raises:
        InvalidQuery: query over 2048 characters, unknown mode, or (``fts``) malformed syntax.
    """
    if mode == "substring":
        return search_substring(conn, query, limit, related=related)
    if mode == "words":
        return search_words(conn, query, limit, related=related)
    if mode == "fts":
        return search_fts(conn, query, limit, related=related)
    raise InvalidQuery(f"unknown search mode {mode!r}; use one of: {', '.join(MODES)}")


# -- substring ------------------------------------------------------------------------------------


def search_substring(conn: apsw.Connection, query: str, limit: int | None = None, *,
                     related: bool = True) -> GraphSlice:
    """Upstream's search, exactly: an entity matches when ``query.lower()`` is a substring of
    ``name.lower()``, ``entityType.lower()`` or any ``observation.lower()`` (Python
    ``str.lower()``, the reference server's rule; not casefold). Empty query matches everything.

    Candidates come from the trigram index for texts of 3+ characters (:func:`trigram_cover`), from
    a scan of the search documents otherwise; each is checked against the rule with ``instr`` on
    the stored documents. A query containing a newline (the separator between observations in the
    document) is checked observation by observation in Python (:func:`entity_matches`). A query
    holding a lone surrogate matches nothing (stored text is UTF-8 and cannot contain one).

    Returns:
        Matching entities in rowid order (the first ``limit`` when given), the relations with at
        least one endpoint among them, and their neighbors.

    Raises:
        InvalidQuery: query longer than 2048 characters.
    """
    check_query(query)
    needle = query.lower()
    if not needle:
        return _result(conn, _all_entities(conn, limit), related)
    if not _storable(needle):  # stored text never holds a lone surrogate: nothing can contain this
        return GraphSlice([], [])
    if "\n" in needle:
        candidates = _entities(conn, _substring_heads(conn, needle, None, verify=False))
        matched = [e for e in candidates if entity_matches(e, needle)]
        return _result(conn, matched if limit is None else matched[:limit], related)
    return _result(conn, _entities(conn, _substring_heads(conn, needle, limit, verify=True)), related)


def substring_ids(conn: apsw.Connection, query: str, *, after: int = 0, limit: int | None = None,
                  since: str | None = None) -> list[int]:
    """Ids (rowid order) of the entities ``query`` matches in ``substring`` mode with an id over
    ``after`` (and ``updated_at`` at or after ``since``), at most ``limit``: one page's worth,
    without finding every match (pages: :mod:`graph_memory.db.pages`).

    Raises:
        InvalidQuery: query longer than 2048 characters.
    """
    check_query(query)
    needle = query.lower()
    params: dict[str, apsw.SQLiteValue] = {"after": after, "since": since}
    extra = " AND e.id > :after" + (" AND e.updated_at >= :since" if since is not None else "")
    if not needle:
        return [row[0] for row in conn.execute(f"SELECT e.id FROM entities e WHERE 1{extra} ORDER BY e.id "
                                               f"{_limit(limit)}", params)]
    if not _storable(needle):
        return []
    if "\n" in needle:
        heads = _substring_heads(conn, needle, None, verify=False, extra=extra, extra_params=params)
        found = [h[0] for h, e in zip(heads, _entities(conn, heads), strict=True) if entity_matches(e, needle)]
        return found if limit is None else found[:limit]
    return [h[0] for h in _substring_heads(conn, needle, limit, verify=True, extra=extra, extra_params=params)]


def substring_among(conn: apsw.Connection, query: str, ids: set[int], since: str | None = None) -> set[int]:
    """Which of the entities ``ids`` ``query`` matches in ``substring`` mode (and changed at or
    after ``since``): checked on their current search documents, without the index."""
    needle = query.lower()
    if not ids or not _storable(needle):
        return set()
    members, params = bind_members(list(ids))
    changed = " AND e.updated_at >= ?" if since is not None else ""
    extra = (since,) if since is not None else ()
    if not needle:
        return {row[0] for row in conn.execute(f"SELECT e.id FROM entities e WHERE e.id IN {members}{changed}",
                                               params + extra)}
    if "\n" in needle:
        heads = _fetch_rows(conn, f"SELECT {_HEAD} FROM entities e WHERE e.id IN {members}{changed}",
                            params + extra)
        return {h[0] for h, e in zip(heads, _entities(conn, heads), strict=True) if entity_matches(e, needle)}
    check = "(instr(s.name, ?) OR instr(s.entity_type, ?) OR instr(s.observations, ?))"
    return {row[0] for row in conn.execute(
        f"SELECT e.id FROM entity_search s JOIN entities e ON e.id = s.entity_id "
        f"WHERE e.id IN {members}{changed} AND {check}", params + extra + (needle, needle, needle))}


def _substring_heads(conn: apsw.Connection, needle: str, limit: int | None, *, verify: bool, extra: str = "",
                     extra_params: Mapping[str, apsw.SQLiteValue] | None = None) -> _Heads:
    """``(id, name, type)`` in rowid order of the entities whose documents contain ``needle``;
    with ``verify=False`` the index's candidates unchecked (a superset). ``extra`` adds
    conditions on ``e`` (``" AND …"``) with their ``extra_params``."""
    check = "(instr(s.name, :n) OR instr(s.entity_type, :n) OR instr(s.observations, :n))"
    params = {"n": needle, **(extra_params or {})}
    if not _indexable(needle):
        return _fetch(conn, f"SELECT {_HEAD} FROM entity_search s JOIN entities e ON e.id = s.entity_id "
                            f"WHERE {check}{extra} ORDER BY s.entity_id {_limit(limit)}", params)
    params["m"] = trigram_cover(needle)
    heads: _Heads = []
    indexes = index.match_tables(conn)
    for table, current in indexes:
        heads += _fetch(conn, f"SELECT {_HEAD} FROM {table} f JOIN entity_search s ON s.entity_id = f.rowid "
                              f"JOIN entities e ON e.id = f.rowid WHERE {table} MATCH :m{current} "
                              f"{'AND ' + check if verify else ''}{extra} ORDER BY f.rowid {_limit(limit)}",
                        params)
    if len(indexes) > 1:  # two lists, each in rowid order
        heads.sort()
    return heads if limit is None else heads[:limit]


def _result(conn: apsw.Connection, entities: list[Entity], related: bool) -> GraphSlice:
    """The entities found, with their relations and neighbors when ``related``."""
    return with_neighborhood(conn, entities) if related else GraphSlice(entities, [])


def trigram_cover(needle: str) -> str:
    """An FTS5 query that every document containing ``needle`` (3+ characters, no NUL) matches:
    the needle's non-overlapping trigrams, plus its last one, AND'ed (``"har" AND "psi" AND "cho"
    AND "ord"``). Cheaper for FTS5 than the whole needle as one phrase (fewer doclists, no position
    checks) and, since candidates are checked against the rule anyway, just as exact."""
    starts = dict.fromkeys([*range(0, len(needle) - TRIGRAM + 1, TRIGRAM), len(needle) - TRIGRAM])
    return " AND ".join(fts_phrase(needle[i:i + TRIGRAM]) for i in starts)


def entity_matches(entity: Entity, needle: str) -> bool:
    """Upstream's match rule for an already lower-cased ``needle``."""
    return (
        needle in entity.name.lower()
        or needle in entity.entity_type.lower()
        or any(needle in o.lower() for o in entity.observations)
    )


# -- words ----------------------------------------------------------------------------------------


def search_words(conn: apsw.Connection, query: str, limit: int | None = None, *,
                 related: bool = True) -> GraphSlice:
    """Every whitespace-separated term of ``query`` (``str.split()``, each lower-cased with
    ``str.lower()``) must be a substring of the entity's lower-cased name, type or one of its
    observations — not necessarily the same field for every term.

    Ranking: terms of 3+ characters go to the index as AND'ed phrases and the entities are ordered
    by BM25 with column weights name 10, type 4, observations 1 (ties by rowid); shorter terms
    only filter (checked with ``instr``). When every term is shorter than 3 characters the index
    cannot rank, and entities are ordered by a weighted count of the fields each term hits (same
    weights), ties by rowid. A blank query matches every entity, in rowid order (as an empty
    ``substring`` query does).

    Raises:
        InvalidQuery: query longer than 2048 characters.
    """
    check_query(query)
    if not query.split():
        return _result(conn, _all_entities(conn, limit), related)
    return _result(conn, _entities(conn, _words_heads(conn, query, limit)), related)


def _words_heads(conn: apsw.Connection, query: str, limit: int | None) -> _Heads:
    """The heads :func:`search_words` returns for a query with at least one term, in its order."""
    terms = unique(t.lower() for t in query.split())
    if not all(_storable(t) for t in terms):  # a term no stored text can contain (lone surrogate)
        return []
    params: dict[str, apsw.SQLiteValue] = {f"t{i}": t for i, t in enumerate(terms)}
    checks = " AND ".join(
        f"(instr(s.name, :t{i}) OR instr(s.entity_type, :t{i}) OR instr(s.observations, :t{i}))"
        for i in range(len(terms)))
    indexed = [t for t in terms if _indexable(t)]
    if indexed:
        params["m"] = " AND ".join(fts_phrase(t) for t in indexed)
        heads = _ranked(conn, "FROM {t} f JOIN entity_search s ON s.entity_id = f.rowid JOIN entities e "
                              f"ON e.id = f.rowid WHERE {{t}} MATCH :m{{current}} AND {checks}", params, limit)
    else:
        name_w, type_w, obs_w = WEIGHTS
        score = " + ".join(
            f"{name_w} * (instr(s.name, :t{i}) > 0) + {type_w} * (instr(s.entity_type, :t{i}) > 0) "
            f"+ {obs_w} * (instr(s.observations, :t{i}) > 0)" for i in range(len(terms)))
        heads = _fetch(conn, f"SELECT {_HEAD} FROM entity_search s JOIN entities e ON e.id = s.entity_id "
                             f"WHERE {checks} ORDER BY {score} DESC, s.entity_id {_limit(limit)}", params)
    return heads


# -- fts ------------------------------------------------------------------------------------------


def search_fts(conn: apsw.Connection, query: str, limit: int | None = None, *,
               related: bool = True) -> GraphSlice:
    """Raw FTS5 query syntax over the index: ``"exact phrase"``, ``prefix*``, ``AND`` / ``OR`` /
    ``NOT`` (upper case), implicit AND between terms, ``NEAR(a b, 10)``, ``^start``, and column
    filters ``name:``, ``entityType:`` (also ``entity_type:``, ``type:``) and ``observations:``
    (also ``observation:``), case-insensitive, with ``-col:`` / ``{a b}:`` forms.

    Each term is lower-cased with ``str.lower()`` (the documents are lower-cased), so matching
    ignores case. The index is trigram: a term matches wherever it occurs as a substring (so
    ``prefix*`` is simply a substring too), and terms under 3 characters cannot be matched at all —
    they are refused with an error that points to ``words`` mode. Distances in ``NEAR`` count
    characters, not words, and ``^`` anchors at the start of the name, the type or the first
    observation (an entity's observations are one column). Ranked by BM25 like ``words``.

    Raises:
        InvalidQuery: query longer than 2048 characters, empty, or malformed (the message says
            what is wrong and where; SQLite's own messages never reach the caller).
    """
    check_query(query)
    return _result(conn, _entities(conn, _fts_heads(conn, query, limit)), related)


def _fts_heads(conn: apsw.Connection, query: str, limit: int | None) -> _Heads:
    """The heads :func:`search_fts` returns, in its order (raises as it does)."""
    match = compile_fts(query)
    try:
        heads = _ranked(conn, "FROM {t} f JOIN entities e ON e.id = f.rowid WHERE {t} MATCH :m{current}",
                        {"m": match}, limit)
    except apsw.SQLError:
        # compile_fts accepts only what FTS5 accepts; this is a safety net, never a raw message.
        raise InvalidQuery(f"the fts query {_excerpt(query)} could not be run by the search index; "
                           f"simplify it or use mode 'words'") from None
    return heads


def compile_fts(query: str) -> str:
    """Check an ``fts``-mode query and return the FTS5 MATCH text to run: terms lower-cased,
    column names mapped to the index's columns.

    Raises:
        InvalidQuery: empty, unparsable, a column filter on an unknown column, a term shorter than
            3 characters, or a NUL character.
    """
    import apsw.fts5query as fq

    return fq.to_query_string(parse_fts(query))


def parse_fts(query: str) -> fq.QUERY:
    """The parsed ``fts``-mode query, checked, with terms lower-cased and column names mapped to
    the index's columns (:func:`compile_fts`; the PostgreSQL backend translates this tree).

    Raises:
        InvalidQuery: as :func:`compile_fts`.
    """
    import apsw.fts5query as fq

    if not query.strip():
        raise InvalidQuery("the fts query is empty; give at least one term of 3+ characters "
                           "(or use mode 'substring' with an empty query to list every entity)")
    try:
        parsed = fq.parse_query_string(query)
    except fq.ParseError as exc:
        raise InvalidQuery(_describe_parse_error(query, exc.message, exc.position)) from None
    except Exception:  # the parser's own faults (e.g. NEAR distance "²") are syntax errors too
        raise InvalidQuery(f"the fts query {_excerpt(query)} is not valid FTS5 syntax; {_SYNTAX_HELP}") from None
    for _, node in fq.walk(parsed):
        if isinstance(node, fq.COLUMNFILTER):
            node.columns = [_fts_column(c) for c in node.columns]
        elif isinstance(node, fq.PHRASE):
            segment: fq.PHRASE | None = node
            while segment is not None:
                segment.phrase = _fts_term(segment.phrase)
                segment = segment.plus
    return parsed


_SYNTAX_HELP = (
    'fts syntax: terms or "quoted phrases" (quote text with punctuation), prefix*, AND / OR / NOT '
    "in upper case, NEAR(a b, 10), column filters name:, entityType:, observations:. "
    "Use mode 'words' for plain keywords."
)

_PARSE_MESSAGES = {
    "No query provided": "the query is empty",
    "No ending double quote": "a double quote is never closed",
    "Unexpected": "unexpected text",
    "unclosed (": "a '(' is never closed",
    "Expected a search term": "expected a search term",
    "Expected phrase": "NEAR(...) needs at least one term",
    "Expected number": "the NEAR distance must be a plain number",
    "Expected )": "expected ')'",
    "Expected }": "expected '}' to close the column list",
    "Expected :": "a column filter ('-' or a column name) must be followed by ':'; to search for text "
                  "with punctuation such as foo-bar, put it in double quotes (\"foo-bar\")",
    "Expected column name": "expected a column name (name, entityType or observations)",
}


def _describe_parse_error(query: str, message: str, position: int) -> str:
    if message.startswith("Invalid query character"):
        what = (f"the character {query[position]!r} is not FTS5 syntax outside double quotes"
                if 0 <= position < len(query) else "a character is not FTS5 syntax")
    else:
        what = _PARSE_MESSAGES.get(message.split(" to close", 1)[0], message[:1].lower() + message[1:])
    where = (f"at position {position} ({query[position:position + 20]!r})" if 0 <= position < len(query)
             else "at the end of the query")
    return f"invalid fts query: {what} {where}. {_SYNTAX_HELP}"


def _excerpt(text: str, size: int = 60) -> str:
    return repr(text if len(text) <= size else text[:size] + "…")


def _fts_column(column: str) -> str:
    mapped = FTS_COLUMNS.get(column.lower()) if column.isascii() else None
    if mapped is None:
        raise InvalidQuery(f"invalid fts query: unknown column {column!r} in a column filter; "
                           f"the columns are name, entityType and observations")
    return mapped


def _fts_term(phrase: str | fq.QueryTokens) -> str:
    import apsw.fts5query as fq

    text = phrase.encode() if isinstance(phrase, fq.QueryTokens) else phrase
    term = text.lower()
    if not _storable(term):
        raise InvalidQuery(f"invalid fts query: the term {text!r} contains an unpaired surrogate "
                           f"(\\ud800–\\udfff), which is not valid Unicode text")
    if "\0" in term:
        raise InvalidQuery("invalid fts query: a term contains a NUL character, which the search "
                           "index cannot match; use mode 'substring'")
    if len(term) < TRIGRAM:
        raise InvalidQuery(f"invalid fts query: the term {text!r} is shorter than {TRIGRAM} characters, "
                           f"and the trigram index matches only runs of {TRIGRAM} or more; lengthen it, "
                           f"or use mode 'words', which handles short words")
    return term


# -- shared ---------------------------------------------------------------------------------------


def fts_phrase(text: str) -> str:
    """``text`` as one FTS5 phrase (double quotes doubled), so no character is FTS syntax."""
    return '"' + text.replace('"', '""') + '"'


def check_query(query: str) -> None:
    """Raises InvalidQuery for a query over 2048 characters."""
    if len(query) > MAX_QUERY_LENGTH:
        raise InvalidQuery(
            f"query is {len(query)} characters long; the limit is {MAX_QUERY_LENGTH}. "
            f"Search for a shorter distinctive part of it."
        )


def _indexable(text: str) -> bool:
    """Whether the trigram index can find ``text``: 3+ characters and no NUL (the tokenizer skips
    NUL in documents, and an FTS5 query string ends at one)."""
    return len(text) >= TRIGRAM and "\0" not in text


def _storable(text: str) -> bool:
    """Whether ``text`` can be stored at all: SQLite text is UTF-8, so it never holds a lone
    surrogate, and a query containing one can match nothing."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _sql_limit(limit: int | None) -> int:
    return -1 if limit is None else min(limit, _SQL_MAX)


def _limit(limit: int | None) -> str:
    """``LIMIT n`` for a statement, or nothing. A literal, not a parameter: a bound LIMIT makes
    SQLite about 10 µs slower on the FTS5 join of a point search (issue 6); ``int()`` keeps
    anything but a number out of the SQL."""
    return "" if limit is None else f"LIMIT {_sql_limit(int(limit))}"


def _ranked(conn: apsw.Connection, source: str, params: Mapping[str, apsw.SQLiteValue], limit: int | None) -> _Heads:
    """Heads from ``source`` (``FROM {t} f … WHERE {t} MATCH …{current} …``, filled in from
    :func:`graph_memory.db.index.match_tables`) ordered by BM25, ties by rowid.

    A lone match needs no ranking, and BM25's IDF part reads every match of every term (costly for
    common terms), so a probe for two matches in rowid order runs first and answers that case.

    While documents wait for the index, the entities matching among them come first, ranked
    against each other, then the rest in BM25 order: their BM25 scores cannot be compared with the
    index's (a small index of documents that nearly all match gives every term a near-zero weight,
    so merged by score they would always come last and a ``limit`` would cut the latest writes).
    Which entities match is exact either way; only this order waits for the index to catch up.
    """
    indexes = index.match_tables(conn)
    if len(indexes) == 1:
        sql = source.format(t=indexes[0][0], current=indexes[0][1])
        probe = _fetch(conn, f"SELECT {_HEAD} {sql} ORDER BY f.rowid LIMIT 2", params)
        if len(probe) < 2:
            return probe
        return _fetch(conn, f"SELECT {_HEAD} {sql} ORDER BY {_bm25(indexes[0][0])}, f.rowid {_limit(limit)}",
                      params)
    heads: _Heads = []
    for table, current in sorted(indexes, key=lambda table: table != index.BACKLOG):  # the backlog first
        sql = source.format(t=table, current=current)
        heads += _fetch(conn, f"SELECT {_HEAD} {sql} ORDER BY {_bm25(table)}, f.rowid {_limit(limit)}", params)
    return heads if limit is None else heads[:limit]


def _bm25(table: str) -> str:
    return "bm25({}, {}, {}, {})".format(table, *WEIGHTS)


def _fetch(conn: apsw.Connection, sql: str, params: Mapping[str, apsw.SQLiteValue]) -> _Heads:
    return cast(_Heads, conn.execute(sql, params).fetchall())


def _fetch_rows(conn: apsw.Connection, sql: str, params: tuple[apsw.SQLiteValue, ...]) -> _Heads:
    return cast(_Heads, conn.execute(sql, params).fetchall())


def _all_entities(conn: apsw.Connection, limit: int | None) -> list[Entity]:
    if limit is None:
        return load_entities(conn)
    return load_entities(conn, "WHERE e.id IN (SELECT id FROM entities ORDER BY id LIMIT ?)",
                          (_sql_limit(limit),))


def _entities(conn: apsw.Connection, heads: _Heads) -> list[Entity]:
    """Entities for ``(id, name, type)`` rows, in their order, with their observations (in
    insertion order) read in one query."""
    by_id = {entity_id: Entity(name, entity_type, []) for entity_id, name, entity_type in heads}
    fill_observations(conn, by_id)
    return list(by_id.values())
