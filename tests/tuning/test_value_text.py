"""Issue 41 cases 5 and 12 (a comma inside one text value): a value's text is exact both ways.

Floats reached vLLM with 6 significant digits (`format_value` used `:g`): 0.9000001 and 0.9000002
both launched as 0.9 and 1234567.5 as 1.23457e+06. A `--values` list was split on every comma, so
one text value holding a comma (`AWS_,HF_`) became two runs; double quotes now keep it whole.
"""

from __future__ import annotations

import sys

import pytest

from tuning.engine.value_text import Item, format_value, join_values, split_values, value_items

HARD_FLOATS = [
    0.9000001,
    0.9000002,
    1234567.5,
    1234567.0,
    0.1,
    1 / 3,
    1e-7,
    123456.7,
    2.0**53 + 2,
    1e22,
    5e-324,
    sys.float_info.max,
    -0.5,
]


@pytest.mark.parametrize("value", HARD_FLOATS, ids=repr)
def test_a_float_reads_back_as_the_same_number(value: float) -> None:
    text = format_value(value)
    assert float(text) == value, text


def test_close_floats_never_share_a_text() -> None:
    assert format_value(0.9000001) == "0.9000001"
    assert format_value(0.9000002) == "0.9000002"
    assert format_value(1234567.5) == "1234567.5"  # was 1.23457e+06
    texts = {format_value(v) for v in HARD_FLOATS}
    assert len(texts) == len(HARD_FLOATS)


def test_texts_that_were_exact_stay_as_they_were_stored() -> None:
    """Runs stored before keep matching their values (resume, reuse, labels): where `:g` was
    exact its text is kept."""
    for value in (0.9, 0.5, 1.0, 10.0, 1e-5, 1e6, 0.92, 2.5):
        assert format_value(value) == f"{value:g}"
    assert format_value(True) == "true" and format_value(16) == "16"
    assert format_value('{"mode":3}') == '{"mode":3}'


def test_the_value_list_syntax() -> None:
    assert split_values("2, 16") == ["2", "16"]
    assert split_values("2,,16,") == ["2", "16"]
    assert split_values(" , ") == []
    assert split_values('{"a": 1, "b": 2},{}') == ['{"a": 1, "b": 2}', "{}"]
    # list-valued flags (issue 40 item 5) keep their commas
    assert split_values("[1,2,4,8],[1,2,4,8,16,32]") == ["[1,2,4,8]", "[1,2,4,8,16,32]"]
    # a value that holds a comma, in double quotes (JSON text: \" and \\ inside)
    assert value_items('"AWS_,HF_",OTHER_') == [Item("AWS_,HF_", True), Item("OTHER_")]
    assert split_values('"AWS_,HF_"') == ["AWS_,HF_"]
    assert split_values(' "a,b" , "c" ') == ["a,b", "c"]
    assert split_values('"say \\"hi\\",x"') == ['say "hi",x']
    # a malformed JSON list stays one item: the parameter's check names the JSON error
    assert split_values('{"mode": 3,}') == ['{"mode": 3,}']


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('"AWS_,HF_', "not closed"),
        ('AWS_,"HF_', "not closed"),
        ('"AWS_"x,HF_', "without a comma"),
    ],
)
def test_a_broken_quote_is_refused_saying_how_to_quote(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why) as err:
        value_items(text)
    assert '"AWS_,HF_"' in str(err.value) and "\n" not in str(err.value)


def test_a_joined_list_splits_back_into_the_same_values() -> None:
    values = ["AWS_,HF_", "OTHER_", '{"a":1,"b":2}', '"quoted"', 0.9000001, 16]
    joined = join_values(values)
    assert split_values(joined) == [format_value(v) for v in values]
    assert join_values([2, 16]) == "2,16"  # nothing to quote: as it always was
