"""Exercise 15: byte-pair encoding, from the shape of the merges to the pieces of an identifier.

Expected values come from this file: its own small BPE (training, encoding and
the bytes of each token, written differently from any reference), run on
corpora it draws from its own seeds, hand-worked cases, and invariants
(decoding inverts encoding, more merges never lengthen a sequence). Each
function is fed the test's own inputs (merges from the test's training, ids
from the test's encoder), so a failure blames the function that is wrong.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from collections import Counter
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import numpy as np

from tests import moves, unseen
from tests.crash import raising_through
from tests.effort import message as failure_message
from tests.effort import require
from tests.failures import recorded_so_far
from tests.feedback import (
    call_or_explain,
    expect,
    expect_array,
    expect_dtype,
    expect_equal,
    expect_raises_value_error,
    expect_shape,
)
from tests.kinds import remembered
from tests.probes import expect_probe, probe
from tests.steps import Stage, pipeline

ROOT = Path(__file__).resolve().parent.parent
TRAIN = ("training: count every pair of neighbouring tokens (overlapping ones too), merge the most frequent "
         "(a tie goes to the smallest pair), give it id 256 + step, and count again on the new sequence")
OVERLAP = ("a merge replaces the pair left to right and uses each token once: 'aaa' with the merge (a, a) "
           "becomes [aa, a], not [aa, aa]")
TIES = ("a tie between pairs of the same count goes to the smallest pair: the smaller left id, then the smaller "
        "right id (not the first pair seen in the text)")
STOP = "training stops when no pair occurs twice: merging a pair seen once saves one token and teaches nothing"
ORDER = ("encoding applies the merges in the order they were learned, each everywhere before the next: not the "
         "longest piece of the vocabulary, not the pairs most frequent in the text being encoded; merge i, the pair "
         "(left, right), joins each left token followed by a right token (in that order) into id 256 + i")
BYTES = "the base vocabulary is the 256 bytes of UTF-8: a text with no merge is its bytes, one id each"
DECODE = ("decoding: each id stands for bytes (a byte below 256, its pair's two tokens' bytes joined above); join "
          "the bytes of the whole sequence, then read them as UTF-8 (a character may be split across tokens)")
PIECES = "the pieces of a text are the bytes of each of its tokens, in order; joined they are the text's bytes"
RARE = ("the corpus's frequent words become few tokens; an identifier it never saw stays in many small pieces, "
        "and every piece is a position that attention pays for")
LENGTHS = ("a vocabulary of V tokens is the 256 bytes and the first V - 256 merges: the length under it is that of "
           "encode with those merges")
COST = ("attention over n tokens of width d: the scores Q K^T and the weights times V are n*n*d multiply-adds "
        "each, 4 n^2 d operations in all, and the (n, n) scores take n^2 * itemsize bytes")
INVALID = ("bytes that are not valid UTF-8 (ids a model made up) decode to the replacement character '\\ufffd', "
           "one per broken sequence (errors='replace'): never an error, never dropped")
EXACT = ("the counts are Python ints, exact at any size; numpy's int64 wraps past 9.2e18 without a word, and a "
         "long context at a wide model goes past it")
CHECKS = "bad input raises ValueError, and the message names the offending argument"


# --- the test's own byte-pair encoding -------------------------------------------------------------------------

def _own_merge(seq: list[int], pair: tuple[int, int], new: int) -> list[int]:
    out: list[int] = []
    for token in seq:
        if out and out[-1] == pair[0] and token == pair[1]:  # out[-1] is never a fresh `new` (new > both ids)
            out[-1] = new
        else:
            out.append(token)
    return out


@remembered  # the test's own computation on seeded inputs: once per process, kept between a student's runs
def own_train(text: str, n_merges: int) -> np.ndarray:
    seq, merges = list(text.encode("utf-8")), []
    while len(merges) < n_merges:
        counts = Counter(pairwise(seq))
        top = max(counts.values(), default=0)
        if top < 2:
            break
        pair = min(p for p, c in counts.items() if c == top)
        seq = _own_merge(seq, pair, 256 + len(merges))
        merges.append(pair)
    return np.reshape(np.array(merges, dtype=np.int64), (len(merges), 2))


def own_encode(text: str, merges: np.ndarray) -> list[int]:
    seq = list(text.encode("utf-8"))
    for i, pair in enumerate(np.asarray(merges).reshape(-1, 2).tolist()):
        seq = _own_merge(seq, tuple(pair), 256 + i)
    return seq


def own_vocab(merges: np.ndarray) -> list[bytes]:
    vocab = [bytes([b]) for b in range(256)]
    for left, right in np.asarray(merges).reshape(-1, 2).tolist():
        vocab += [vocab[left] + vocab[right]]
    return vocab


# --- conventions of other tokenizers: right code, another contract (named, never blamed on an idea) ------------

RIGHT_TO_LEFT = ("yours replaces a pair from right to left ('aaa' with the merge (a, a) becomes [a, aa]): a "
                 "convention, not a misconception; this kit's contract is left to right, in training and in encoding: "
                 "'aaa' becomes [aa, a]")
PRETOKENIZED = ("yours splits the text into words first (GPT-2's and tiktoken's pre-tokenization, a regex split before "
                "merging), so no merge crosses a word or a space before it: a convention, not a misconception; this "
                "kit's contract merges over the whole text as one sequence of bytes, spaces and punctuation included")
BYTE_RANK = ("yours joins any two neighbours whose bytes together are a token, lowest rank first (tiktoken's merges by "
             "byte rank): a convention, not a misconception; this kit's contract applies merge i, the pair of ids "
             "merges[i], everywhere in the learned order, so a token comes only from its own pair")
TO_SIZE = ("yours merges until it has n_merges, pairs seen once included, and gives a tie to the pair seen first "
           "(minbpe's and tiktoken's training to a fixed vocabulary size, the max over the counts in order of "
           "appearance): a convention, not a misconception; this kit's contract stops when no pair occurs twice "
           "and gives a tie to the smallest pair (the smaller left id, then the smaller right id)")
FIRST_SEEN = ("yours gives a tie to the pair seen first in the text (the max over the counts in order of appearance: "
              "minbpe's and tiktoken's training break ties so, a convention, not a misconception, when the code is "
              "theirs); this kit's contract gives a tie to the smallest pair (the smaller left id, then the smaller "
              "right id)")
BYTE_LEVEL_TIES = ("yours gives a tie to the smallest pair in the order of GPT-2's byte-level characters (Hugging "
                   "Face tokenizers' ByteLevel BPE trainer: its ids follow the sorted byte-to-unicode alphabet, so the "
                   "space, the control bytes and the bytes 127-160 come after the letters): a convention, not a "
                   "misconception; this kit's contract gives a tie to the smallest pair of byte ids (the smaller left "
                   "id, then the smaller right id)")


def _printable(byte: int) -> bool:
    """The bytes GPT-2's byte-to-unicode table maps to themselves."""
    return 33 <= byte <= 126 or 161 <= byte <= 172 or 174 <= byte <= 255


def _byte_level_rank(token: int) -> int:
    """Where a token sorts in Hugging Face's byte-level vocabulary.

    A byte sorts by its GPT-2 byte-to-unicode character (a printable byte stands for itself, each of the 68 others
    for 256, 257, ... in byte order); a merged token after every byte.
    """
    if token >= 256:
        return 1024 + token
    return token if _printable(token) else 256 + sum(1 for b in range(token) if not _printable(b))


# GPT-2's and tiktoken's (cl100k) pre-tokenization patterns, with \w-classes for regex's \p{L} and \p{N}.
_SPLITS = (r"'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+",
           r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\w]?[^\W\d_]+|\d{1,3}| ?[^\s\w]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def _merge_right_to_left(seq: list[int], pair: tuple[int, int], new: int) -> list[int]:
    return _own_merge(seq[::-1], (pair[1], pair[0]), new)[::-1]


def _trained(chunks: list[list[int]], n_merges: int, merge=_own_merge, *, first_seen: bool = False, stop: bool = True,
             byte_level: bool = False) -> list[list[int]]:
    """The test's own training on several sequences at once (pairs never cross from one to the next).

    ``first_seen``: a tie to the pair seen first (a Counter keeps the order of appearance); ``stop=False``: merge
    until ``n_merges`` while any pair is left, seen once included (both minbpe's and tiktoken's way);
    ``byte_level``: Hugging Face's trainer, a tie to the smallest pair in the order of the byte-level characters.
    """
    merges: list[list[int]] = []
    while len(merges) < n_merges:
        counts = Counter(pair for chunk in chunks for pair in pairwise(chunk))
        top = max(counts.values(), default=0)
        if top < (2 if stop else 1):
            break
        tied = [p for p, c in counts.items() if c == top]
        if byte_level:
            pair = min(tied, key=lambda p: (_byte_level_rank(p[0]), _byte_level_rank(p[1])))
        else:
            pair = tied[0] if first_seen else min(tied)
        chunks = [merge(chunk, pair, 256 + len(merges)) for chunk in chunks]
        merges.append(list(pair))
    return merges


def _encoded(chunks: list[list[int]], merges: np.ndarray, merge=_own_merge) -> list[int]:
    out: list[int] = []
    for chunk in chunks:
        for i, pair in enumerate(np.asarray(merges).reshape(-1, 2).tolist()):
            chunk = merge(chunk, tuple(pair), 256 + i)
        out += chunk
    return out


def _by_byte_rank(text: str, merges: np.ndarray) -> list[int]:
    rank: dict[bytes, int] = {}
    for token, piece in enumerate(own_vocab(merges)):
        rank.setdefault(piece, token)
    parts = [bytes([b]) for b in text.encode("utf-8")]
    while True:
        ranked = [(rank[a + b], j) for j, (a, b) in enumerate(pairwise(parts)) if a + b in rank]
        if not ranked:
            return [rank[piece] for piece in parts]
        _, j = min(ranked)
        parts[j:j + 2] = [parts[j] + parts[j + 1]]


def _words(text: str) -> list[list[list[int]]]:
    """The text's bytes split by each pre-tokenization pattern."""
    return [[list(word.encode("utf-8")) for word in re.findall(pattern, text)] for pattern in _SPLITS]


def training_idea(merges: object, text: str, n_merges: int, idea: str) -> str:
    """``idea``, or the convention whose training gives ``merges`` on ``text`` (the kit's does not)."""
    try:
        observed = np.asarray(merges).reshape(-1, 2).tolist()
    except (TypeError, ValueError):
        return idea
    right = own_train(text, n_merges).tolist()
    conventions = [(RIGHT_TO_LEFT, lambda: _trained([list(text.encode("utf-8"))], n_merges, _merge_right_to_left))]
    conventions += [(PRETOKENIZED, lambda words=words: _trained(words, n_merges)) for words in _words(text)]
    conventions += [(BYTE_LEVEL_TIES, lambda: _trained([list(text.encode("utf-8"))], n_merges, byte_level=True))]
    conventions += [(f"{PRETOKENIZED}; {BYTE_LEVEL_TIES}", lambda words=words: _trained(words, n_merges,
                                                                                        byte_level=True))
                    for words in _words(text)]
    for message, train in conventions:
        if observed != right and observed == train():
            return f"{idea}; {message}"
    # minbpe's and tiktoken's training, told only when both of its differences show (the tie alone, or the missing
    # stop alone, is a catalogued mistake whose own message stands).
    for chunks, message in [([list(text.encode("utf-8"))], TO_SIZE)] + [
            (words, f"{PRETOKENIZED}; {TO_SIZE}") for words in _words(text)]:
        if observed != right and observed == _trained(chunks, n_merges, first_seen=True, stop=False) and (
                observed not in (_trained(chunks, n_merges, first_seen=True), _trained(chunks, n_merges, stop=False))):
            return f"{idea}; {message}"
    # The tie alone, where no stop shows (every pair left occurs twice): minbpe's rule, and a catalogued mistake,
    # look the same here; both are named as the one rule they share.
    for chunks, message in [([list(text.encode("utf-8"))], FIRST_SEEN)] + [
            (words, f"{PRETOKENIZED}; {FIRST_SEEN}") for words in _words(text)]:
        if observed != right and observed == _trained(chunks, n_merges, first_seen=True):
            return f"{idea}; {message}"
    return idea


def _encoding_conventions(text: str, merges: np.ndarray) -> list[tuple[str, Callable[[], list[int]]]]:
    """The conventions of encoding this kit names, each with its encoding of ``text`` (in one fixed order)."""
    conventions = [(RIGHT_TO_LEFT, lambda: _encoded([list(text.encode("utf-8"))], merges, _merge_right_to_left)),
                   (BYTE_RANK, lambda: _by_byte_rank(text, merges))]
    return conventions + [(PRETOKENIZED, lambda words=words: _encoded(words, merges)) for words in _words(text)]


def encoding_idea(ids: object, text: str, merges: np.ndarray, idea: str,
                  others: tuple[tuple[object, str, np.ndarray], ...] = ()) -> str:
    """``idea``, or the convention whose encoding gives ``ids`` for ``text`` (the kit's does not).

    ``others``: the test's other encodings, ``(ids, text, merges)``; the convention must give those too. On one
    text a convention may coincide with a mistake (on 'abc', tiktoken's merges by byte rank give the longest
    piece of the vocabulary, as a greedy longest match does): it is named only when it explains every encoding.
    """
    def listed(value: object) -> list | None:
        try:
            return np.asarray(value).reshape(-1).tolist()
        except (TypeError, ValueError):
            return None

    observed = listed(ids)
    if observed is None or observed == own_encode(text, merges):
        return idea
    seen = [(listed(other), _encoding_conventions(other_text, other_merges))
            for other, other_text, other_merges in others]
    for index, (message, encode) in enumerate(_encoding_conventions(text, merges)):
        if observed == encode() and all(got == conventions[index][1]() for got, conventions in seen):
            return f"{idea}; {message}"
    return idea


def drawn_corpus(seed: int, alphabet: str, length: int, planted: tuple[str, ...]) -> str:
    """Random letters of a small alphabet, with the planted strings inserted often (so they merge early)."""
    rng = np.random.default_rng(seed)
    parts = list(rng.choice(list(alphabet), size=length))
    for word in planted:
        for _ in range(length // 12):
            parts.insert(int(rng.integers(len(parts) + 1)), word)
    return "".join(parts)


@functools.cache
def corpus_module():
    """The given corpus (_tokenization_corpus.py), loaded from the kit (the reference's copy when there is one)."""
    for folder in ("solutions", "exercises"):
        path = ROOT / folder / "_tokenization_corpus.py"
        if path.is_file():
            spec = importlib.util.spec_from_file_location(f"_attention_kit_corpus_{folder}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    raise FileNotFoundError("_tokenization_corpus.py is missing from the kit (solutions/ and exercises/)")


@functools.cache
def corpus_merges(seed: int, n_merges: int) -> tuple[str, np.ndarray]:
    """The test's own merges on 40 sentences of the shipped corpus drawn with ``seed``, and the text."""
    sentences = corpus_module().SENTENCES
    chosen = np.random.default_rng(seed).choice(len(sentences), size=40, replace=False)
    text = "\n".join(sentences[i] for i in sorted(chosen)) + "\n"
    return text, own_train(text, n_merges)


def merges_absent_from(text: str, merges: np.ndarray) -> list[bytes]:
    """The pieces of ``merges`` (each merge's bytes, built by the test) that do not occur in ``text``."""
    merges = np.asarray(merges).reshape(-1, 2)
    if not np.issubdtype(merges.dtype, np.integer) or merges.min(initial=0) < 0 or merges.max(initial=0) >= 256 + len(
            merges):
        return [b"(ids out of range)"]
    data, vocab = text.encode("utf-8"), own_vocab(merges)
    return [vocab[256 + i] for i in range(len(merges)) if vocab[256 + i] not in data]


# --- probes (the diagnosis of known mistakes runs them) ---------------------------------------------------------

@probe("train_bpe")
def a_drawn_corpus():
    return (drawn_corpus(1501, "abcd ", 240, ("cab", "dd")), 18), {}


@probe("train_bpe")
def a_run_of_one_letter():
    return ("aaaaaaab aaaaab", 5), {}


@probe("train_bpe")
def pairs_that_tie():
    return ("xy.ab.qr.xy.ab.qr.xy.ab.qr", 6), {}


@probe("bpe_encode")
def merges_whose_order_matters():
    merges = np.array([[98, 99], [97, 98], [257, 99], [256, 256]])  # bc, ab, (ab)c, (bc)(bc)
    return ("abcbcbc abc ab", merges), {}


@probe("bpe_encode")
def order_against_frequency_in_the_text():
    return ("abcbcbc", np.array([[97, 98], [98, 99]])), {}


@probe("bpe_encode")
def a_token_its_merges_never_make():
    # merges: 256 = (b, c), 257 = (bc, d), 258 = (a, b). In order, "abcd" is [a, bcd]: (b, c) acts first and
    # no (a, b) is left. The longest piece at each place gives [ab, c, d]; tiktoken's merges by byte rank give
    # the kit's answer here: this probe tells the longest match from them.
    return ("abcd", np.array([[98, 99], [256, 100], [97, 98]])), {}


@probe("bpe_decode")
def characters_split_across_tokens():
    # (For the diagnosis only: decode's result is a str, compared by the tests above with the test's own text.)
    merges = own_train("café café naïve naïve ∑∑ ∑∑", 10)
    return (own_encode("é naïve ∑ café", merges), merges), {}


@probe("bpe_encode")
def text_with_accents():
    return ("café naïve cafés", own_train("café café naïve naïve", 8)), {}


@probe("bpe_encode")
def text_beyond_latin_1():
    # '∑' is past U+00FF: its code point, its Latin-1 encoding and its three UTF-8 bytes all differ.
    return ("∑ é∑ a∑", own_train("∑∑ é∑ é∑", 4)), {}


@probe("sequence_lengths")
def two_texts_three_sizes():
    text = drawn_corpus(1502, "xyz", 150, ("zx",))
    return ([text[:60], text[60:]], own_train(text, 12), [256, 262, 268]), {}


@probe("train_bpe")
def accented_and_greek_text():
    # Bytes, not characters: 'é' is two bytes and '∑' three, so the first merges join pieces of one character.
    return ("é é é ∑∑ ∑∑ naïve naïve", 6), {}


@probe("sequence_lengths")
def accented_texts():
    return (["café naïve", "∑ x ∑"], own_train("café café naïve naïve ∑∑ ∑∑", 6), [256, 258, 262]), {}


@probe("token_pieces")
def a_word_with_an_accent():
    return ("naïve café", own_train("café café naïve naïve", 5)), {}


@probe("attention_cost")
def a_small_head():
    return (37, 5), {"itemsize": 4}


@probe("attention_cost")
def a_small_head_default_itemsize():
    # a_small_head with the default itemsize (8, float64): a default of 4 (float32's) gives a_small_head's bytes.
    return (37, 5), {}


@probe("train_bpe", rejects="n_merges")
def a_negative_number_of_merges():
    return ("abab", -1), {}


@probe("train_bpe", rejects="text")
def bytes_instead_of_text():
    return (b"abab", 2), {}


@probe("bpe_encode", rejects="merges")
def a_merge_of_an_id_not_yet_made():
    return ("abc", np.array([[97, 98], [300, 99]])), {}


@probe("bpe_decode", rejects="ids")
def an_id_beyond_the_vocabulary():
    return ([97, 256, 300], np.array([[97, 98]])), {}


@probe("sequence_lengths", rejects="vocab_sizes")
def a_vocabulary_larger_than_the_merges():
    return (["abc"], np.array([[97, 98]]), [256, 300]), {}


@probe("attention_cost", rejects="n")
def an_empty_sequence():
    return (0, 4), {}


# The steps of the pipelines above, for the diagnosis of a mistake no catalogue entry explains (tests/steps.py):
# BPE's merges are learned one after the other, so the first merge that differs names the step.
pipeline("train_bpe", ("merges",),
         Stage("merges", "the merges", "a later merge: replace the merge before it left to right without overlap "
               "('aaa' with (a, a) becomes [aa, a]), give it id 256 + step, then count the pairs again on the new "
               "sequence (overlapping ones too), the most frequent first, a tie to the smallest pair",
               first="the first merge: count every pair of neighbouring UTF-8 bytes of the text (not characters; "
               "overlapping pairs too: 'aaa' holds (a, a) twice), take the most frequent, a tie to the smallest "
               "pair (the smaller left id, then the smaller right id)",
               stop="when to stop: only when no pair occurs twice any more (a pair seen twice is still merged), "
               "else after n_merges merges; the pairs counted on the sequence the merges so far left, every token "
               "of it kept (a merge that drops or repeats a token, the last one say, changes the counts)"))
pipeline("sequence_lengths", ("lengths",),
         Stage("lengths", "the lengths", "V > 256: the length of bpe_encode with the first V - 256 merges",
               first="the first vocabulary asked for here: V tokens are the 256 bytes and the first V - 256 "
               "merges, so V = 256 applies no merge at all and the length is the number of the text's UTF-8 bytes"))
pipeline("attention_cost", ("flops", "bytes"),
         Stage("flops", "the operations", "the operations: Q K^T and the weights times V are n*n*d multiply-adds "
               "each, and a multiply-add is 2 operations: 4 n^2 d"),
         Stage("bytes", "the memory", "the memory: one (n, n) array of scores, n^2 * itemsize bytes (the itemsize "
               "given, bytes not bits)"))


# --- train_bpe ---------------------------------------------------------------------------------------------------

# merges bc=256, ab=257, (ab)c=258 on "abcbc": in order [a, bc, bc]; the longest piece of the vocabulary at each
# place gives [abc, bc], and so do tiktoken's merges by byte rank; the bytes alone [a, b, c, b, c]. Then cd=256,
# bc=257, a(bc)=258 on "abcd" tells those two apart: the longest piece gives [abc, d], the merges by byte rank
# [a, b, cd], as the learned order does. Worked by hand.
_GATE_TEXT, _GATE_MERGES, _GATE_LABEL = "abcbc", ((98, 99), (97, 98), (257, 99)), "merges bc=256, ab=257, (ab)c=258"
_APART_TEXT, _APART_MERGES = "abcd", ((99, 100), (98, 99), (97, 257))


def _cut(impl, name: str, text: str, merges: np.ndarray) -> list | None:
    """``bpe_encode``'s ids or ``token_pieces``' pieces of ``text``, as a list; None if it raises."""
    try:
        with raising_through():  # a crash is the test's own finding
            out = getattr(impl, name)(text, merges)
        return [bytes(piece) for piece in out] if name == "token_pieces" else np.asarray(out).tolist()
    except Exception:  # noqa: BLE001 - what the function raises (or returns) is the test's own check to report
        return None


def _order_gate(impl, name: str) -> list:
    """Why ``bpe_encode`` or ``token_pieces`` does not apply the merges in order (empty unless its answer says so).

    Only an answer that is exactly the longest-match one, or the text's bytes with no merge applied, is named here
    (both pass tests whose inputs do not tell them apart); any other wrong answer is the tests' own to explain.
    On the gate's text tiktoken's merges by byte rank give the longest-match answer too: a second text tells the
    two apart, and the one it shows is named (neither, if it shows neither).
    """
    def pieces(cut: list[int], merges: tuple) -> list:
        vocab = own_vocab(np.array(merges))
        return [vocab[i] for i in cut] if name == "token_pieces" else cut

    merges = np.array(_GATE_MERGES)
    right, longest = pieces(own_encode(_GATE_TEXT, merges), _GATE_MERGES), pieces([258, 256], _GATE_MERGES)
    seen, idea = _cut(impl, name, _GATE_TEXT, merges), ORDER
    if seen == longest:
        apart = _cut(impl, name, _APART_TEXT, np.array(_APART_MERGES))
        if apart == pieces([258, 100], _APART_MERGES):
            why = "the longest piece of the vocabulary at each place"
        elif apart == pieces(own_encode(_APART_TEXT, np.array(_APART_MERGES)), _APART_MERGES):
            why, idea = "the cut of tiktoken's merges by byte rank", f"{ORDER}; {BYTE_RANK}"
        else:
            why = "a cut that the merges applied in order do not make"
    elif seen == pieces(list(_GATE_TEXT.encode()), _GATE_MERGES):
        why = "the text's bytes: no merge applied"
    else:
        return []
    return [failure_message(f"{name}({_GATE_TEXT!r}, {_GATE_LABEL})",
                            f"{right}: the merges applied in their learned order", f"{seen}: {why}", idea)]


def require_ordered_merges(impl) -> bool:
    """Fail the test unless ``bpe_encode`` applies the merges in their learned order (:func:`_order_gate`)."""
    return require(impl, "bpe_encode", lambda: _order_gate(impl, "bpe_encode"), key="order")


def require_ordered_pieces(impl) -> bool:
    """Fail the test unless ``token_pieces`` cuts the text as the merges in order do (:func:`_order_gate`)."""
    return require(impl, "token_pieces", lambda: _order_gate(impl, "token_pieces"), key="order")


def test_train_bpe_returns_integer_pairs(impl):
    text = drawn_corpus(1510, "abcde ", 300, ("be", "ca"))
    merges = impl.train_bpe(text, 12)
    if expect_array(merges, what="train_bpe(text, 12) on a drawn corpus of 300+ letters", idea=TRAIN):
        if expect_shape(merges, (12, 2), what="train_bpe(text, 12): one (left id, right id) row per merge",
                        idea=TRAIN):
            if expect(np.issubdtype(merges.dtype, np.integer), what="the dtype of train_bpe's merges",
                      expected="integers (token ids)", observed=str(merges.dtype), idea=TRAIN):
                absent = merges_absent_from(text, merges)
                expect(not absent, what="the pieces the merges of train_bpe(text, 12) stand for", idea=TRAIN,
                       expected="each one a piece of the text it was trained on",
                       observed=f"{len(absent)} never occur in it, e.g. {absent[:3]}")


def test_train_bpe_first_merge_is_the_planted_pair(impl):
    # "qz" planted 60 times among letters that each pair up about 300 / 36 times: (q, z) is the most frequent.
    text = drawn_corpus(1511, "abcdef", 300, ("qz", "qz", "qz"))
    merges = impl.train_bpe(text, 1)
    if expect_shape(merges, (1, 2), what="train_bpe(text, 1)",
                    idea="one merge is one row: (k, 2) even for k = 1 (no squeeze); " + TRAIN):
        expect_equal(np.asarray(merges)[0].tolist(), [ord("q"), ord("z")], idea=training_idea(merges, text, 1, TRAIN),
                     what="the first merge of a corpus where 'qz' is planted 75 times (byte ids of q and z)")


def test_train_bpe_counts_overlapping_runs(impl):
    # "aaaaaaab": (a, a) occurs 6 times -> [aa, aa, aa, a, b]; then (aa, aa) twice -> [aaaa, aa, a, b]; no pair
    # is left twice. Worked by hand.
    merges = impl.train_bpe("aaaaaaab", 5)
    if expect_array(merges, what="train_bpe('aaaaaaab', 5)", idea=OVERLAP):
        expect_equal(np.asarray(merges).reshape(-1, 2).tolist(), [[97, 97], [256, 256]],
                     idea=training_idea(merges, "aaaaaaab", 5, OVERLAP + "; " + STOP),
                     what="train_bpe('aaaaaaab', 5): (a, a) first, then (aa, aa), then no pair occurs twice")


def test_train_bpe_breaks_ties_by_the_smallest_pair(impl):
    # Seven pairs occur 3 times each: (x, y), (y, .), (., a), (a, b), (b, .), (., q), (q, r); the smallest ('.', 'a').
    text = "xy.ab.qr.xy.ab.qr.xy.ab.qr"
    merges = impl.train_bpe(text, 1)
    if expect_shape(merges, (1, 2), what=f"train_bpe({text!r}, 1)", idea=TIES):
        expect_equal(np.asarray(merges).tolist(), own_train(text, 1).tolist(),
                     idea=training_idea(merges, text, 1, TIES),
                     what=f"the first merge of {text!r}, where seven pairs occur 3 times: the smallest, "
                          f"('.', 'a') = [46, 97]")
    text = drawn_corpus(1515, "ba", 40, ())  # two letters, 40 of them: ties come up at every step
    merges = impl.train_bpe(text, 6)
    expect_equal(np.asarray(merges).tolist(), own_train(text, 6).tolist(), idea=training_idea(merges, text, 6, TIES),
                 what=f"train_bpe({text!r}, 6), whose counts tie often")


def test_train_bpe_stops_when_no_pair_repeats(impl):
    for text, expected in (("abcdefg", []), ("abab", [[97, 98]]), ("", [])):
        merges = impl.train_bpe(text, 4)
        if expect_array(merges, what=f"train_bpe({text!r}, 4)", idea=STOP) and expect_shape(
                merges, (len(expected), 2), what=f"train_bpe({text!r}, 4): shape (k, 2) with fewer than 4 rows",
                idea=STOP + "; (k, 2) even for k = 0 or 1 merges: np.array(merges, dtype=np.int64).reshape(-1, 2)"):
            expect_dtype(merges, np.int64, what=f"train_bpe({text!r}, 4): its dtype",
                         idea="merges are integer ids, int64, even when there are none")
            expect_equal(np.asarray(merges).tolist(), expected, idea=training_idea(merges, text, 4, STOP),
                         what=f"train_bpe({text!r}, 4): the merges")


def test_train_bpe_matches_the_tests_own_bpe(impl):
    for seed, alphabet, planted, n in ((1512, "abcd ", ("cab", "dd"), 20), (1513, "xyz", ("zzy",), 16),
                                       (1514, "mnop q", ("pom", "qq", "nop"), 24)):
        text = drawn_corpus(seed, alphabet, 260, planted)
        expected = own_train(text, n)
        merges = impl.train_bpe(text, n)
        if not expect_shape(merges, expected.shape, what=f"train_bpe(text, {n}) on a corpus drawn with seed "
                            f"{seed} over {alphabet!r}", idea=TRAIN):
            return
        expect_equal(np.asarray(merges).tolist(), expected.tolist(), idea=training_idea(merges, text, n, TRAIN),
                     what=f"the merges, in order, of train_bpe(text, {n}) on a corpus drawn with seed {seed} "
                          f"over {alphabet!r}, planted {planted}")


def test_train_bpe_merges_bytes_of_non_ascii_text(impl):
    # Accents, a dash and Chinese: every character here is two or three UTF-8 bytes, so merges over bytes differ
    # from merges over characters (code points, ord(c)) from the first one on.
    text = drawn_corpus(1515, "naïvé café–東京 ", 230, ("ïé", "東京", "é–"))
    expected = own_train(text, 18)
    merges = impl.train_bpe(text, 18)
    if expect_shape(merges, expected.shape, what="train_bpe(text, 18) on a corpus of accents, a dash and Chinese",
                    idea=TRAIN):
        expect_equal(np.asarray(merges).tolist(), expected.tolist(),
                     what="the merges, in order, of train_bpe(text, 18) on 'naïvé café–東京' drawn with seed 1515 "
                          "(e.g. 'é' is the bytes 195, 169 and '東' the bytes 230, 157, 177)",
                     idea=training_idea(merges, text, 18, TRAIN + "; the tokens are the text's UTF-8 bytes "
                                        "(text.encode('utf-8'), ids 0..255), never its characters (ord(c)): a "
                                        "character outside ASCII is two to four bytes"))


def test_fewer_merges_are_a_prefix_of_more(impl):
    text = drawn_corpus(1516, "rstu v", 260, ("vst", "uu"))
    few, many = impl.train_bpe(text, 7), impl.train_bpe(text, 21)
    if expect_shape(many, (21, 2), what="train_bpe(text, 21)", idea=TRAIN):
        absent = merges_absent_from(text, many)
        expect(not absent, what="the pieces the merges of train_bpe(text, 21) stand for", idea=TRAIN,
               expected="each one a piece of the text it was trained on",
               observed=f"{len(absent)} never occur in it, e.g. {absent[:3]}")
        expect_equal(np.asarray(few).tolist(), np.asarray(many)[:7].tolist(), idea=TRAIN,
                     what="train_bpe(text, 7) against the first 7 rows of train_bpe(text, 21): each step "
                          "depends only on the steps before it")


# --- encode --------------------------------------------------------------------------------------------------------

def test_encode_without_merges_gives_the_bytes(impl):
    require_ordered_merges(impl)
    none = np.zeros((0, 2), dtype=np.int64)
    for text in ("vessel", "12.5 mg/L", "é∑", ""):
        ids = impl.bpe_encode(text, none)
        if expect_array(ids, what=f"bpe_encode({text!r}, no merges)", idea=BYTES):
            expect_equal(np.asarray(ids).tolist(), list(text.encode("utf-8")), idea=BYTES,
                         what=f"bpe_encode({text!r}, no merges): its UTF-8 bytes")
            # The empty text too: np.array([]) alone is float64, ids are int64 whatever their number.
            expect_dtype(ids, np.int64, what=f"the dtype of bpe_encode({text!r}, no merges)",
                         idea=BYTES + "; ids are int64 even when there are none: np.array(ids, dtype=np.int64)")


def test_encode_applies_the_merges_in_their_learned_order(impl):
    # merges: 256 = (b, c), 257 = (a, b), 258 = (ab, c). In order, "abc" is [a, bc]: (b, c) acts first and no
    # (a, b) is left, so 258 never applies; a greedy longest match would give [abc]. Then merges ab = 256 and
    # bc = 257 on "abcbcbc": ab first gives [ab, c, bc, bc]; merging the pair most frequent in the text (bc)
    # first would give [a, bc, bc, bc]. Worked by hand.
    # The last case (cd = 256, bc = 257, a(bc) = 258 on "abcd") tells a greedy longest match ([abc, d]) from
    # tiktoken's merges by byte rank ([a, b, cd], as the learned order): a convention is named only when it
    # gives every encoding of the test.
    require_ordered_merges(impl)
    merges = np.array([[98, 99], [97, 98], [257, 99]])
    label = "merges bc=256, ab=257, (ab)c=258"
    cases = [(text, merges, label, expected) for text, expected in (("abc", [97, 256]), ("abcbc", [97, 256, 256]),
                                                                     ("bcab", [256, 257]))]
    cases.append(("abcd", np.array([[99, 100], [98, 99], [97, 257]]), "merges cd=256, bc=257, a(bc)=258",
                  [97, 98, 256]))
    encoded = [(impl.bpe_encode(text, case_merges), text, case_merges) for text, case_merges, _, _ in cases]
    for (text, case_merges, case_label, expected), (ids, _, _) in zip(cases, encoded, strict=True):
        expect_equal(np.asarray(ids).tolist(), expected, what=f"bpe_encode({text!r}, {case_label})",
                     idea=encoding_idea(ids, text, case_merges, ORDER, others=tuple(encoded)))
    merges = np.array([[97, 98], [98, 99]])  # ab first, then bc
    expect_equal(np.asarray(impl.bpe_encode("abcbcbc", merges)).tolist(), [256, 99, 257, 257], idea=ORDER,
                 what="bpe_encode('abcbcbc', merges ab=256 then bc=257): ab first, though bc is the more frequent in "
                      "this text")


def test_encode_handles_overlapping_runs(impl):
    require_ordered_merges(impl)
    merges = np.array([[97, 97]])
    for text, expected in (("aaa", [256, 97]), ("aaaa", [256, 256]), ("baaaaab", [98, 256, 256, 97, 98])):
        ids = impl.bpe_encode(text, merges)
        expect_equal(np.asarray(ids).tolist(), expected, idea=encoding_idea(ids, text, merges, OVERLAP),
                     what=f"bpe_encode({text!r}, merge (a, a) = 256)")


def test_encode_matches_the_tests_own_encoder(impl):
    require_ordered_merges(impl)
    corpus = drawn_corpus(1517, "abcd ", 300, ("cab", "dd", "bad"))
    merges = own_train(corpus, 24)
    for seed in (1518, 1519):
        text = drawn_corpus(seed, "abcde ", 90, ("cab", "bad"))  # new text, with an 'e' the corpus never had
        ids = impl.bpe_encode(text, merges)
        if expect_array(ids, what="bpe_encode(text, merges) of a new text", idea=ORDER):
            expect_equal(np.asarray(ids).tolist(), own_encode(text, merges),
                         idea=encoding_idea(ids, text, merges, ORDER),
                         what=f"encode of a new text of {len(text)} letters, {text[:20]!r}..., with merges "
                              f"of the test's own training (seed {seed})")


def test_more_merges_never_lengthen_a_sequence(impl):
    require_ordered_merges(impl)
    corpus = drawn_corpus(1520, "klmn ", 260, ("mk", "nnl"))
    merges = own_train(corpus, 20)
    text = drawn_corpus(1521, "klmn ", 80, ("mk",))
    encodings = [np.asarray(impl.bpe_encode(text, merges[:k])) for k in range(0, 21, 4)]
    lengths = [len(ids) for ids in encodings]
    expect(all(a >= b for a, b in pairwise(lengths)), idea=ORDER,
           what="len(bpe_encode(text, merges[:k])) for k = 0, 4, ..., 20", expected="never growing with k",
           observed=str(lengths))
    expect_equal(lengths, [len(own_encode(text, merges[:k])) for k in range(0, 21, 4)], idea=ORDER,
                 what="len(bpe_encode(text, merges[:k])) for k = 0, 4, ..., 20")
    # The ids too: ids of the right count and other values (zeros, the ids reversed) keep every length ("no points
    # without the idea"); with no merge they are the text's bytes. (Said only once the lengths are right.)
    if not recorded_so_far():
        expect_equal(encodings[0].tolist(), list(text.encode("utf-8")), idea=BYTES,
                     what="bpe_encode(text, merges[:0]) (no merges), whose lengths above are right: its UTF-8 bytes")


# --- decode --------------------------------------------------------------------------------------------------------

def test_decode_reads_ids_the_test_built(impl):
    # The ids come from the test's own encoder, never from your encode: decode must rebuild the bytes from merges.
    merges = own_train("the vessel, the sensor, the vessel's sensor, the sensors", 14)
    for text in ("sensor", "the vessel", "vessels and sensors!", "tv"):
        expect_equal(impl.bpe_decode(own_encode(text, merges), merges), text, idea=DECODE,
                     what=f"decode of the test's own encoding of {text!r}")
    expect_equal(impl.bpe_decode(np.array([], dtype=np.int64), merges), "", idea=DECODE, what="decode of no ids")


def test_decode_joins_bytes_before_reading_utf8(impl):
    # "é" is the bytes c3 a9, "🚢" four bytes: merges learned on one text split them differently in another.
    merges = own_train("café café naïve ∑∑ 🚢 🚢 é", 12)
    for text in ("é", "naïve café", "∑ 🚢é", "aé∑🚢"):
        ids = own_encode(text, merges)
        expect_equal(impl.bpe_decode(ids, merges), text, idea=DECODE,
                     what=f"decode of the test's own ids of {text!r}: {ids}")
    # Ids a model made up need not be valid UTF-8: each broken sequence reads as one replacement character.
    for ids, text in (([0xC3], "\ufffd"), ([97, 0xFF, 98], "a\ufffdb"), ([97, 0xE2, 0x88], "a\ufffd")):
        expect_equal(impl.bpe_decode(np.array(ids), merges), text, idea=INVALID,
                     what=f"decode of the bytes {bytes(ids)!r}, which are not valid UTF-8")


def test_decode_inverts_encode(impl):
    require_ordered_merges(impl)
    merges = own_train(drawn_corpus(1522, "aéb ∑", 200, ("é∑", "bb")), 16)
    texts = ("aéb∑", "", "Ωmega 12.5 mg/L", drawn_corpus(1523, "aéb ∑🚢", 40, ()))
    encoded = [np.asarray(impl.bpe_encode(text, merges)) for text in texts]
    for text, ids in zip(texts, encoded, strict=True):
        expect_equal(impl.bpe_decode(ids, merges), text, idea=DECODE, what=f"bpe_decode(bpe_encode({text!r}))")
    # Two encodings one after the other decode to the two texts one after the other (ids, not a memory of texts).
    joined = np.concatenate([encoded[3], encoded[0], encoded[2]]).astype(np.int64)
    expect_equal(impl.bpe_decode(joined, merges), texts[3] + texts[0] + texts[2], idea=DECODE,
                 what="decode of three encodings joined end to end")


# --- token_pieces, the identifier, sequence_lengths ---------------------------------------------------------------

def test_token_pieces_join_to_the_text(impl):
    require_ordered_pieces(impl)
    merges = own_train(drawn_corpus(1524, "ghij ", 200, ("hig",)), 12)
    for text in ("high jig", "héj"):
        pieces = impl.token_pieces(text, merges)
        vocab = own_vocab(merges)
        expect_equal(list(pieces), [vocab[i] for i in own_encode(text, merges)], idea=PIECES,
                     what=f"token_pieces({text!r}): the bytes of each token of the test's own encoding")


def test_an_identifier_splits_into_more_pieces_than_a_common_word(impl):
    require_ordered_pieces(impl)
    text, merges = corpus_merges(1525, 120)
    words = {word: impl.token_pieces(word, merges) for word in ("vessel", "sensor", "XK-9931-B", "12.5 mg/L")}
    vocab = own_vocab(merges)
    for word, pieces in words.items():
        expect_equal(list(pieces), [vocab[i] for i in own_encode(word, merges)], idea=PIECES,
                     what=f"token_pieces({word!r}) with 120 merges trained (by the test) on 40 of the corpus's "
                          f"sentences")
    counts = {word: len(pieces) for word, pieces in words.items()}
    expect(counts["XK-9931-B"] >= 3 * max(counts["vessel"], counts["sensor"]), idea=RARE,
           what="how many pieces 'XK-9931-B' and the corpus's common words 'vessel', 'sensor' become",
           expected="the identifier at least 3 times as many as either word", observed=str(counts))


def _encode_first(texts: list[str], merges: np.ndarray, sizes: list[int], yours: list[list[int]],
                  lengths: np.ndarray) -> str:
    """The revisit's note when the lengths differ from your encode's because your encode is the one that is wrong.

    Nothing to say (and nothing computed) when ``lengths`` are your encode's: the check passes.
    """
    if np.asarray(lengths).tolist() == yours:
        return ""
    right = [[len(own_encode(text, merges[:size - 256])) for text in texts] for size in sizes]
    if yours == right:
        return ""
    return ("; fix bpe_encode first: on these texts its pieces are not the test's encoder's (its own tests say how), "
            f"and your encode's lengths are {yours} where the test's are {right}")


def test_sequence_lengths_are_those_of_your_encode(impl):
    require_ordered_merges(impl)
    corpus = drawn_corpus(1526, "wxyz ", 220, ("zxw", "yy"))
    merges = own_train(corpus, 18)
    texts = [corpus[:70], drawn_corpus(1527, "wxyz ", 50, ("zxw",)), "", "é"]
    sizes = [256, 261, 265, 274]
    lengths = impl.sequence_lengths(texts, merges, sizes)
    if not expect_shape(lengths, (4, 4), what="sequence_lengths of 4 texts for 4 vocabulary sizes", idea=LENGTHS):
        return
    expect_dtype(lengths, np.int64, what="sequence_lengths of 4 texts for 4 vocabulary sizes",
                 idea=f"{LENGTHS}; lengths are counts, int64 (np.zeros's default is float64: give dtype=np.int64)")
    yours = [[len(np.asarray(impl.bpe_encode(text, merges[:size - 256]))) for text in texts] for size in sizes]
    expect_equal(np.asarray(lengths).tolist(), yours,
                 idea=LENGTHS + _encode_first(texts, merges, sizes, yours, lengths),
                 what="sequence_lengths(texts, merges, [256, 261, 265, 274]) against len(bpe_encode(text, "
                      "merges[:V - 256])), your own encode")
    expect_equal(np.asarray(lengths)[0].tolist(), [len(text.encode("utf-8")) for text in texts], idea=LENGTHS,
                 what="sequence_lengths at V = 256 (no merge): the number of bytes")
    # The same texts and sizes with other merges: the lengths are those merges' (a result kept from an earlier call
    # for the same texts, whatever the merges, passed every call above; a blind round).
    other = own_train(drawn_corpus(1528, "wxyz ", 220, ("wyx", "zz")), 18)
    lengths = impl.sequence_lengths(texts, other, sizes)
    if expect_shape(lengths, (4, 4), what="sequence_lengths of the same 4 texts with other merges", idea=LENGTHS):
        yours = [[len(np.asarray(impl.bpe_encode(text, other[:size - 256]))) for text in texts] for size in sizes]
        expect_equal(np.asarray(lengths).tolist(), yours,
                     idea=LENGTHS + "; the lengths follow the merges given to this call",
                     what="sequence_lengths(the same texts, other merges, [256, 261, 265, 274]) against "
                          "len(bpe_encode(text, merges[:V - 256])) with those merges, your own encode")
    # Merges bc, ab, (ab)c: in order "abc" stays [a, bc] (no (a, b) is left for 258), where the longest piece
    # of the vocabulary at each place would give [abc]; the lengths are your encode's, not a vocabulary's.
    merges = np.array([[98, 99], [97, 98], [257, 99]])
    texts, sizes = ["abc", "abcabc"], [256, 257, 258, 259]
    lengths = impl.sequence_lengths(texts, merges, sizes)
    if expect_shape(lengths, (4, 2), what="sequence_lengths of 2 texts for 4 vocabulary sizes", idea=LENGTHS):
        yours = [[len(np.asarray(impl.bpe_encode(text, merges[:size - 256]))) for text in texts] for size in sizes]
        expect_equal(np.asarray(lengths).tolist(), yours,
                     idea=LENGTHS + _encode_first(texts, merges, sizes, yours, lengths),
                     what="sequence_lengths(['abc', 'abcabc'], merges bc, ab, (ab)c, [256, 257, 258, 259]) against "
                          "len(bpe_encode(text, merges[:V - 256])), your own encode")


def test_attention_cost_grows_with_the_square_of_the_length(impl):
    formula = True  # whether the counts are right at ordinary sizes: only then is a wrong large one an overflow
    for n, d, itemsize in ((10, 4, 8), (37, 5, 4), (1000, 64, 8)):
        mults = n * n * d  # Q K^T: one multiply (and one add) per (query, key, feature)
        formula &= expect_equal(tuple(impl.attention_cost(n, d, itemsize=itemsize)),
                                (2 * mults + 2 * mults, n * n * itemsize), idea=COST,
                                what=f"attention_cost({n}, {d}, itemsize={itemsize}): (operations, score bytes)")
    small, large = impl.attention_cost(300, 16), impl.attention_cost(600, 16)
    expect(large[0] == 4 * small[0] and large[1] == 4 * small[1], idea=COST,
           what="attention_cost(600, 16) against attention_cost(300, 16)", expected="4 times both",
           observed=f"{large} against {small}")
    # A million tokens of width 10 million: 4e19 operations, past numpy's int64 (9.2e18); Python's ints are exact.
    n, d = 10**6, 10**7
    big = call_or_explain(impl.attention_cost, n, d, idea=EXACT, what=f"attention_cost({n}, {d})")
    if expect(isinstance(big, tuple) and len(big) == 2 and all(type(count) is int for count in big), idea=EXACT,
              what=f"attention_cost({n}, {d})", expected="a tuple of two Python ints",
              observed=f"{type(big).__name__} of {', '.join(type(count).__name__ for count in big)}"
              if isinstance(big, tuple) else type(big).__name__):
        expect(big == (4 * n * n * d, n * n * 8), idea=EXACT if formula else COST,
               what=f"attention_cost({n}, {d}): (operations, bytes)",
               expected=str((4 * n * n * d, n * n * 8)), observed=str(big))


def test_bad_input_is_rejected(impl):
    for name, what in (("train_bpe/a_negative_number_of_merges", "train_bpe('abab', -1)"),
                       ("train_bpe/bytes_instead_of_text", "train_bpe(b'abab', 2), bytes instead of a str"),
                       ("bpe_encode/a_merge_of_an_id_not_yet_made", "encode with merge 1 = (300, 99): id 300 is not "
                                                                "made yet"),
                       ("bpe_decode/an_id_beyond_the_vocabulary", "decode of id 300 with one merge (ids 0..256)"),
                       ("sequence_lengths/a_vocabulary_larger_than_the_merges",
                        "sequence_lengths at V = 300 with one merge"),
                       ("attention_cost/an_empty_sequence", "attention_cost(0, 4)")):
        expect_probe(impl, name, what=what, idea=CHECKS)
    expect_raises_value_error(lambda: impl.bpe_encode("abc", np.array([97, 98, 99])), argument="merges", idea=CHECKS,
                              what="encode with merges of shape (3,), not (k, 2)")


def test_reference_values(impl):
    require_ordered_merges(impl)
    for name, what, idea in (("train_bpe/a_drawn_corpus", "train_bpe on a fixed corpus", TRAIN),
                             ("train_bpe/a_run_of_one_letter", "train_bpe('aaaaaaab aaaaab', 5)", OVERLAP),
                             ("train_bpe/pairs_that_tie", "train_bpe of pairs that tie", TIES),
                             ("bpe_encode/merges_whose_order_matters", "encode with merges whose order matters", ORDER),
                             ("bpe_encode/order_against_frequency_in_the_text",
                              "bpe_encode('abcbcbc') with merges ab, then bc", ORDER),
                             ("bpe_encode/text_with_accents", "encode of a text with accents", ORDER),
                             ("bpe_encode/a_token_its_merges_never_make",
                              "bpe_encode('abcd') with merges bc, (bc)d, ab", ORDER),
                             ("sequence_lengths/two_texts_three_sizes", "sequence_lengths of two texts", LENGTHS),
                             ("attention_cost/a_small_head", "attention_cost(37, 5, itemsize=4)", COST)):
        expect_probe(impl, name, what=what, idea=idea, rtol=0, atol=0)
    # And on inputs that are no probe's: the golden values of the fixed inputs above do not hold their answer.
    text = drawn_corpus(1528, "efgh ", 160, ("hef",))
    merges = own_train(text, 9)
    lookup = "; the result must be computed from the arguments (an answer looked up for known inputs fits no other)"
    expect_equal(np.asarray(impl.train_bpe(text, 9)).tolist(), merges.tolist(), idea=TRAIN + lookup,
                 what="train_bpe on a corpus that is no probe's")
    expect_equal(np.asarray(impl.bpe_encode(text[:50], merges)).tolist(), own_encode(text[:50], merges),
                 idea=ORDER + lookup, what="bpe_encode of a text that is no probe's")
    expect_equal(np.asarray(impl.sequence_lengths([text[50:]], merges, [256, 265])).tolist(),
                 [[len(own_encode(text[50:], merges[:k]))] for k in (0, 9)], idea=LENGTHS + lookup,
                 what="sequence_lengths of a text that is no probe's")
    expect_equal(tuple(impl.attention_cost(29, 7, itemsize=2)), (4 * 29 * 29 * 7, 2 * 29 * 29), idea=COST + lookup,
                 what="attention_cost(29, 7, itemsize=2)")


# --- inputs no table holds (tests/unseen.py): each function asked once more on a text drawn for the submission ---

# Not remembered (kept_values): each submission's draws are its own, and would only fill the student's cache.
_own_train_once = own_train.__wrapped__


def _unseen_text(rng: np.random.Generator) -> str:
    """A text of a few letters and spaces, two strings of them planted often (so that merges have pairs to find)."""
    letters = list(rng.choice(list("abcdefgh"), size=4, replace=False)) + [" "]
    words = ["".join(rng.choice(letters[:4], size=int(rng.integers(2, 4)))) for _ in range(2)]
    return drawn_corpus(int(rng.integers(2**31)), "".join(letters), int(rng.integers(90, 140)), tuple(words))


def _unseen_merges(rng: np.random.Generator) -> tuple[str, np.ndarray]:
    text = _unseen_text(rng)
    return text, _own_train_once(text, int(rng.integers(4, 12)))


def _unseen_encoded(rng: np.random.Generator) -> tuple[list[int], np.ndarray]:
    text, merges = _unseen_merges(rng)
    return own_encode(text, merges), merges


def _unseen_lengths(rng: np.random.Generator) -> tuple[tuple, dict]:
    text, merges = _unseen_merges(rng)
    return ([text[:40], text[40:]], merges, [256, 256 + len(merges) // 2, 256 + len(merges)]), {}


def _moved_sizes(call: tuple[tuple, dict], factor: float) -> tuple[tuple[tuple, dict], bool]:
    """attention_cost's call at other sizes: ``n`` and ``d`` each a few larger (drawn from ``factor``), still unequal.

    The item size stays (2, 4 or 8: a float's width). A formula of the sizes answers them too; a table kept for
    the sizes a test asks does not.
    """
    args, kwargs = call
    if len(args) not in (2, 3) or not all(isinstance(size, int) and not isinstance(size, bool) and size >= 0
                                          for size in args[:2]):
        return call, False
    rng = np.random.default_rng([moves.SEED, int(factor * 2**40), 7])
    n, d = (size + int(rng.integers(1, 6)) for size in args[:2])
    return ((n, d + 1 if d == n else d, *args[2:]), kwargs), True


_moved_sizes.how = "its sizes n and d each a few larger"

unseen.register("tokenization", {
    "train_bpe": unseen.Twin(lambda rng: ((_unseen_text(rng), int(rng.integers(4, 12))), {}),
                             _own_train_once, TRAIN, move=moves.relabeled_letters),
    "bpe_encode": unseen.Twin(lambda rng: (_unseen_merges(rng), {}),
                              lambda text, merges: np.array(own_encode(text, merges), dtype=np.int64), ORDER,
                              move=moves.relabeled_letters),
    "bpe_decode": unseen.Twin(lambda rng: (_unseen_encoded(rng), {}),
                              lambda ids, merges: b"".join(own_vocab(merges)[i] for i in ids).decode(
                                  "utf-8", errors="replace"), DECODE),
    "token_pieces": unseen.Twin(lambda rng: (_unseen_merges(rng), {}),
                                lambda text, merges: [own_vocab(merges)[i] for i in own_encode(text, merges)], PIECES,
                                move=moves.relabeled_letters),
    "sequence_lengths": unseen.Twin(_unseen_lengths, lambda texts, merges, sizes: np.array(
        [[len(own_encode(text, merges[:size - 256])) for text in texts] for size in sizes], dtype=np.int64), LENGTHS),
    "attention_cost": unseen.Twin(
        lambda rng: ((int(rng.integers(2, 5000)), int(rng.integers(1, 600))), {"itemsize": int(rng.choice([2, 4, 8]))}),
        lambda n, d, itemsize: (4 * n * n * d, n * n * itemsize), COST, move=_moved_sizes),
})
