"""One nesting limit for JSON input on every Python (issue 29: on 3.13 a value nested
5,000 deep parsed, and was reported "invalid value" instead of "bad JSON")."""

from __future__ import annotations

import pytest

from mongostore.tools.cli.output import MAX_JSON_DEPTH, loads_json


def nested(depth: int, open_: str = '{"a": ', close: str = "}") -> str:
    return open_ * depth + "1" + close * depth


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 700, 5000])
@pytest.mark.parametrize(("open_", "close"), [('{"a": ', "}"), ("[", "]")])
def test_json_nested_deeper_than_the_limit_is_refused_on_every_python(depth: int, open_: str, close: str) -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        loads_json(nested(depth, open_, close))


def test_json_at_the_limit_parses() -> None:
    value = loads_json(nested(MAX_JSON_DEPTH))
    for _ in range(MAX_JSON_DEPTH):
        value = value["a"]
    assert value == 1
    assert loads_json('{"a": "' + "{" * 5000 + '"}') == {"a": "{" * 5000}  # brackets in strings are text
