"""Counts in words for messages people read: ``1 relation``, ``2 relations``, ``0 entities``."""

from __future__ import annotations

__all__ = ["excerpt", "json_type", "plural"]


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """``count`` and the noun in the form that agrees with it: ``plural(1, "entity")`` is
    ``"1 entity"``, ``plural(3, "entity")`` is ``"3 entities"``.

    Args:
        count: how many (only 1 takes the singular; 0 and negative counts take the plural).
        singular: the noun, or a noun phrase whose last word is the noun (``"duplicate entity line"``).
        plural_form: the plural when the regular rules do not give it (``"people"``); by default
            ``-y`` after a consonant becomes ``-ies``, ``-s``, ``-x``, ``-ch``, ``-sh`` take ``-es``,
            anything else ``-s``.
    """
    if count == 1:
        return f"{count} {singular}"
    return f"{count} {plural_form or _regular_plural(singular)}"


def _regular_plural(word: str) -> str:
    if word.endswith("y") and word[-2:-1] not in ("", "a", "e", "i", "o", "u"):
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    return word + "s"


def json_type(value: object) -> str:
    """The JSON name of a decoded value's type, for messages: ``null``, ``boolean``, ``number``,
    ``string``, ``array`` or ``object``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    return "object"


def excerpt(text: str, limit: int = 40) -> str:
    """``text`` for a message, cut after ``limit`` characters with an ellipsis (``…``) when longer:
    an input echoed in an error stays short whatever its size."""
    return text if len(text) <= limit else text[:limit] + "…"
