"""Hidden tests of exercise 15, tokenization: deep merges, lists for arrays, unicode training, edges, huge counts."""

# ruff: noqa: D103  (test functions are named for the property they check, as in tests/)

from __future__ import annotations

import numpy as np

from tests.feedback import expect, expect_array, expect_equal, expect_shape
from tests.test_15_tokenization import (
    COST,
    DECODE,
    LENGTHS,
    ORDER,
    STOP,
    TRAIN,
    drawn_corpus,
    own_encode,
    own_train,
    require_ordered_merges,
    training_idea,
)

EXERCISE = "tokenization"


def test_long_training_on_three_letters_merges_merged_tokens(impl):
    # Three letters, 1200 of them, 60 merges: most later merges join tokens made by earlier ones.
    text = drawn_corpus(1550, "abc", 1200, ("cba",))
    expected = own_train(text, 60)
    merges = impl.train_bpe(text, 60)
    if expect_shape(merges, expected.shape, what="train_bpe of 1200+ letters over 'abc', 60 merges", idea=TRAIN):
        expect_equal(np.asarray(merges).tolist(), expected.tolist(), idea=training_idea(merges, text, 60, TRAIN),
                     what="train_bpe of 1200+ letters over 'abc', 60 merges")


def test_zero_merges_and_a_short_text(impl):
    merges = impl.train_bpe("abcabc", 0)
    if expect_array(merges, what="train_bpe('abcabc', 0)", idea=STOP):
        expect_shape(merges, (0, 2), what="train_bpe('abcabc', 0): no merge, still shape (0, 2)", idea=STOP)
    # (a, b) twice, then (ab, c) twice, then (abc, abc) once: two merges, worked by hand.
    expect_equal(np.asarray(impl.train_bpe("abcabc", 3)).tolist(), [[97, 98], [256, 99]], idea=STOP,
                 what="train_bpe('abcabc', 3): ab, then (ab)c, then no pair occurs twice")


def test_plain_lists_for_merges_and_ids(impl):
    require_ordered_merges(impl)
    as_lists = [[97, 98], [256, 99]]
    expect_equal(impl.bpe_decode([256, 257], as_lists), "ababc", idea=DECODE,
                 what="bpe_decode([256, 257], [[97, 98], [256, 99]]) with ids and merges as lists")
    expect_equal(np.asarray(impl.bpe_encode("abcab", as_lists)).tolist(), [257, 256], idea=ORDER,
                 what="bpe_encode('abcab', [[97, 98], [256, 99]]) with the merges as a list of lists")


def test_training_encoding_and_decoding_on_mixed_scripts(impl):
    require_ordered_merges(impl)
    text = "Ωμέγα 🚢🚢 Ωμέγα 🚢 naïve naïve 水位 水位 水位 ∑∑"
    merges = impl.train_bpe(text, 20)
    expected = own_train(text, 20)
    expect_equal(np.asarray(merges).tolist(), expected.tolist(), idea=TRAIN,
                 what="train_bpe on Greek, emoji, accents and Chinese (bytes first)")
    for probe_text in ("水位 🚢", "Ωμ", "é🚢水"):
        expect_equal(impl.bpe_decode(own_encode(probe_text, expected), expected), probe_text, idea=DECODE,
                     what=f"decode of the test's own ids of {probe_text!r}")
        ids = impl.bpe_encode(probe_text, expected)
        expect_equal(np.asarray(ids).tolist(), own_encode(probe_text, expected), idea=ORDER,
                     what=f"bpe_encode({probe_text!r}) with merges learned on mixed scripts")


def test_a_merge_joins_two_ids_never_the_digits_of_their_text(impl):
    # Worked by hand: the bytes of "a=b" are 97, 61, 98, and the merge (61, 98) joins the last two into 256; those of
    # "áb" are 195, 161, 98 and those of " e" 32, 101, where (61, 98) and (32, 10) are not pairs of ids, though
    # "61 98" is in the text "195 161 98" and "32 10" in "32 101".
    require_ordered_merges(impl)
    for text, merges, expected in (("a=b", [[61, 98]], [97, 256]), ("áb", [[61, 98]], [195, 161, 98]),
                                   (" e", [[32, 10]], [32, 101])):
        expect_equal(np.asarray(impl.bpe_encode(text, np.array(merges))).tolist(), expected, idea=ORDER,
                     what=f"bpe_encode({text!r}, {merges}): a merge joins two neighbouring ids, as numbers")


def test_decode_of_half_a_character_does_not_crash(impl):
    # 0xC3 alone is the first half of "é": not UTF-8 on its own; a model may emit it. It reads as U+FFFD.
    out = impl.bpe_decode([104, 0xC3], np.zeros((0, 2), dtype=np.int64))
    expect_equal(out, "h\ufffd", idea=DECODE, what="bpe_decode([104, 0xC3]): 'h' then half a character")


def test_sequence_lengths_follow_the_order_of_the_sizes(impl):
    text = drawn_corpus(1551, "pqr ", 200, ("rqp",))
    merges = own_train(text, 14)
    sizes = [270, 256, 263, 270]
    lengths = impl.sequence_lengths([text[:80], text[80:]], merges, sizes)
    if expect_shape(lengths, (4, 2), what="sequence_lengths for vocab_sizes [270, 256, 263, 270]", idea=LENGTHS):
        expected = [[len(own_encode(t, merges[:size - 256])) for t in (text[:80], text[80:])] for size in sizes]
        expect_equal(np.asarray(lengths).tolist(), expected, idea=LENGTHS,
                     what="sequence_lengths for vocab_sizes [270, 256, 263, 270], rows in that order")


def test_attention_cost_of_a_huge_sequence_is_exact(impl):
    n, d = 10**7 + 1, 1000  # 4 n^2 d is about 4e17: beyond float64's exact integers
    flops, size = impl.attention_cost(n, d)
    expect(int(flops) == 4 * n * n * d and int(size) == 8 * n * n, idea=COST + "; count in integers",
           what=f"attention_cost({n}, {d})", expected=f"({4 * n * n * d}, {8 * n * n})",
           observed=f"({flops}, {size})")
