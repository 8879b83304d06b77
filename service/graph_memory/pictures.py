"""The graph as a picture to paste or render: Mermaid flowcharts and Graphviz DOT.

Both writers take the entities to draw as ``(name, entity type or None)`` and the relations
among them; an endpoint of a relation that is not among the entities (a dangling relation kept
from a legacy file, or the edge of a neighbourhood) is drawn too, without a type. Nodes get
synthetic ids (``n0``, ``n1``, …) so that no stored string is ever an identifier of either
language: names, types and relation types only appear inside quoted labels, escaped for that
language, so any text (quotes, brackets, backslashes, newlines, ``<script>``, emoji) stays text
and the output stays well formed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, TextIO

from graph_memory.models import DEFAULT_WEIGHT, Relation

PictureFormat = Literal["mermaid", "dot"]
PICTURE_FORMATS: tuple[PictureFormat, ...] = ("mermaid", "dot")


def _ids(nodes: Sequence[tuple[str, str | None]], relations: Sequence[Relation]) -> dict[str, tuple[str, str | None]]:
    """``{name: (id, type)}`` for every node to draw, in order: the entities, then endpoints that
    are not entities."""
    out: dict[str, tuple[str, str | None]] = {}
    for name, kind in nodes:
        if name not in out:
            out[name] = (f"n{len(out)}", kind)
    for r in relations:
        for name in (r.source, r.target):
            if name not in out:
                out[name] = (f"n{len(out)}", None)
    return out


def _edge_label(r: Relation) -> str:
    return r.relation_type if r.weight == DEFAULT_WEIGHT else f"{r.relation_type} ({r.weight:g})"


def _node_label(name: str, kind: str | None) -> str:
    return name if kind is None else f"{name}\n[{kind}]"


# -- Mermaid ----------------------------------------------------------------------------------------

# Characters kept as they are inside a Mermaid quoted label; every other ASCII character is
# written as an entity code (``#34;``), which Mermaid turns into the character itself.
_MERMAID_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,:-_'/+=!?@%*~$^")


def mermaid_text(text: str) -> str:
    """``text`` for inside a Mermaid quoted label (``"…"``): line breaks become ``<br>``, other
    ASCII punctuation and control characters entity codes (``#34;`` for ``"``, ``#60;`` for
    ``<``), so the label can neither end early nor carry markup; other Unicode stays as it is."""
    out: list[str] = []
    for line_number, line in enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n")):
        if line_number:
            out.append("<br>")
        for ch in line:
            if ch in _MERMAID_SAFE or (ord(ch) > 0x7F and ch.isprintable()):
                out.append(ch)
            elif ch.isprintable() or ch == "\t":
                out.append(f"#{ord(ch)};")
            else:  # control characters: nothing a label can show
                out.append("#65533;")
    return "".join(out)


def write_mermaid(nodes: Sequence[tuple[str, str | None]], relations: Sequence[Relation], out: TextIO) -> None:
    """Write a Mermaid ``flowchart LR`` of ``nodes`` and ``relations`` to ``out``: one line per
    node (``n0["name<br>#91;type#93;"]``), then one per relation (``n0 -->|"works_at"| n1``; a
    weight other than 1 in brackets after the type)."""
    ids = _ids(nodes, relations)
    out.write("flowchart LR\n")
    for name, (node_id, kind) in ids.items():
        out.write(f'    {node_id}["{mermaid_text(_node_label(name, kind))}"]\n')
    for r in relations:
        out.write(f'    {ids[r.source][0]} -->|"{mermaid_text(_edge_label(r))}"| {ids[r.target][0]}\n')


# -- Graphviz DOT -----------------------------------------------------------------------------------


def dot_text(text: str) -> str:
    """``text`` as a DOT quoted string's content for a label: ``\\`` and ``"`` escaped, each line
    break written as ``\\n`` (a centred line break in Graphviz labels), other control characters
    replaced with U+FFFD (Graphviz cannot show them)."""
    out: list[str] = []
    for ch in text.replace("\r\n", "\n").replace("\r", "\n"):
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif not ch.isprintable() and ch != "\t":
            out.append("\ufffd")
        else:
            out.append(ch)
    return "".join(out)


def write_dot(nodes: Sequence[tuple[str, str | None]], relations: Sequence[Relation], out: TextIO) -> None:
    """Write a Graphviz ``digraph`` of ``nodes`` and ``relations`` to ``out`` (UTF-8 text):
    ``n0 [label="name\\n[type]"];`` per node, ``n0 -> n1 [label="works_at"];`` per relation
    (a weight other than 1 in brackets after the type)."""
    ids = _ids(nodes, relations)
    out.write('digraph memory {\n    charset="UTF-8";\n    rankdir=LR;\n'
              '    node [shape=box, style="rounded"];\n')
    for name, (node_id, kind) in ids.items():
        out.write(f'    {node_id} [label="{dot_text(_node_label(name, kind))}"];\n')
    for r in relations:
        out.write(f'    {ids[r.source][0]} -> {ids[r.target][0]} [label="{dot_text(_edge_label(r))}"];\n')
    out.write("}\n")


def write_picture(fmt: PictureFormat, nodes: Sequence[tuple[str, str | None]], relations: Iterable[Relation],
                  out: TextIO) -> None:
    """:func:`write_mermaid` or :func:`write_dot` by ``fmt``."""
    writer = write_mermaid if fmt == "mermaid" else write_dot
    writer(nodes, list(relations), out)
