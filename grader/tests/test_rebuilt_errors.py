"""A student's exception of a builtin type that takes more than a message comes back as what it is: the student's.

The worker sends an exception as its type, builtin bases and message; the grading side rebuilds it by calling the
builtin with the message. ``UnicodeDecodeError`` (what ``bytes.decode`` raises on a bad byte) and
``UnicodeEncodeError`` take five arguments and ``ExceptionGroup`` two, so the rebuild itself raised ``TypeError:
function takes exactly 5 arguments (1 given)``: a test's ``except ValueError`` (``expect_raises_value_error``)
caught it in the student's own run and not when graded, the student's message was lost, and the error was not
marked as the student's. Such an error now comes back as its nearest ancestor that takes a message (a
``UnicodeError``: still a ``ValueError``), with its name and message.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from grader.sandbox import codec
from grader.sandbox.proxy import IsolatedImplementation, Limits
from grader.tests.test_trust import copy_reference


def _sent(error: BaseException) -> dict:
    try:
        raise error
    except BaseException as raised:  # noqa: BLE001 - described as the worker describes it
        return codec.exception_info(raised)


@pytest.mark.parametrize("error", [
    UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
    UnicodeEncodeError("utf-8", "\udcff", 0, 1, "surrogates not allowed"),
    UnicodeTranslateError("\udcff", 0, 1, "no translation"),
])
def test_a_unicode_error_comes_back_as_a_value_error_with_its_message(error: BaseException) -> None:
    rebuilt = codec.rebuild_exception(_sent(error))
    assert isinstance(rebuilt, ValueError) and isinstance(rebuilt, UnicodeError)
    assert type(rebuilt).__name__ == type(error).__name__ and str(error) in str(rebuilt)
    assert rebuilt.attention_kit_student is True


def test_an_exception_group_comes_back_as_the_students_exception() -> None:
    rebuilt = codec.rebuild_exception(_sent(ExceptionGroup("two mistakes", [ValueError("a"), KeyError("b")])))
    assert isinstance(rebuilt, Exception) and type(rebuilt).__name__ == "ExceptionGroup"
    assert "two mistakes" in str(rebuilt) and rebuilt.attention_kit_student is True


def test_a_bad_byte_in_the_students_code_is_a_value_error_when_graded(tmp_path: Path) -> None:
    folder = copy_reference(tmp_path / "student",
                            softmax="def softmax(x, axis=-1):\n    return b'\\xff'.decode('utf-8')\n")
    impl = IsolatedImplementation(folder, limits=Limits(call_timeout=5))
    try:
        with pytest.raises(ValueError, match="invalid start byte"):  # as in the student's own run
            impl.function("softmax", "softmax")(np.zeros(2))
    finally:
        impl.close()


def test_numpys_complex_warning_is_a_runtime_warning_when_graded(tmp_path: Path) -> None:
    """The warnings a call raised are raised again on the grading side by category name; a category of numpy's own
    (ComplexWarning, a RuntimeWarning) came back as a UserWarning, so a test's "no RuntimeWarning" check
    (``tests.feedback.call_expecting_no_warning``) failed it in the student's own run and passed it when graded."""
    import warnings

    folder = copy_reference(tmp_path / "student", softmax=(
        "import numpy as _np\n"
        "def softmax(x, axis=-1):\n"
        "    return _np.asarray(_np.asarray(x) + 0j, dtype=float)  # ComplexWarning: discards the imaginary part\n"))
    impl = IsolatedImplementation(folder, limits=Limits(call_timeout=5))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            impl.function("softmax", "softmax")(np.zeros(2))
    finally:
        impl.close()
    assert any(issubclass(item.category, RuntimeWarning) for item in caught), [item.category for item in caught]


def test_a_bytearray_result_arrives_as_in_the_students_own_run(tmp_path: Path) -> None:
    """A piece of text as a bytearray equals the bytes it holds in the student's run: graded, the same (it was
    refused there, "a value the grader cannot receive", and the test failed only when graded)."""
    from tests.kit import LocalImplementation

    folder = copy_reference(tmp_path / "student", tokenization=(
        "_token_pieces = token_pieces\n\n\n"
        "def token_pieces(text, merges):\n"
        "    return [bytearray(piece) for piece in _token_pieces(text, merges)]\n"))
    merges = np.array([[116, 104]], dtype=np.int64)  # "t" + "h"
    arrays: list = []
    assert codec.decode(codec.encode([bytearray(b"th"), b"e"], arrays), arrays) == [bytearray(b"th"), b"e"]
    local = LocalImplementation(folder).function("tokenization", "token_pieces")("the", merges)
    impl = IsolatedImplementation(folder, limits=Limits(call_timeout=5))
    try:
        graded = impl.function("tokenization", "token_pieces")("the", merges)
    finally:
        impl.close()
    assert graded == local == [b"th", b"e"]
    assert [type(piece) for piece in graded] == [type(piece) for piece in local] == [bytearray, bytearray]
