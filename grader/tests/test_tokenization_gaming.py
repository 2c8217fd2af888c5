"""No score without the idea, exercise 15: each cheat scores what its control scores (see test_gaming.py).

A cheat is the reference with a shortcut swapped in (``grader/tests/cheats.py``'s ``plant``): merges stored
for the shipped corpus whatever text is given, a decode that remembers what encode saw, lengths made up from
the vocabulary size, the probes' golden values looked up. Its control is the same submission with the
shortcut's work left undone. Both run the exercise's graded files, public and hidden; no more passing tests
than the control, file by file, is no more points.
"""

from __future__ import annotations

import pytest

from grader.tests.cheats import Cheat, assert_no_more_than_its_control, golden_lookup

FILES = ("tests/test_15_tokenization.py", "grader/hidden_tests/test_hidden_15_tokenization.py")
UNDONE = "raise NotImplementedError('the shortcut left out (the control)')"
FUNCTIONS = ("train_bpe", "bpe_encode", "bpe_decode", "token_pieces", "sequence_lengths", "attention_cost")

# train_bpe returns merges learned once on the shipped corpus ("pre-trained"), whatever text it is given.
_STORED_MERGES = '''
import functools as _functools

from ._tokenization_corpus import CORPUS as _CORPUS

_real_train_bpe = train_bpe


@_functools.cache
def _stored():
    {body}


def train_bpe(text, n_merges):
    _check_text("text", text)
    n_merges = _check_count("n_merges", n_merges)
    return _stored()[:n_merges].copy()
'''

# encode remembers its texts; decode looks the ids up instead of rebuilding the bytes from the merges.
_REMEMBERING_DECODE = '''
_seen = {{}}
_real_encode = bpe_encode


def bpe_encode(text, merges):
    ids = _real_encode(text, merges)
    _seen[tuple(ids.tolist())] = text
    return ids


def bpe_decode(ids, merges):
    _check_merges(merges)
    key = tuple(np.asarray(ids, dtype=np.int64).reshape(-1).tolist())
    {body}
'''

# sequence_lengths made up from the vocabulary size: bytes * 256 / V, never encoding anything.
_MADE_UP_LENGTHS = '''
def sequence_lengths(texts, merges, vocab_sizes):
    merges = _check_merges(merges)
    sizes = [int(size) for size in np.asarray(vocab_sizes).reshape(-1)]
    if any(not 256 <= size <= 256 + len(merges) for size in sizes):
        raise ValueError(f"vocab_sizes must lie in 256..{{256 + len(merges)}}, got {{sizes}}")
    n_bytes = np.array([len(_check_text("texts", t).encode("utf-8")) for t in texts])
    {body}
'''

CHEATS = (
    Cheat("tokenization-stored-merges", "tokenization",
          {"tokenization": _STORED_MERGES.format(body="return _real_train_bpe(_CORPUS, 400)")},
          {"tokenization": _STORED_MERGES.format(body=UNDONE)}, FILES),
    Cheat("tokenization-decode-remembers-encode", "tokenization",
          {"tokenization": _REMEMBERING_DECODE.format(body='return _seen.get(key, "")')},
          {"tokenization": _REMEMBERING_DECODE.format(body=UNDONE)}, FILES),
    Cheat("tokenization-made-up-lengths", "tokenization",
          {"tokenization": _MADE_UP_LENGTHS.format(
              body="return np.array([np.round(n_bytes * 256 / size) for size in sizes], dtype=np.int64)")},
          {"tokenization": _MADE_UP_LENGTHS.format(body=UNDONE)}, FILES),
    # Every function answers the probes' fixed inputs with their golden values (shipped with the tests).
    Cheat("tokenization-golden-lookup", "tokenization", golden_lookup("tokenization", FUNCTIONS),
          {"tokenization": "\n".join(f"def {name}(*args, **kwargs):\n    {UNDONE}\n" for name in FUNCTIONS)},
          FILES),
)




@pytest.mark.parametrize("cheat", CHEATS, ids=lambda c: c.name)
def test_a_tokenization_cheat_scores_what_its_control_scores(cheat: Cheat, tmp_path):
    assert_no_more_than_its_control(cheat, tmp_path, FILES)
