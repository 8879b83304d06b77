"""Paging cursors and ``since`` moments: the values the reading tools pass between calls.

A page stops at a :class:`ReadPosition` (read_graph) or :class:`SearchPosition` (search_nodes);
the caller gets it back as an opaque ``cursor`` string (:func:`encode_cursor`) and hands it to
the next call (:func:`decode_cursor`). Positions are keys on stable row ids, never offsets, so
rows committed before the first page are neither skipped nor repeated whatever is written
between pages.

A cursor is ``base64url(format byte, database tag (4 bytes), HMAC-SHA256 (16 bytes),
zlib(JSON body))``. The HMAC key is a secret made once per database (``cursor_secret``,
migrations/0006); the tag is a hash of it, so a cursor of another database is told apart from an
altered one. The body binds the tool and the arguments that select the rows (query, mode,
since): a cursor used with other arguments is refused rather than silently mixing two results.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import hashlib
import hmac
import json
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal

from graph_memory.errors import InvalidCursor, InvalidInput

CURSOR_FORMAT = 2   # the format byte; a cursor of another format is stale (2: search cursors carry what was sent)
_TAG = 4
_MAC = 16
_START_OVER = "call again without cursor to start from the first page"


@dataclass(frozen=True, slots=True)
class ReadPosition:
    """Where a read_graph page stopped: entities (rowid order) come first, then relations; the
    next page starts after ``last_id`` of ``phase``."""

    phase: Literal["entities", "relations"]
    last_id: int


@dataclass(frozen=True, slots=True)
class SearchPosition:
    """Where a search_nodes page stopped. ``substring`` pages in id order: the next page starts
    after entity id ``after``. The ranked modes rank again for each page and skip what was
    sent. ``matches`` and ``neighbors`` are the ids the earlier pages delivered as each: what a
    later page leaves out is decided by what was sent, not by what the graph holds now (a write
    between pages can make an entity match, or stop matching). ``promised``: far ends of
    relations already sent that were left for a later page as matches; one that no longer
    matches when its page comes is sent there as a neighbor. ``first``: the first page's moment
    (the database's clock, as ``created_at``). ``last``: the moment of the page that issued the
    cursor: an id of these sets whose entity was created after it names a new entity (SQLite
    gives a deleted newest entity's id to the next one), not the one that was sent."""

    after: int = 0
    matches: frozenset[int] = frozenset()
    neighbors: frozenset[int] = frozenset()
    promised: frozenset[int] = frozenset()
    first: str = ""
    last: str = ""


def binding(tool: str, *arguments: object) -> str:
    """A short digest of what a cursor belongs to: the tool and the arguments selecting rows."""
    text = json.dumps([tool, *arguments], ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def encode_cursor(secret: bytes, bound: str, position: ReadPosition | SearchPosition) -> str:
    """The opaque cursor for ``position`` of the request ``bound`` (:func:`binding`)."""
    if isinstance(position, ReadPosition):
        data: dict[str, Any] = {"b": bound, "p": position.phase[0], "i": position.last_id}
    else:
        data = {"b": bound, "a": position.after, "m": _deltas(sorted(position.matches)),
                "n": _deltas(sorted(position.neighbors)), "l": _deltas(sorted(position.promised)),
                "t": position.first, "u": position.last}
    body = zlib.compress(json.dumps(data, separators=(",", ":")).encode(), 9)
    mac = hmac.new(secret, body, hashlib.sha256).digest()[:_MAC]
    return base64.urlsafe_b64encode(bytes([CURSOR_FORMAT]) + _tag(secret) + mac + body).decode().rstrip("=")


def decode_cursor(secret: bytes, bound: str, cursor: str) -> ReadPosition | SearchPosition:
    """The position ``cursor`` holds, checked against this database's ``secret`` and the request.

    Raises:
        InvalidCursor: malformed, of another format version, of another database, altered, or
            issued for other arguments (each message says which, and what to do).
    """
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    except (binascii.Error, ValueError):
        raw = b""
    # The decoder forgives what no issued cursor holds (the unused bits of the last character,
    # "+" for "-", "=", newlines): only the exact spelling of its bytes is this server's (found
    # by QA: a cursor with its last character changed read as the same page).
    altered = bool(raw) and base64.urlsafe_b64encode(raw).decode().rstrip("=") != cursor
    if len(raw) < 1 + _TAG + _MAC + 1 or not 1 <= raw[0] <= CURSOR_FORMAT:
        raise InvalidCursor(f"cursor is not a cursor this server issued (pass a reply's nextCursor exactly "
                            f"as it was given); {_START_OVER}")
    if raw[0] != CURSOR_FORMAT:
        raise InvalidCursor(f"cursor comes from another version of the server and can no longer be read; "
                            f"{_START_OVER}")
    tag, mac, body = raw[1:1 + _TAG], raw[1 + _TAG:1 + _TAG + _MAC], raw[1 + _TAG + _MAC:]
    if not hmac.compare_digest(tag, _tag(secret)):
        raise InvalidCursor(f"cursor was issued by another memory database, not this one; {_START_OVER}")
    if altered or not hmac.compare_digest(mac, hmac.new(secret, body, hashlib.sha256).digest()[:_MAC]):
        raise InvalidCursor(f"cursor was altered (pass a reply's nextCursor exactly as it was given); "
                            f"{_START_OVER}")
    data = json.loads(zlib.decompress(body))
    if data["b"] != bound:
        raise InvalidCursor("cursor belongs to another request: repeat the arguments of the call that "
                            f"returned it (the same tool, query, mode and since), or {_START_OVER}")
    if "p" in data:
        return ReadPosition("entities" if data["p"] == "e" else "relations", int(data["i"]))
    # A ranked cursor of an earlier version also held the ranking still to come ("r"): every
    # page ranks again now, and what it sent ("m") is all a page needs.
    return SearchPosition(int(data["a"]), frozenset(_sums(data["m"])), frozenset(_sums(data["n"])),
                          frozenset(_sums(data["l"])), str(data["t"]), str(data.get("u", data["t"])))


def _deltas(ids: Iterable[int]) -> list[int]:
    """Each id minus the one before it (the first minus 0): small numbers, which compress well."""
    out, previous = [], 0
    for i in ids:
        out.append(i - previous)
        previous = i
    return out


def _sums(deltas: Iterable[Any]) -> list[int]:
    """The ids :func:`_deltas` gave the differences of."""
    out, total = [], 0
    for delta in deltas:
        total += int(delta)
        out.append(total)
    return out


def _tag(secret: bytes) -> bytes:
    return hashlib.sha256(b"graph-memory cursor tag\0" + secret).digest()[:_TAG]


# ISO 8601's 24:00 as a time of day (24, 24:00, 2400, 24:00:00.000, …), after the date's separator.
_HOUR_24 = r"[Tt ]24(?::?00)*(?:[.,]0+)?"


def _next_day_example(text: str) -> str:
    """`` (e.g. '2026-12-04T00:00+02:00')``: 00:00 of the day after the date that ``text`` (a
    24:00 time) starts with, its offset kept; nothing for dates that do not read as calendar dates
    (week or ordinal dates, 2026-02-30, the last day of year 9999)."""
    found = re.match(rf"(\d{{4}}-?\d{{2}}-?\d{{2}}){_HOUR_24}(.*)", text)
    try:
        day = date.fromisoformat(found.group(1)) + timedelta(days=1) if found else None
    except (ValueError, OverflowError):   # 2026-02-30, 9999-12-31
        day = None
    if day is None or found is None:
        return ""
    return f" (e.g. '{day.isoformat()}T00:00{found.group(2)}')"


# What a ``since`` may be, for its errors.
_SINCE_FORMS = ("give an ISO 8601 date or date-time, e.g. '2026-12-01', '2026-12', '2026-W48-2', "
                "'2026-12-01T09:30:00Z', '2026-12-01T09:30+01:00' (UTC when no offset)")
_LONGEST_MOMENT = 100
_QUOTED = 40


def _quoted(value: str) -> str:
    """``value`` as an error quotes it: its repr, cut after :data:`_QUOTED` characters of it (found
    by QA: a million-character since came back whole in its error)."""
    shown = repr(value)
    return shown if len(shown) <= _QUOTED + 2 else shown[:_QUOTED + 1] + "…"


def _reduced_date(text: str) -> datetime | None:
    """The first moment of the ISO 8601 reduced or ordinal date ``text`` (``2026``, ``2026-12``,
    ``2026-335``/``2026335``), which ``datetime.fromisoformat`` does not read; None for any
    other text. Raises: ValueError (no such month or day of the year)."""
    # [0-9], not \d: other scripts' digits are no ISO 8601 (and fromisoformat refuses them)
    if re.fullmatch(r"[0-9]{4}", text):
        return datetime(int(text), 1, 1)
    if found := re.fullmatch(r"([0-9]{4})-([0-9]{2})", text):
        return datetime(int(found.group(1)), int(found.group(2)), 1)
    if found := re.fullmatch(r"([0-9]{4})-?([0-9]{3})", text):
        year, day = int(found.group(1)), int(found.group(2))
        if not 1 <= day <= (366 if calendar.isleap(year) else 365):
            raise ValueError(f"day {day} of the year")
        return datetime(year, 1, 1) + timedelta(days=day - 1)
    return None


def parse_since(value: str) -> str:
    """``since`` as the database stores times (``2026-12-01T17:29:28.123Z``, UTC, milliseconds).

    Accepts ISO 8601 dates and date-times (``2026-12-01``, ``2026-12-01T09:30``,
    ``2026-12-01T09:30:00+02:00``, ``…Z``, week dates ``2026-W48-2``, ordinal dates
    ``2026-335``) and the reduced dates ``2026-12`` and ``2026`` (their first day); a time
    without an offset is UTC, a date alone its midnight UTC. Sub-millisecond digits are cut
    (times are stored to the millisecond).

    Raises:
        InvalidInput: not an ISO 8601 date or date-time (the value is quoted at most
            :data:`_QUOTED` characters long).
    """
    text = value.strip()
    if len(text) > _LONGEST_MOMENT:   # a moment's spelling is ~40 characters, more with long fractions
        raise InvalidInput(f"since: a value of {len(value):,} characters ({_quoted(value)}) is not a date or time; "
                           f"{_SINCE_FORMS}")
    if text[-1:] == "z":   # RFC 3339 allows a lower-case z, Python reads only "Z"
        text = text[:-1] + "Z"
    try:
        moment = _reduced_date(text) or datetime.fromisoformat(text)
    except ValueError:
        if re.search(rf"{_HOUR_24}(?:Z|[+-]|$)", text):
            # ISO 8601's end of a day: valid there, but one moment has one spelling here
            raise InvalidInput(f"since: {_quoted(value)} names midnight as 24:00, which is not accepted; give 00:00 "
                               f"of the next day{_next_day_example(text)}") from None
        raise InvalidInput(f"since: {_quoted(value)} is not a date or time this server reads; {_SINCE_FORMS}"
                           ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        in_utc = moment.astimezone(UTC)
    except OverflowError:   # e.g. 0001-01-01T00:00+01:00: before year 1 in UTC
        raise InvalidInput(f"since: {_quoted(value)} is out of range in UTC; give a moment from year 1 to 9999"
                           ) from None
    return in_utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")
