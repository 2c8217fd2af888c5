"""Inputs no table can hold: every registered function is also asked on an input drawn for the submission.

The tests' inputs are seeded, so the same on every run (the same feedback). That
also makes them known: a module that answers from a table of them (recorded from
the answers a failing run prints, or from another student's run) passes the tests
without computing anything. A hostile round did so for four Part III exercises
(24/24 against 0 for its control). So each function an exercise's test file
registers (:func:`register`, a :class:`Twin` per function: how to draw its
arguments, the test file's own answer, how to compare) is asked once per session,
at the end of the first test that calls it and passes its own checks
(``tests.kit.Kit.ask_unseen``), if it is right on every probe of it (the fixed
inputs whose answers the kit keeps: a known mistake is wrong on one, and keeps
its own messages and partial points), on an input of the kind the tests use drawn from
the submission's salt (``tests.effort.submission_salt``: the bytes of every
graded file, so a table written into a file moves the input). Wrong there (or a
crash), every test that calls the function and passes otherwise fails with what
was drawn, expected and observed. A test whose own checks fail says its own
message first, and is not asked.

A function wrong on the drawn input and on a fixed input a test asks is a mistake,
whose tests say how, if it is a rule: the inputs it does answer (this test's own
calls, the probes a test asks), moved within what the docstring allows (every float
scaled by a factor drawn from the salt, or the twin's own ``move``), it answers too.
A table that keeps one answer wrong on purpose, to pass for a mistake, does not.

Right on the drawn input, a function is asked next the same input with one entry
changed (:func:`_near_copy`; twins whose inputs move as plain floats): an answer
kept from the call before under a key that misses that entry (the shapes, a first
entry) answers it stale. Wrong on an input it was asked, it is asked that input
again first thing, its modules imported afresh (graded, a fresh worker): right
then, it keeps something between calls, and is told so, with the functions the
call went through.

A function that computes its answers passes; one that looks them up fails, and
scores what the same submission without the table scores.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import io
import warnings
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from tests.crash import raising_everything
from tests.effort import message, submission_salt
from tests.failures import Failure
from tests.moves import SEED, _special, relabeled_letters, reordered, scaled, scaled_numbers, tempered
from tests.reach import went_through


@dataclass(frozen=True)
class Twin:
    """How to ask one function on an input of its own.

    ``draw(rng)`` gives ``(args, kwargs)``; ``own(*args, **kwargs)`` the test file's own answer; ``same(observed,
    expected)`` whether they agree (exact by default, :func:`close` for floats); ``idea`` what to revisit;
    ``move(value, factor)`` an input moved within what the function's docstring allows (:func:`scaled` by
    default; :func:`tempered` for attention weights, whose rows must sum to 1).
    """

    draw: Callable[[np.random.Generator], tuple[tuple, dict]]
    own: Callable[..., Any]
    idea: str
    same: Callable[[Any, Any], bool] | None = None
    move: Callable[[Any, float], tuple[Any, bool]] | None = None  # how an input of its kind moves (:func:`scaled`)


class Undecided(Exception):  # noqa: N818 - not an error: the gate's answer "not yet"
    """The gate cannot tell yet: wrong on the drawn input, and none of the inputs it can ask again was answered.

    A mistake wrong everywhere, or a table wrong on this test's inputs. Not remembered: the gate asks again at the
    end of the next test of the function that passes, with that test's calls.
    """


_TWINS: dict[str, dict[str, Twin]] = {}  # exercise -> function -> its twin (registered by the public test file)
# How near a moved input's answer must be to the file's own (a factor of a few percent moves a lookup's far more).
MOVED_RTOL, MOVED_ATOL = 1e-3, 1e-6
FLOAT32_RTOL, FLOAT32_ATOL = 1e-5, 1e-6  # a float32 answer against the file's float64 one (its rounding)


def generator(rng: np.random.Generator) -> np.random.Generator:
    """A generator of its own, seeded from ``rng`` (a draw's argument for a function that draws from one)."""
    return np.random.default_rng(int(rng.integers(2**63)))


def sizes(rng: np.random.Generator, *ranges: tuple[int, int], avoid: tuple[int, ...] = ()) -> tuple[int, ...]:
    """One size from each ``[low, high)`` of ``ranges``, all different and none in ``avoid``: axes that never agree.

    Sizes drawn apart could agree on one submission's draw and not on another's, and a mistake that confuses two
    axes (a transpose, a reshape, a sum over the wrong one) then failed a test for some students and not for
    others with the same mistake (``attention-weights-transposed`` crashes only where ``n_q != n_k``).
    """
    taken: list[int] = []
    for low, high in ranges:
        free = [n for n in range(low, high) if n not in taken and n not in avoid]
        if not free:
            raise ValueError(f"no size in [{low}, {high}) differs from {[*taken, *avoid]}")
        taken.append(free[int(rng.integers(len(free)))])
    return tuple(taken)


def register(exercise: str, twins: dict[str, Twin]) -> None:
    """The twins of ``exercise``'s functions (called by its test file when it is imported)."""
    _TWINS[exercise] = twins


def twin(exercise: str, name: str) -> Twin | None:
    """The twin registered for ``name`` of ``exercise``, or None."""
    return _TWINS.get(exercise, {}).get(name)


# exercise -> function -> its sizes gate, ``require_...(impl) -> bool`` (registered by the public test file): for a
# function of integers only (causal_mask, sinusoidal_encoding, alibi_bias), which no move changes.
_SIZES_GATES: dict[str, dict[str, Callable[[Any], bool]]] = {}


def register_sizes_gates(exercise: str, gates: dict[str, Callable[[Any], bool]]) -> None:
    """The sizes gates of ``exercise``'s functions of integers only (an answer at a size drawn for the submission).

    Asked, besides the twins' gate, of such a function that raised where a test expected bad input
    (``tests.kit.Kit.ask_unseen``): a table of the tests' sizes raises on every other size, so raising on bad
    sizes earns a test of bad input only with an answer at a size no table holds. Any file's test of bad input,
    public or hidden, is asked so.
    """
    _SIZES_GATES[exercise] = gates


def sizes_gate(exercise: str, name: str) -> Callable[[Any], bool] | None:
    """The sizes gate registered for ``name`` of ``exercise``, or None."""
    return _SIZES_GATES.get(exercise, {}).get(name)


def equal(observed: Any, expected: Any) -> bool:
    """Exactly the expected value: arrays of the same shape and entries, lists entry by entry, or equal values."""
    if isinstance(expected, (list, tuple)) and not isinstance(observed, np.ndarray):
        return (isinstance(observed, (list, tuple)) and len(observed) == len(expected)
                and all(equal(a, b) for a, b in zip(observed, expected, strict=True)))
    if isinstance(expected, np.ndarray) or isinstance(observed, np.ndarray):
        try:
            got = np.asarray(observed)
            return got.shape == np.shape(expected) and bool(np.array_equal(got, np.asarray(expected)))
        except (TypeError, ValueError):
            return False
    try:
        result = observed == expected
    except Exception:  # noqa: BLE001 - an object that cannot be compared is not the answer
        return False
    return isinstance(result, (bool, np.bool_)) and bool(result)


def close(observed: Any, expected: Any) -> bool:
    """Within 1e-9 (relative) of the expected floats, entry by entry (tuples, lists and dicts of them too)."""
    if isinstance(expected, dict):
        return (isinstance(observed, dict) and set(expected) <= set(observed)  # keys of its own are the student's
                and all(close(observed[key], value) for key, value in expected.items()))
    if isinstance(expected, (list, tuple)):
        return (isinstance(observed, (list, tuple)) and len(observed) == len(expected)
                and all(close(a, b) for a, b in zip(observed, expected, strict=True)))
    try:
        got = np.asarray(observed, dtype=np.float64)
        want = np.asarray(expected, dtype=np.float64)
        return got.shape == want.shape and bool(np.allclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True))
    except (TypeError, ValueError):
        return False


def _short(value: Any) -> str:
    """A value as a failure shows it: arrays with 4 digits and a few entries, anything at most 200 characters."""
    if isinstance(value, np.ndarray):
        text = np.array2string(value, precision=4, threshold=12, edgeitems=2, separator=", ").replace("\n", "")
        text = " ".join(text.split())
    elif isinstance(value, (list, tuple)) and any(isinstance(item, np.ndarray) for item in value):
        text = "(" + ", ".join(_short(item) for item in value) + ")"
    else:
        text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


def _shown(args: tuple, kwargs: dict) -> str:
    """A call's arguments as a failure's line names them."""
    return ", ".join([*(_argument(a) for a in args), *(f"{k}={_argument(v)}" for k, v in kwargs.items())])


def _argument(value: Any) -> str:
    """An argument as the call's line names it: arrays and tables by their shapes, short values as they are."""
    if isinstance(value, np.ndarray):
        return f"array {value.shape}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key!r}: {_argument(item)}" for key, item in value.items()) + "}"
    if isinstance(value, np.random.Generator):
        return "rng"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def gate(kit: Any, exercise: str, name: str) -> list[Failure]:
    """Why ``name`` does not answer an input drawn for the submission (empty when it does)."""
    from tests.diagnosis import right_on_its_probes

    spec = twin(exercise, name)
    if spec is None:
        return []
    implementation = getattr(kit, "_implementation", kit)
    # Each function its own stream: a generator handed to one function (init_pooled's) tells nothing of another's.
    args, kwargs = spec.draw(np.random.default_rng([SEED, submission_salt(exercise), zlib.crc32(name.encode())]))
    expected = spec.own(*copy.deepcopy(args), **copy.deepcopy(kwargs))  # before the call (a generator it draws)
    pristine = copy.deepcopy((args, kwargs))  # to ask again as they were
    got, ok = _ask(kit, name, args, kwargs)
    # Right there within the tolerance the tests' fixed inputs are held to: a rounding of its own (an eps in a
    # denominator, float32 work) is the tests' own checks' to judge, never a sign of a table (a blind round: an eps of
    # 1e-8 in softmax was told it answers the tests' inputs only, on every test).
    if ok and _right(spec, got, expected):
        # Right on the drawn input; then the same input with one entry changed, asked next: an answer kept from
        # the call before, under a key that misses that entry (the shapes, a first entry), answers it stale (a blind
        # round: attention_scores caching by shape and first entry passed exercise 3's tests and this gate).
        near = _near_copy(spec, pristine, np.random.default_rng(
            [SEED, submission_salt(exercise), zlib.crc32(name.encode()), 2]))
        if near is None:
            return []
        try:
            expected = spec.own(*copy.deepcopy(near[0]), **copy.deepcopy(near[1]))
        except Exception:  # noqa: BLE001 - no answer of the file's own to that input: nothing to ask
            return []
        args, kwargs = copy.deepcopy(near)
        pristine = copy.deepcopy(near)
        got, ok = _ask(kit, name, args, kwargs)
        if ok and _right(spec, got, expected):
            return []
    # Code that keeps state could answer wrong on purpose once it has met an input it does not know (this one), so
    # that the calls below make it look like a mistake (a helper's round): graded, its worker is replaced first and
    # nothing it kept in memory survives (in a student's own run such code fools only its author).
    # Asked again first thing, nothing kept: right now, its wrong answer came from what earlier calls left (a
    # cache keyed on part of the input, a counter, a default list), which is no table and no rule of the input.
    if _forget(kit) and ok and not callable(got) and _right_asked_again(kit, name, spec, pristine, expected):
        return [message(f"{name}({_shown(args, kwargs)}), an input drawn for your submission, asked after the "
                        "tests' calls and again first thing", _short(expected), f"{_short(got)} after the "
                        "tests' calls; the expected answer when asked first",
                        f"{spec.idea}; {went_through(name, getattr(kit, '_reached', None))} answers the same input "
                        "differently after other calls: it keeps something between calls (a cache keyed on part of "
                        "the input, a counter, a default list or dict argument, a global) that changes its "
                        "answers; compute each answer from the call's own arguments")]
    if (not right_on_its_probes(implementation, exercise, name, asked_only=True)
            or _wrong_on_a_call(kit, exercise, name, spec)):
        # Wrong on an input a test gives it too (a fixed input a test asks, a call of this test): a mistake, which
        # the tests and the diagnosis say, if the inputs it answers are answered for what they are (a table can
        # leave one answer wrong on purpose).
        try:
            return _moved(kit, exercise, name, spec)
        except Undecided:
            if ok or not getattr(kit, "_answered", {}).get(name) or got.startswith(_OUT_OF_TIME):
                raise  # (a stub raises on every input, and a call out of time is its budget's: their tests say so)
            # It raised on the drawn input, answered a test's call (wrongly), and no input it answered right can be
            # moved: nothing shows that it answers anything but the tests' own inputs (a table wrong on one of them,
            # or a function that breaks on valid input). Raising on a valid input is its own failure: said as such.
            return [message(f"{name}({_shown(args, kwargs)}), an input drawn for your submission (of the kind the "
                            "tests use, valid per the docstring)", _short(expected), got,
                            f"your {name}() raised on this input, which its docstring allows: it must answer every "
                            "such input, not only the tests' own" + (
                                " (it is not finished)" if got.startswith("NotImplementedError") else
                                " (what does the line that raised assume about the sizes, the number of axes, the "
                                "dtype?)"))]
    # Right on every fixed input the tests ask and wrong here: whether it is also wrong on the fixed inputs only the
    # diagnosis asks (an answer looked up for the tests' inputs is), the tests' checks pass; this input says what.
    shown = _shown(args, kwargs)
    if right_on_its_probes(implementation, exercise, name):
        why = (f"your {name}() answers the tests' own inputs but not this one: compute the answer from the input, "
               "for any input")
    else:  # also wrong on fixed inputs no test asks: a mistake this test's own checks do not see, or a lookup
        why = (f"this test's own checks of your {name}() hold, but its answer to this input is not the test's: "
               "the idea above, on every input")
    return [message(f"{name}({shown}), an input drawn for your submission (of the kind the tests use, which no "
                    "table written beforehand holds)", _short(expected),
                    _short(got) if ok else got, f"{spec.idea}; {why}")]


def _near_copy(spec: Twin, call: tuple[tuple, dict], rng: np.random.Generator) -> tuple[tuple, dict] | None:
    """``call`` with one entry (not its first) of its first ordinary float array changed by 10 to 30%; None if none.

    Only for a twin whose inputs move as plain floats (no ``move`` of its own: weights whose rows sum to 1, letters,
    orders keep a structure that one entry changed would break).
    """
    if spec.move is not None:
        return None
    args, kwargs = copy.deepcopy(call)
    for value in (*args, *kwargs.values()):
        if isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.size > 1 and \
                value.flags.writeable and not _special(value) and bool(np.all(np.isfinite(value))):
            flat = value.reshape(-1)
            if not np.shares_memory(flat, value):
                continue
            index = 1 + int(rng.integers(value.size - 1))
            flat[index] = flat[index] * rng.uniform(1.1, 1.3) + (0.1 if flat[index] == 0 else 0.0)
            return args, kwargs
    return None


def _ask(kit: Any, name: str, args: tuple, kwargs: dict) -> tuple[Any, bool]:
    """``(answer, True)`` of ``kit.<name>(*args, **kwargs)``, or ``("Error: message", False)`` where it raised.

    A crash, NotImplementedError too, is an answer here (the gate says what it means).
    """
    try:
        with raising_everything():
            return getattr(kit, name)(*args, **kwargs), True
    except Exception as error:  # noqa: BLE001 - the function's answer to this input
        return f"{type(error).__name__}: {str(error)[:200]}", False


def _right_asked_again(kit: Any, name: str, spec: Twin, call: tuple[tuple, dict], expected: Any) -> bool:
    """Whether ``name`` answers ``call`` (copied) right when asked again now; a raise is no answer."""
    got, ok = _ask(kit, name, *copy.deepcopy(call))
    return ok and _right(spec, got, expected)


def _right(spec: Twin, got: Any, expected: Any) -> bool:
    """Whether ``got`` is the answer ``expected``: the twin's own comparison, or within the probes' tolerance."""
    return (spec.same or equal)(got, expected) or _within_the_probes_tolerance(got, expected)


def _forget(kit: Any) -> bool:
    """Make the implementation forget what earlier calls left (its modules imported afresh); False if it cannot.

    Graded, the worker is replaced; in a student's own run, the package's modules are imported again
    (``LocalImplementation.forget``).
    """
    forget = getattr(getattr(kit, "_implementation", kit), "forget", None)
    if not callable(forget):
        return False
    forget()
    return True


def _factor(exercise: str, name: str) -> float:
    """The factor of the moves of ``name``'s inputs, drawn from the submission's salt (a few percent)."""
    rng = np.random.default_rng([SEED, submission_salt(exercise), zlib.crc32(name.encode()), 1])
    return float(1 + rng.uniform(0.05, 0.2))


def _how(move: Callable[..., Any] | None) -> str:
    """How a move changes an input, for a message (with ``{:.4f}`` for the factor).

    A test file's own move says it in its attribute ``how``.
    """
    known = {tempered: "each weight in it to the power {:.4f}, its rows summing to 1 again",
             scaled_numbers: "every float and number in it times {:.4f}",
             relabeled_letters: "its letters renamed, in their order (in the texts and the merges alike)"}
    return known.get(move) or getattr(move, "how", "every float in it times {:.4f}")


REORDERED = "its items in another order (boolean arrays along their first axis, integer vectors, lists of texts)"


def moved_input(exercise: str, name: str, call: tuple[tuple, dict]) -> tuple[tuple[tuple, dict] | None, str]:
    """``call``'s arguments moved as ``name``'s twin moves them (:func:`scaled` without one), and how, for a message.

    Where no float moves, its items in another order (:func:`tests.moves.reordered`); ``(None, "")`` when nothing
    in them can move. For a function that raised where a test expected it to (``tests.kit``): on an input no table
    holds it must answer too.
    """
    spec = twin(exercise, name)
    move = spec.move if spec is not None else None
    factor = _factor(exercise, name)
    moved, changed = (move or scaled)(call, factor)
    if changed:
        return moved, " with " + _how(move).format(factor)
    moved, changed = reordered(call, factor)
    return (moved, " with " + REORDERED) if changed else (None, "")


def _moved(kit: Any, exercise: str, name: str, spec: Twin) -> list[Failure]:
    """Why ``name``, wrong on a test's input, is not right on the others as inputs (empty when it is).

    A mistake is a rule: an input it answers (a call of the test that asks the gate, whose answer was the test
    file's own; a fixed input a test asks), with every float array scaled by a factor drawn for the submission (a
    few percent: signs, zeros, infinities, orders, ties, shapes, integers and masks unchanged), it answers too. An
    answer kept for the input as the test gives it is not kept for that one. Inputs without floats (lengths, token
    ids, masks, a corpus) are moved by putting their items in an order drawn for the submission
    (``moves.reordered``), the texts of byte-pair encoding by renaming their letters in order
    (``moves.relabeled_letters``), and a twin's own ``move`` where it has one; inputs no move changes say nothing.
    """
    asked = False
    for case, args, kwargs in _answered(kit, exercise, name, spec):
        moved, how = moved_input(exercise, name, (args, kwargs))
        if moved is None:  # nothing in it that a move changes
            continue
        original = (args, kwargs)
        args, kwargs = moved
        expected = _own_of_call(spec, getattr(kit, "_implementation", kit), exercise, name, args, kwargs)
        if expected is _NO_ANSWER:
            continue
        asked = True
        _forget(kit)  # each moved input asked as a first call: what earlier calls left in a cache is no table's
        got, ok = _ask(kit, name, args, kwargs)
        # Near enough (a rounding of its own shows on one input and not another); a lookup misses by far more.
        if ok and ((spec.same or equal)(got, expected) or _within(got, expected, MOVED_RTOL, MOVED_ATOL)):
            continue
        if ok and _follows_the_move(got, expected, _own_of_call(spec, getattr(kit, "_implementation", kit), exercise,
                                                                   name, *original)):
            continue
        return [message(f"{name}({_shown(args, kwargs)}): {case}, which your {name}() answers,{how}",
                        _short(expected), _short(got) if ok else got,
                        # The fact, not a cause: a table misses the moved input, and so does a mistake that the
                        # test's input hid by chance (a blind round's ranks of a.astype(int), right where the values
                        # lay more than 1 apart, was told its answer did not follow from the input).
                        f"{spec.idea}; your {name}() answers that input as the test gives it but not the same input "
                        "moved: on other inputs its answers are not the idea's (the moved input above shows one); "
                        "every answer must come from the input by the idea, for any input")]
    if not asked:
        raise Undecided(name)
    return []


# How near the answer to a moved input must be to count as computed from it, when the answer changed with the move:
# a few times the move's own jitter (2% an entry). A mistake can agree with the reference on a test's input by the
# input's structure only (Pearson's correlation is Spearman's on evenly spaced values): moved, it answers as its rule
# gives, near the reference's and not on it. A table answers an input it does not know by raising, or with an answer
# it kept, unchanged by the move.
NEAR_RTOL = 0.05


def _follows_the_move(got: Any, expected: Any, before: Any) -> bool:
    """Whether ``got``, the answer to a moved input, is a rule's answer to it, not a kept one.

    It changed from ``before`` (the answer to the input as the test gave it) and lies near ``expected``, the test
    file's answer to the moved input (:data:`NEAR_RTOL` of its largest entry).
    """
    from tests.probes import as_arrays

    if before is _NO_ANSWER or _within(got, before, 1e-12, 0.0):
        return False
    try:
        scale = max((float(np.max(np.abs(a[np.isfinite(a)]))) for a in as_arrays(expected)
                     if a.dtype.kind in "fiu" and np.isfinite(a).any()), default=0.0)
    except (TypeError, ValueError):
        return False
    return _within(got, expected, NEAR_RTOL, NEAR_RTOL * scale)


_NO_ANSWER = object()
# A call stopped by its time budget (tests.kit, grader.sandbox.budget: TimeoutError and its subclasses), as the gate
# shows it: not a raise of the function's own.
_OUT_OF_TIME = ("TimeoutError", "BudgetExhausted")


def _own(spec: Twin, args: tuple, kwargs: dict) -> Any:
    """The test file's own answer to a call (copies of its arguments), or ``_NO_ANSWER`` if it has none."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            return spec.own(*copy.deepcopy(args), **copy.deepcopy(kwargs))
    except Exception:  # noqa: BLE001 - an input the test file's own answer does not take: no evidence
        return _NO_ANSWER


def _answered(kit: Any, exercise: str, name: str, spec: Twin) -> Iterator[tuple[str, tuple, dict]]:
    """The inputs ``name`` answered right: ``(what they are, args, kwargs)``.

    First the calls the tests made of it in this session whose answer was the test file's (``Kit._answered``,
    generators as they were given), then the fixed inputs of tests (probes) whose answer is the reference's.
    """
    from tests.diagnosis import asked_probes_answered
    from tests.probes import load_all_probes

    implementation = getattr(kit, "_implementation", kit)
    for args, kwargs, result in getattr(kit, "_answered", {}).get(name, []):
        expected = _own_of_call(spec, implementation, exercise, name, args, kwargs)
        if expected is not _NO_ANSWER and _right(spec, result, expected):
            yield "an input a test gave it", args, kwargs
    registry = load_all_probes()
    for probe_name in asked_probes_answered(implementation, exercise, name):
        args, kwargs = registry[probe_name].arguments()
        own = _own_of_call(spec, implementation, exercise, name, args, kwargs)
        if own is not _NO_ANSWER and _is_the_reference_s(probe_name, own):  # the test file's answer holds there
            yield f"the input of the tests' case {probe_name.split('/', 1)[-1]!r}", args, kwargs


def _wrong_on_a_call(kit: Any, exercise: str, name: str, spec: Twin) -> bool:
    """Whether a call the tests made of it in this session (``Kit._answered``) got an answer not the file's own."""
    implementation = getattr(kit, "_implementation", kit)
    for args, kwargs, result in getattr(kit, "_answered", {}).get(name, []):
        expected = _own_of_call(spec, implementation, exercise, name, args, kwargs)
        if expected is not _NO_ANSWER and not _right(spec, result, expected):
            return True
    return False


def _own_of_call(spec: Twin, implementation: Any, exercise: str, name: str, args: tuple, kwargs: dict) -> Any:
    """The test file's own answer to a call as it was made, else with its arguments in the API's order."""
    answer = _own(spec, args, kwargs)
    if answer is _NO_ANSWER:
        ordered = _in_order(implementation, exercise, name, args, kwargs)
        if ordered[1] != kwargs or len(ordered[0]) != len(args):
            answer = _own(spec, *ordered)
    return answer


def _in_order(implementation: Any, exercise: str, name: str, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """A call's arguments by position, defaults applied (the API's signature graded), as the file's answer takes them.

    The test file's answer names its parameters its own way and gives few defaults; the API's order is its order.
    The call as it is when the signature has other kinds of parameters (``*args``) or does not bind it.
    """
    try:
        signature = inspect.signature(implementation.function(exercise, name))
        if any(p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD for p in signature.parameters.values()):
            return args, kwargs
        bound = signature.bind(*args, **kwargs)
    except Exception:  # noqa: BLE001 - no signature, or one the call does not fit: the call as it is
        return args, kwargs
    bound.apply_defaults()
    return tuple(bound.arguments.values()), {}


def _is_the_reference_s(probe_name: str, answer: Any) -> bool:
    """Whether ``answer`` is the reference's answer to the probe (its golden value)."""
    from tests.diagnosis import _deviates
    from tests.probes import as_arrays

    try:
        return not _deviates(probe_name, as_arrays(answer))
    except (TypeError, ValueError):
        return False


def _within_the_probes_tolerance(got: Any, expected: Any) -> bool:
    """Whether two results are the same arrays within the tolerance a probe's answer is held to."""
    from tests.diagnosis import DIFFER_ATOL, DIFFER_RTOL

    return _within(got, expected, DIFFER_RTOL, DIFFER_ATOL)


def _within(got: Any, expected: Any, rtol: float, atol: float) -> bool:
    """Whether two results are the same arrays (count, shapes, dtypes) within ``rtol`` and ``atol``."""
    from tests.diagnosis import same_outputs
    from tests.probes import as_arrays

    try:
        observed, wanted = as_arrays(got), as_arrays(expected)
        if len(observed) != len(wanted):
            return False
        # A float32 answer (to float32 inputs, as the API asks) against the file's own float64 one: compared in
        # float32, held to its rounding (an honest float32 call was otherwise no evidence, and a table's was none).
        single = [a.dtype == np.float32 and b.dtype == np.float64 and a.shape == b.shape
                  for a, b in zip(observed, wanted, strict=True)]
        if any(single):
            wanted = tuple(b.astype(np.float32) if cast else b for b, cast in zip(wanted, single, strict=True))
            rtol, atol = max(rtol, FLOAT32_RTOL), max(atol, FLOAT32_ATOL)
        return same_outputs(observed, wanted, rtol=rtol, atol=atol)
    except (TypeError, ValueError):
        return False
