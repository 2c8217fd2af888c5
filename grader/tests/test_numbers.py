"""Numbers in failure messages (issue 34): two numbers that differ print differently, and a result right to
float32's precision is told the precision and the contract, never a mistake of the formula."""

from __future__ import annotations

import numpy as np
import pytest

from tests import failures, feedback
from tests.feedback import differing_numbers, expect_close


@pytest.fixture
def messages(monkeypatch) -> list[str]:
    """The messages the checks of ``tests.feedback`` give pytest-check (which is kept from failing this test)."""
    seen: list[str] = []
    monkeypatch.setattr(failures.check, "fail", seen.append)
    return seen


@pytest.mark.parametrize(("observed", "expected"), [
    (np.float32(0.046415888), 0.046415888336127795),  # a float32 sinusoidal frequency against float64's
    (1.0 + 2.0 ** -52, 1.0),
    (0.0626509, 0.062651),
    (0.017593912, 0.017593945),
])
def test_two_numbers_that_differ_print_differently(observed, expected):
    text = differing_numbers(observed, expected)
    shown, rest = text.split(" instead of ")
    assert shown != rest.split(" (")[0], text
    assert float(shown) == pytest.approx(float(observed), rel=1e-5), text  # rounded, never another number
    error = abs(float(observed) - expected)
    assert f"off by {error:.2g}" in text and f"relative {error / abs(expected):.2g}" in text, text


def test_the_digits_are_as_few_as_show_the_difference():
    assert differing_numbers(0.5, 0.25) == "0.50 instead of 0.25 (off by 0.25, relative 1)"
    assert differing_numbers(3, 4) == "3 instead of 4 (off by 1, relative 0.25)"
    assert differing_numbers(0.0626509, 0.062651).startswith("0.0626509 instead of 0.0626510 ")


def test_the_dtypes_are_named_when_they_differ():
    text = differing_numbers(np.float32(0.1), np.float64(0.1))
    assert text.endswith("; yours is float32, the expected float64)"), text
    assert "float" not in differing_numbers(np.float64(0.2), np.float64(0.1))


def test_a_failed_comparison_prints_the_numbers_that_differ(messages):
    expected = np.array([0.5, 1.0, 0.046415888336127795])
    observed = expected.astype(np.float32)
    observed[0] = 0.75
    expect_close(observed, expected, what="three numbers", idea="an idea")
    (message,) = messages
    assert "the first, at index (0,), is 0.75 instead of 0.50 (off by 0.25, relative 0.5; yours is float32, the " \
           "expected float64)" in message, message


def test_a_float32_result_right_to_float32_precision_is_told_the_precision_not_a_mistake(messages):
    # A float32 sinusoidal table as torch builds it: sin^2 + cos^2 is 1 only to float32's precision.
    angles = np.arange(5.0)[:, None] / 10000.0 ** (np.arange(0, 8, 2) / 8)
    table = np.stack([np.sin(angles), np.cos(angles)], -1).reshape(5, 8).astype(np.float32)
    squares = table[:, 0::2] ** 2 + table[:, 1::2] ** 2
    wrong_idea = "use the pair index 2*(j//2) for column j, not j"
    expect_close(squares, np.ones((5, 4)), what="sin^2 + cos^2", idea=wrong_idea)
    (message,) = messages
    revisit = message.split("revisit:", 1)[1]
    assert wrong_idea not in revisit, message
    assert "precision" in revisit and "float32" in revisit and "float64" in revisit, message


def test_float64_values_right_only_to_float32_precision_are_told_the_precision_too(messages):
    # Computed in float32 and returned as float64 (torch's .double() at the end): the dtype hides it.
    right = np.sin(np.arange(1.0, 13.0))
    computed = right * (1.0 + 3e-7 * np.cos(np.arange(12.0)))  # float32's rounding, a few eps of it
    assert not np.allclose(computed, right, rtol=1e-7, atol=1e-9)  # the check fails ...
    expect_close(computed, right, what="twelve numbers", idea="a formula")
    (message,) = messages
    assert "precision" in message.split("revisit:", 1)[1] and "float64" in message, message


def test_a_float32_result_that_is_wrong_keeps_the_idea_of_its_check(messages):
    expect_close(np.full(4, 2.0, dtype=np.float32), np.ones(4), what="four ones", idea="the formula's idea")
    (message,) = messages
    assert message.endswith("revisit:  the formula's idea"), message


def test_an_exact_comparison_of_numbers_printed_rounded_shows_the_first_that_differs(messages):
    from tests.feedback import expect_equal

    expected = np.array([0.25, 0.046415888336127795])
    expect_equal(expected + [0.0, 1e-9], expected, what="two numbers", idea="an idea")
    (message,) = messages
    detail = "1 of 2 entries differ; the first, at index (1,), is 0.046415889 instead of 0.046415888 (off by 1e-09"
    assert detail in message, message


def test_long_arrays_of_booleans_or_integers_that_print_alike_show_the_first_that_differs(messages):
    from tests.feedback import expect_equal

    # A blind round's hit (480 booleans) printed "[ True  True False ... False False False]" twice.
    expected = np.arange(480) % 3 == 0
    observed = expected.copy()
    observed[23] = True
    expect_equal(observed, expected, what="hit", idea="an idea")
    expect_equal(np.arange(480) + (np.arange(480) == 7), np.arange(480), what="ids", idea="an idea")
    expect_equal(~expected[:6], expected[:6], what="a few", idea="an idea")
    long_bools, long_ints, short = messages
    assert "(1 of 480 entries differ; the first, at index (23,), is True instead of False)" in long_bools, long_bools
    assert "(1 of 480 entries differ; the first, at index (7,), is 8 instead of 7)" in long_ints, long_ints
    assert "entries differ" not in short  # printed in full: the values say it


@pytest.mark.parametrize(("observed", "expected", "said"), [
    (["hig", "h"], [b"hig", b"h"], "(a list of str, where the API returns a list of bytes)"),  # printed alike
    ((1, 2), [1, 2, 3], "(a tuple of integer, where the API returns a list of integer)"),
    ("ab", b"ab", "(a str, where the API returns a bytes)"),
])
def test_two_kinds_of_thing_that_print_alike_are_named(messages, observed, expected, said):
    assert not feedback.expect_equal(observed, expected, what="pieces", idea="bytes")
    assert said in messages[-1], messages


@pytest.mark.parametrize(("observed", "expected"), [
    ([1.0, 2.5], [1, 2]),  # numbers: the values say it, not a kind
    ([b"a"], [b"a", b"b"]),  # the same kind: the values differ
])
def test_the_kind_is_not_named_when_it_is_not_the_difference(messages, observed, expected):
    assert not feedback.expect_equal(observed, expected, what="pieces", idea="bytes")
    assert "where the API returns" not in messages[-1], messages


def test_values_right_to_float32_after_adam_name_the_gradients_scale_too(messages):
    # A gradient off by a constant factor, hidden by Adam: float64 weights that agree only to about 1e-7.
    right = np.sin(np.arange(1.0, 13.0))
    computed = right * (1.0 + 3e-7 * np.cos(np.arange(12.0)))
    expect_close(computed, right, what="the weight", idea="TRAIN", tiny_term="a gradient off by a constant factor")
    expect_close(computed, right, what="the weight", idea="TRAIN")
    with_term, without = messages
    revisit = with_term.split("revisit:", 1)[1]
    assert "float32's precision" in revisit and revisit.endswith("here, likelier: a gradient off by a constant factor")
    assert "likelier" not in without  # said only where a check names it


def test_arrays_that_print_alike_are_printed_with_the_digits_that_tell_them_apart(messages):
    # A softmax whose rows sum to 0.999999 (an epsilon in the denominator): to 4 decimals both read [1. 1. 1.].
    expect_close(np.full(3, 1.0) / (1.0 + 1e-6), np.ones(3), what="row sums", idea="each row sums to 1")
    (message,) = messages
    expected = message.split("expected:", 1)[1].split("\n", 1)[0].strip()
    observed = message.split("observed:", 1)[1].split("\n", 1)[0].strip()
    assert expected != observed and "0.999999" in observed, message


def test_float64_values_computed_in_float32_with_a_long_sum_are_told_the_precision(messages):
    # Triton's fused attention in a port: float32 accumulators, the output cast back to float64. A long float32
    # pipeline errs by a few dozen eps (here 20), more than float64 values alone are let off (8), and every value
    # is a float32 number.
    eps = float(np.finfo(np.float32).eps)
    right = np.sin(np.arange(1.0, 41.0)).reshape(10, 4)
    computed = (right * (1 + 20 * eps * np.cos(np.arange(40.0)).reshape(10, 4))).astype(np.float32).astype(float)
    scale = np.abs(right).max()
    assert not np.allclose(computed, right, rtol=8 * eps, atol=8 * eps * scale)
    expect_close(computed, right, what="blockwise attention", idea="online softmax")
    (message,) = messages
    assert "a question of precision" in message.split("revisit:", 1)[1], message
    messages.clear()
    # The same error in values that are not float32 numbers (computed in float64 to the end) stays unclaimed.
    expect_close(right * (1 + 20 * eps * np.cos(np.arange(40.0)).reshape(10, 4)), right, what="blockwise attention",
                 idea="online softmax")
    (message,) = messages
    assert message.endswith("revisit:  online softmax"), message


def test_values_with_few_binary_digits_are_not_told_the_precision(messages):
    # 0.5 and 0.25 are float32 numbers whatever computed them: a wrong formula that lands on them is no float32 sign.
    expect_close(np.array([0.5, 0.25, 0.75]), np.array([0.5, 0.25, 0.75]) * (1 + 4e-6), what="three numbers",
                 idea="the formula's idea")
    (message,) = messages
    assert message.endswith("revisit:  the formula's idea"), message


def test_values_rounded_for_display_are_told_so(messages):
    expect_close(np.array(0.20556), np.array(0.2055555555), what="recall", idea="the formula's idea")
    expect_close(np.array([0.211, 0.333, 0.5]), np.array([0.2106, 0.33333, 0.5]), what="three figures",
                 idea="the formula's idea")
    first, second = messages
    assert "rounded to 5 decimals" in first and "unrounded" in first, first
    assert "rounded to 3 decimals" in second, second


def test_a_value_near_its_rounding_is_not_called_rounded(messages):
    # Two decimals can match a wrong value by chance (21 of 100 questions for 20.55 of them), and so can values
    # with few binary digits: neither is called rounded.
    expect_close(np.array([0.21, 0.33, 0.47]), np.array([0.2055, 0.3333, 0.4701]), what="recall",
                 idea="the formula's idea")
    expect_close(np.array([0.5, 0.25]), np.array([0.50002, 0.24999]), what="recall", idea="the formula's idea")
    expect_close(np.array(0.2057), np.array(0.2055555), what="recall", idea="the formula's idea")
    assert all(message.endswith("revisit:  the formula's idea") for message in messages), messages


def test_a_mask_of_ones_and_zeros_is_told_the_convention(messages):
    from tests.feedback import expect_dtype

    mask = np.array([[1, 1, 0], [1, 0, 0]])
    expect_dtype(mask, np.bool_, what="padding_mask", idea="True where key j < lengths[b]")
    expect_dtype(mask * 2, np.bool_, what="padding_mask", idea="True where key j < lengths[b]")  # not 1/0: no
    first, second = messages
    assert "attention_mask" in first and "a convention, not a misconception" in first, first
    assert second.endswith("revisit:  True where key j < lengths[b]"), second


def test_a_float32_input_given_back_as_float64_is_told_the_promotion(messages):
    from tests.feedback import expect_dtype

    expect_dtype(np.eye(3), np.float32, what="attention_rollout of float32 weights", idea="dtype in = dtype out")
    expect_dtype(np.eye(3, dtype=np.float32), np.float64, what="a float64 result", idea="dtype in = dtype out")
    # A dtype argument ignored (to_additive's) gets the same words, true of it too: the result was built in float64.
    expect_dtype(np.zeros(3), np.float32, what="to_additive(mask, dtype=np.float32)", idea="honour the dtype argument")
    first, second, third = messages
    assert "promoted by, float64" in first and "np.eye" in first and "float32)" in first, first
    assert "promoted" not in second and "lower precision" in second, second
    assert "built from, or promoted by" in third and "met the" not in third, third
