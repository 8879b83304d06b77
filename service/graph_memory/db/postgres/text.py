"""Text as PostgreSQL stores it: NUL escaped reversibly, and the keys that make text unique.

PostgreSQL ``text`` cannot hold NUL (U+0000), which the reference server and the SQLite backend
store. Every text graph-memory writes to PostgreSQL goes through :func:`encode`: NUL becomes
U+10FFFF U+10FFFE, and U+10FFFF itself (a noncharacter, so practically never in real text)
becomes U+10FFFF U+10FFFF; :func:`decode` undoes it on the way out. Text without either
character (nearly all of it) is stored as it is. The escaping is a prefix-free code, so equality
and "starts with" on encoded text mean exactly what they mean on the text, and a substring of the
text is a substring of the encoded text (the search decides on encoded documents; only a needle
starting with U+10FFFF, U+10FFFE or NUL could match in the middle of an escape, and those
candidates are checked against the text itself, :func:`needs_check`).

Uniqueness (entity names, observations per entity, relation triples) is enforced on sha256
keys of the text (:func:`key`), since a B-tree entry cannot exceed about 2700 bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

ESCAPE = "\U0010ffff"
_NUL_CODE = "\U0010fffe"


def encode(text: str) -> str:
    """``text`` as stored in PostgreSQL (NUL and U+10FFFF escaped)."""
    if ESCAPE in text:
        text = text.replace(ESCAPE, ESCAPE + ESCAPE)
    if "\0" in text:
        text = text.replace("\0", ESCAPE + _NUL_CODE)
    return text


def decode(stored: str) -> str:
    """The text :func:`encode` stored as ``stored``."""
    if ESCAPE not in stored:
        return stored
    out: list[str] = []
    i = 0
    while True:
        j = stored.find(ESCAPE, i)
        if j < 0 or j + 1 >= len(stored):
            out.append(stored[i:])
            return "".join(out)
        out.append(stored[i:j])
        out.append("\0" if stored[j + 1] == _NUL_CODE else ESCAPE)
        i = j + 2


def needs_check(needle: str) -> bool:
    """Whether the encoded ``needle`` (text, not yet encoded) could match an encoded document in
    the middle of an escape, where the text itself does not contain it."""
    return bool(needle) and needle[0] in (ESCAPE, _NUL_CODE, "\0")


def key(text: str) -> bytes:
    """The sha256 key of ``text`` (its UTF-8 bytes)."""
    return hashlib.sha256(text.encode("utf-8")).digest()


def relation_key(source: str, target: str, relation_type: str) -> bytes:
    """The sha256 key of a relation's triple (each part length-prefixed, so no two triples share it)."""
    digest = hashlib.sha256()
    for part in (source, target, relation_type):
        data = part.encode("utf-8")
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.digest()


def document(observations: Iterable[str]) -> str:
    """The observations part of a search document, as the SQLite backend builds it
    (:data:`graph_memory.db.index.DOCUMENT`): each lower-cased with Python ``str.lower()``,
    joined by newlines in position order; then encoded."""
    return encode("\n".join(o.lower() for o in observations))
