"""Reading a legacy JSONL file line by line gives exactly what reading it whole gave."""

from __future__ import annotations

import pytest

from graph_memory.legacy import _first_utf8_error, _lines_not_utf8, parse_legacy

SAMPLES = [
    b"abc\n\xe2\x82\xac\n\xe2A\nxyz",        # a lead byte followed by a newline-free non-continuation
    b"\xef\xbb\xbf{}\n\xff\n",                # BOM, then a byte that is never UTF-8
    b"ok\n" * 10 + b"\xe2\x82\n",             # a sequence cut by a newline
    b"\xf0\x9f\x98\x80 fine\n" * 5,           # valid: no error
]


@pytest.mark.parametrize("data", SAMPLES)
@pytest.mark.parametrize("piece", [1, 3, 7, 1 << 20])
def test_utf8_is_checked_in_pieces_with_the_errors_of_one_decode(data: bytes, piece: int) -> None:
    try:
        data.decode("utf-8")
        expected = None
    except UnicodeDecodeError as exc:
        expected = (exc.start, exc.end, exc.reason)
    found = _first_utf8_error(data, piece)
    assert (found and (found.start, found.end, found.reason)) == expected


@pytest.mark.parametrize("data", SAMPLES)
def test_the_lines_listed_as_not_utf8_are_those_that_do_not_decode(data: bytes) -> None:
    expected = []
    for number, line in enumerate(data.split(b"\n"), 1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            expected.append(number)
    assert _lines_not_utf8(data) == expected


def test_a_first_line_that_looks_like_a_document_is_still_a_jsonl_line() -> None:
    data = b'{"entities": [], "relations": []}\n{"type":"entity","name":"A","entityType":"p","observations":["x"]}\n'
    graph = parse_legacy(data)
    assert [e.name for e in graph.entities] == ["A"] and graph.lines == 2 and graph.skipped_lines[0].line == 1


def test_invalid_utf8_late_in_a_jsonl_file_names_its_line() -> None:
    good = b'{"type":"entity","name":"A","entityType":"p","observations":[]}\n'
    data = good * 3 + b'{"type":"entity","name":"\xff","entityType":"p","observations":[]}\n' + good
    for skip_invalid in (False, True):
        graph = parse_legacy(data, skip_invalid=skip_invalid)
        assert graph.replaced_utf8_lines == [4] and graph.invalid_lines == []
        assert graph.lines == 5 and [e.name for e in graph.entities] == ["A", "\ufffd"]
