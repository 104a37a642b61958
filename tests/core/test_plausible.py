"""core.plausible: which numbers from outside can be true, and the words for those that cannot."""

from __future__ import annotations

import math

import pytest

from core.plausible import (
    MAX_TOKENS_PER_S,
    PROMPT_TEMPLATE_TOKENS,
    amount,
    count,
    in_range,
    input_tokens_problem,
    output_tokens_problem,
    shown,
    summary_problems,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3, 3),
        (0, 0),
        (3.0, 3),
        (-1, None),
        (2.5, None),
        (math.inf, None),
        (math.nan, None),
        (True, None),
        ("3", None),
        (None, None),
        (10**400, 10**400),
    ],
)
def test_count_is_a_whole_finite_non_negative_number(value: object, expected: int | None) -> None:
    assert count(value) == expected


def test_amounts_and_ranges_refuse_what_no_measurement_gives() -> None:
    assert amount(0.5) == 0.5 and amount(-0.1) is None and amount(math.inf) is None
    assert amount(10**400) is None  # an int past a float is no amount
    assert in_range(1e308, 0, 86_400) is None and in_range(20, 0, 86_400) == 20.0


def test_shown_quotes_what_was_seen_in_one_short_line() -> None:
    assert shown(1e9) == "1,000,000,000" and shown(-5) == "-5" and shown(2.5) == "2.5"
    assert shown(1e308) == "1e+308" and shown(math.inf) == "inf" and shown(math.nan) == "nan"
    assert shown(10**5000).startswith("about 2^") and len(shown("x" * 10_000)) <= 300


def test_output_tokens_are_bounded_by_max_tokens_not_by_chunks() -> None:
    words = output_tokens_problem(1e9, 3, 3)
    assert words == (
        "server's usage says 1,000,000,000 output tokens for a stream of 3 chunks; "
        "3 were asked for (max_tokens)"
    )
    assert output_tokens_problem(64, 1, 64) is None  # merged deltas: one chunk, all tokens
    assert output_tokens_problem(-1, 3, None) is not None
    assert output_tokens_problem(10**6, 3, None) is None  # nothing asked: no upper bound


def test_input_tokens_are_bounded_by_the_request_bytes_and_a_template() -> None:
    assert input_tokens_problem(None, 100) is None
    assert input_tokens_problem(100 + PROMPT_TEMPLATE_TOKENS, 100) is None
    assert "for a request of 100 bytes" in str(
        input_tokens_problem(101 + PROMPT_TEMPLATE_TOKENS, 100)
    )
    assert "-5 input tokens" in str(input_tokens_problem(-5, 100))


def test_summary_numbers_that_cannot_be_true_are_named() -> None:
    summary = {
        "completed": 8,
        "total_input_tokens": -40,
        "output_throughput": 581_142_450_502.0,
        "duration": math.inf,
        "mean_ttft_ms": 5.0,
    }
    problems = summary_problems(summary)
    assert problems == [
        "duration = inf",
        "total_input_tokens = -40",
        f"output_throughput = 581,142,450,502 tok/s, over {MAX_TOKENS_PER_S:,.0f}",
    ]
    assert summary_problems({"completed": 8, "output_throughput": 5000.0}) == []
