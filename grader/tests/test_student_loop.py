"""The student's loop: status, hint, watch and demo, on the stubs, a partial solution and the reference."""

from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.curriculum import PART_ENV, ROOT, load
from grader.student import demo, hints, status, watch
from grader.tests.waiting import HANG_SECONDS

EXERCISES = ROOT / "exercises"
SOLUTIONS = ROOT / "solutions"


def make_partial(folder: Path, done: tuple[str, ...] = ("softmax", "projections")) -> Path:
    """A copy of the stubs with some exercises replaced by the reference (what a student has midway)."""
    shutil.copytree(EXERCISES, folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(SOLUTIONS / "_checks.py", folder)  # the reference modules import it
    for name in done:
        shutil.copy(SOLUTIONS / f"{name}.py", folder)
    return folder


@pytest.fixture(scope="module")
def partial_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_partial(tmp_path_factory.mktemp("partial") / "work")


@pytest.fixture(scope="module")
def stubs() -> status.SuiteResult:
    return status.run_suite(EXERCISES)


@pytest.fixture(scope="module")
def partial(partial_dir: Path) -> status.SuiteResult:
    return status.run_suite(partial_dir)


@pytest.fixture(scope="module")
def reference() -> status.SuiteResult:
    return status.run_suite(SOLUTIONS)


# ---------------------------------------------------------------------------------------------- status


def test_status_lists_every_exercise_in_curriculum_order(stubs):
    assert [item.exercise.name for item in stubs.exercises] == list(load().names)
    text = status.render_plain(stubs)
    positions = [text.index(f"{exercise.number}. {exercise.name} ") for exercise in load().exercises]
    assert positions == sorted(positions)


TOTAL_POINTS = sum(exercise.points for exercise in load().exercises)  # Part I is 100; Part II adds its own


def test_status_on_the_stubs(stubs):
    assert stubs.total > 0 and stubs.passed == 0 and stubs.points == 0
    assert all(item.state == status.NOT_STARTED for item in stubs.exercises if item.total)
    assert stubs.current.exercise.name == "softmax"
    first = stubs.current.first_failure
    assert first.message.startswith("softmax: not implemented yet")
    # the one sentence stays the first line; the link to the exercise's section of the reading follows it
    assert first.message.splitlines()[1:] == ["  read:     docs/reading.md#attention"], first.message
    assert "Failed:" not in first.message
    text = status.render_plain(stubs)
    assert "read:     docs/reading.md#attention" in text, text
    assert f"0/{stubs.total} tests, 0/{TOTAL_POINTS:g} points" in text
    assert "Next: exercise 1, softmax" in text
    assert "run:   pytest -m softmax" in text and "tests/test_01_softmax.py" in text
    assert "attention-kit hint softmax" in text and "exercises/softmax.py" in text


def test_status_on_a_partial_solution(partial, partial_dir):
    assert partial["softmax"].state == status.DONE and partial["projections"].state == status.DONE
    assert partial["attention"].state == status.NOT_STARTED
    assert partial.current.exercise.name == "attention"
    expected_points = load().exercise("softmax").points + load().exercise("projections").points
    assert partial.points == pytest.approx(expected_points)
    assert partial.passed == partial["softmax"].total + partial["projections"].total
    text = status.render_plain(partial)
    assert "Next: exercise 3, attention" in text
    assert f"pytest tests -m attention --impl {partial_dir}" in text
    assert "attention_scores: not implemented yet" in text
    assert f"{partial.passed}/{partial.total} tests, {expected_points:g}/{TOTAL_POINTS:g} points" in text
    assert "#" in text.split("Progress:")[1].splitlines()[0]


def test_status_on_the_reference(reference):
    assert reference.passed == reference.total > 100
    assert reference.current is None and reference.points == pytest.approx(TOTAL_POINTS)
    assert all(item.state == status.DONE for item in reference.exercises)
    assert "All exercises pass" in status.render_plain(reference)


def test_status_shows_the_failure_block_of_a_check(tmp_path):
    folder = make_partial(tmp_path / "unstable", done=())
    source = (SOLUTIONS / "softmax.py").read_text(encoding="utf-8")
    (folder / "softmax.py").write_text(source.replace("np.exp(x - largest)", "np.exp(x)"), encoding="utf-8")
    result = status.run_suite(folder, ["softmax"])["softmax"]
    assert result.state == status.IN_PROGRESS and 0 < result.passed < result.total
    message = result.first_failure.message
    assert message.startswith("Diagnosis: your softmax.py"), message  # a known mistake: named first
    message = message[message.index("FAILURE: "):]
    assert "\n  expected: " in message
    assert "revisit:" in message and "Failed Checks" not in message and "def " not in message


def test_status_points_at_the_line_that_raised(tmp_path):
    folder = make_partial(tmp_path / "broadcast", done=())
    source = (SOLUTIONS / "softmax.py").read_text(encoding="utf-8")
    (folder / "softmax.py").write_text(source.replace("keepdims=True)", "keepdims=False)"), encoding="utf-8")
    message = status.run_suite(folder, ["softmax"])["softmax"].first_failure.message
    # A crash of the student's code on valid input is a failure like any other: what, expected, observed
    # (the exception and the student's own line, not numpy's), and an idea to revisit.
    # Both keepdims are gone: the two known mistakes, planted together, are recognised first.
    diagnosis, _, rest = message.partition("\nsoftmax(")
    assert diagnosis.startswith("Diagnosis:") and "maximum without keepdims" in diagnosis
    assert "summed without keepdims" in diagnosis
    what, expected, observed, where, read, revisit = ("softmax(" + rest).splitlines()
    assert what.startswith("softmax(x: float64 (2, 3, 5)) crashed")
    assert observed.startswith("  observed: ValueError: operands could not be broadcast")
    assert where.strip().startswith("at softmax.py line ") and "np.exp(x - largest)" in where
    assert revisit.startswith("  revisit:  softmax() must work for every input its docstring allows")
    assert read == "  read:     docs/reading.md#attention"  # the section of the exercise's idea


def test_status_is_plain_off_a_terminal_and_rich_on_one(partial, monkeypatch):
    stream = io.StringIO()
    status.show(partial, stream)
    assert stream.getvalue() == status.render_plain(partial) + "\n"

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert status.use_rich(Terminal())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not status.use_rich(Terminal())

    from rich.console import Console

    console = Console(file=io.StringIO(), force_terminal=True, width=100)
    status.render_rich(partial, console)
    shown = console.file.getvalue()
    assert "\x1b[" in shown and "attention-kit hint attention" in shown and "projections" in shown


def test_status_rejects_a_missing_folder(tmp_path, capsys):
    assert status.run(argparse.Namespace(impl=str(tmp_path / "nowhere"))) == 2
    assert "no such folder" in capsys.readouterr().err


def test_command_modules_import_only_the_standard_library():
    code = (
        "import sys, grader.cli; grader.cli.build_parser(); "
        "heavy = {'numpy', 'pytest', 'rich', 'matplotlib'} & set(sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


# ---------------------------------------------------------------------------------------------- hint


def test_hints_go_one_level_at_a_time():
    softmax = load().exercise("softmax")
    first = hints.hint_text("softmax")
    assert f"Hint 1 of {len(softmax.hints)}" in first
    assert " ".join(first.split()).find(" ".join(softmax.hints[0].split())) > 0
    assert first.rstrip().endswith(": attention-kit hint softmax --level 2")
    last = hints.hint_text("softmax", len(softmax.hints))
    assert "last hint" in last and "more:" not in last
    with pytest.raises(ValueError, match=f"there is no hint {len(softmax.hints) + 1}, softmax has "
                       f"{len(softmax.hints)} hints; the last one: attention-kit hint softmax --level"):
        hints.hint_text("softmax", len(softmax.hints) + 1)


def test_hint_for_an_unknown_exercise_lists_the_names(capsys):
    assert hints.run(argparse.Namespace(exercise="sofmax", level=1)) == 2
    error = capsys.readouterr().err
    assert "sofmax" in error and all(name in error for name in load().names)
    assert hints.run(argparse.Namespace(exercise="softmax", level=0)) == 2
    assert hints.run(argparse.Namespace(exercise="softmax", level=99)) == 2  # a usage error, as level 0 is
    assert "--level 99: there is no hint 99" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- watch


def fake_suite(impl: Path, states: dict[str, bool]) -> status.SuiteResult:
    """A suite result where each named exercise has one test, passing or not."""
    results = [
        status.ExerciseResult(load().exercise(name), [status.TestResult("test_one", name, passed, "" if passed
                                                                        else "FAILURE: wrong")])
        for name, passed in states.items()
    ]
    return status.SuiteResult(impl, results, 0.0)


def importers(name: str) -> tuple[str, ...]:
    """``name`` and every exercise that imports it, directly or not (from the manifest), in order."""
    return tuple(n for n in load().names if n == name or name in load().dependencies(n))


def test_watch_step_reruns_only_after_a_change(tmp_path):
    folder = make_partial(tmp_path / "watched", done=())
    runs: list[tuple[str, ...] | None] = []
    done: dict[str, bool] = {name: False for name in load().names}

    def runner(impl, exercises=None):
        runs.append(tuple(exercises) if exercises else None)
        chosen = exercises or load().names
        return fake_suite(impl, {name: done[name] for name in chosen})

    watcher = watch.Watcher(folder, runner=runner)
    assert "exercise 1, softmax: 0/1 tests pass" in "\n".join(watcher.check_all())
    assert watcher.step(settle=0) is None and runs == [None]

    (folder / "softmax.py").write_text("# still thinking\n", encoding="utf-8")
    lines = watcher.step(settle=0)
    # softmax.py is imported by attention, and through it by multihead and layer: all of them rerun.
    assert lines[0] == "changed: softmax.py" and runs[-1] == importers("softmax")
    assert {"softmax", "attention", "multihead", "layer"} <= set(runs[-1])
    assert "FAILURE: wrong" in "\n".join(lines) and watcher.current == "softmax"

    done["softmax"] = True
    (folder / "softmax.py").write_text("# solved\n", encoding="utf-8")
    text = "\n".join(watcher.step(settle=0))
    assert "softmax: 1/1 tests pass - done" in text and "exercise 2, projections" in text
    assert watcher.current == "projections" and runs[-2:] == [importers("softmax"), None]
    (folder / "__pycache__").mkdir(exist_ok=True)
    (folder / "__pycache__" / "x.pyc").write_bytes(b"")
    assert watcher.step(settle=0) is None


def test_watch_moves_on_when_the_current_exercise_passes(tmp_path):
    folder = make_partial(tmp_path / "student", done=())
    watcher = watch.Watcher(folder)
    assert "exercise 1, softmax" in watcher.check_all()[0]
    shutil.copy(SOLUTIONS / "softmax.py", folder)
    text = "\n".join(watcher.step(settle=0))
    assert "changed: softmax.py" in text and "- done" in text
    assert "exercise 2, projections: 0/" in text and "init_weight: not implemented yet" in text
    assert watcher.current == "projections"


def test_watch_once(capsys, partial_dir):
    parser = argparse.ArgumentParser()
    watch.add_arguments(parser)
    assert watch.run(parser.parse_args(["--impl", str(partial_dir), "--once"])) == 0
    assert "exercise 3, attention" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------- demo


def demo_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_demo_waits_for_the_exercises_it_needs(tmp_path, capsys, partial_dir):
    out = tmp_path / "heatmap.png"
    assert demo.run(demo_args("--impl", str(EXERCISES), "--out", str(out))) == 1
    text = capsys.readouterr().out
    assert all(f"{name}: 0/" in text for name in ("softmax", "projections", "attention"))
    assert demo.run(demo_args("--impl", str(partial_dir), "--out", str(out))) == 1
    text = capsys.readouterr().out
    assert "3. attention: 0/" in text and "softmax:" not in text.split("first:")[1]
    assert not out.exists()


def test_demo_reproduces_the_worked_example(tmp_path, capsys):
    out = tmp_path / "heatmap.png"
    assert demo.run(demo_args("--reference", "--out", str(out))) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [
        "attention_weights_shape=(8, 8)",
        "context_shape=(8, 8)",
        "row_sums=[1. 1. 1. 1. 1. 1. 1. 1.]",
    ]
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_causal_and_heads():
    import numpy as np

    causal = demo.compute(SOLUTIONS, causal=True, use_causal_mask=False)
    assert np.all(np.triu(causal.weights, 1) == 0) and "np.tril" in causal.mask_source
    assert "causal mask" in demo.title(causal)
    heads = demo.compute(SOLUTIONS, heads=4)
    assert heads.weights.shape == (4, 8, 8) and heads.output.shape == (8, 16)
    assert demo.summary_lines(heads)[:2] == ["attention_weights_shape=(4, 8, 8)", "output_shape=(8, 16)"]
    assert demo.run(demo_args("--reference", "--heads", "3")) == 2


def test_demo_trained_shows_what_order_does(tmp_path, capsys):
    untrained, blind, trained = demo.compute_trained(SOLUTIONS)[0]
    assert 0.05 < untrained.on_antecedent < 0.3  # about 1/8 before training
    assert trained.accuracy >= 0.9 and trained.on_antecedent > 0.5
    assert (trained.prediction, trained.swapped) == ("vessel", "obstacle")  # it follows the order
    assert 0.3 <= blind.accuracy <= 0.7 and blind.prediction == blind.swapped  # a bag: the order is lost
    out = tmp_path / "trained.png"
    assert demo.run(demo_args("--reference", "--trained", "--out", str(out))) == 0
    text = capsys.readouterr().out
    assert "trained with positions" in text and "trained without positions" in text and "random weights" in text
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_trained_waits_for_exercise_nine(capsys):
    assert demo.run(demo_args("--impl", str(EXERCISES), "--trained")) == 1
    text = capsys.readouterr().out
    assert "9. training: 0/" in text and "8. backward: 0/" in text


def test_status_keeps_the_diagnosis_in_front_of_the_failure():
    from types import SimpleNamespace

    from tests.failures import REPORT_ATTRIBUTE, Failure

    lead = "Diagnosis: your softmax.py gives exactly the outputs of a known mistake:\n  \"I did X.\"\nHint: think."
    failure = Failure("what", "a", "b", "c", diagnosis=lead, test="tests/test_01_softmax.py::t")
    report = SimpleNamespace(**{REPORT_ATTRIBUTE: [failure.as_dict()]}, longreprtext="(not read)", longrepr=None)
    trimmed = status.failure_message(report)
    assert trimmed == (lead + "\nFAILURE: what\n  expected: a\n  observed: b\n  revisit:  c"), trimmed


# ---------------------------------------------------------------------------------------------- issue 14


def test_watch_reruns_what_a_save_touched():
    watcher = watch.Watcher(SOLUTIONS, runner=lambda impl, exercises=None: fake_suite(impl, {}))
    watcher.current = "positional"
    order = list(load().names)
    assert watcher.affected(["projections.py"]) == sorted({*importers("projections"), "positional"}, key=order.index)
    assert {"projections", "positional", "multihead", "layer"} <= set(watcher.affected(["projections.py"]))
    assert watcher.affected(["masks.py"]) == sorted({*importers("masks"), "positional"}, key=order.index)
    assert watcher.affected(["_checks.py"]) == list(load().names)  # a helper: anything may import it
    assert watcher.affected(["notes.txt"]) == ["positional"]


def test_watch_shows_a_regression_in_a_finished_exercise_first(tmp_path):
    folder = make_partial(tmp_path / "late", done=("softmax", "projections", "attention", "masks", "positional",
                                                   "multihead"))
    watcher = watch.Watcher(folder)
    assert watcher.check_all()[0].startswith("exercise 7, layer: 0/")
    source = (folder / "masks.py").read_text(encoding="utf-8")
    (folder / "masks.py").write_text(source.replace("np.tril(", "np.triu("), encoding="utf-8")
    lines = watcher.step(settle=0)
    text = "\n".join(lines)
    assert lines[1] == "REGRESSION: exercise 4, masks passed before and fails now", text
    assert lines[2].startswith("exercise 4, masks: ") and "first failing test: test_causal_mask" in text
    assert text.index("REGRESSION") < text.index("FAILURE: causal_mask") < text.index("exercise 7, layer: 0/")
    assert watcher.current == "layer"
    (folder / "masks.py").write_text(source, encoding="utf-8")  # fixed again: no regression any more
    assert "REGRESSION" not in "\n".join(watcher.step(settle=0))


def test_watch_a_named_exercise_by_number(partial_dir, capsys):
    parser = argparse.ArgumentParser()
    watch.add_arguments(parser)
    assert watch.run(parser.parse_args(["5", "--impl", str(partial_dir), "--once"])) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("exercise 5, positional: 0/")
    assert watch.run(parser.parse_args(["positonal", "--impl", str(partial_dir), "--once"])) == 2
    error = capsys.readouterr().err
    assert "no exercise named 'positonal'; the exercises are positional, " in error and error.count("\n") == 1


# Code in a hint: a call or attribute of numpy, any call, indexing, keyword arguments, operators of code.
CODE = re.compile(r"\bnp\.|\bnumpy\.|\w\(|\w\[|\]\[|\w=|\s@\s|\*\*|//|`")


@pytest.mark.parametrize("exercise", load().exercises, ids=lambda exercise: exercise.name)
def test_hints_climb_from_a_question_to_a_pointer_without_code(exercise):
    import difflib

    assert exercise.hints, f"{exercise.name} has no hints"
    for before, after in zip(exercise.hints, exercise.hints[1:], strict=False):
        assert difflib.SequenceMatcher(None, before, after).ratio() < 0.6, (before, after)
    if getattr(exercise, "part", 1) == 1:  # Part I: the README promises one step, three levels, no code
        assert exercise.hint_step, f"{exercise.name}: no hint_step in the manifest"
    assert set(exercise.hint_functions) <= set(exercise.functions), f"{exercise.name}: hint_functions not its own"
    if exercise.hint_step:
        assert len(exercise.hints) == 3, "hint_step hints are a question, the idea, a precise pointer"
        assert exercise.hints[0].rstrip().endswith("?") and not exercise.hints[2].rstrip().endswith("?")
        for level, text in enumerate(exercise.hints, start=1):
            found = CODE.search(text)
            assert not found, f"{exercise.name} hint {level} contains code: {found.group()!r}"


def test_the_code_detector_catches_code():
    for code in ("np.swapaxes(k, -1, -2)", "mask[..., None, :, :]", "np.divide with out= and where=",
                 "x @ W", "10000**(2i/d)", "keepdims=True"):
        assert CODE.search(code), code
    assert not CODE.search("the matrix product of x with the weight, shape (batch, 1, max_len)")


def test_hint_by_number_names_its_level_and_the_reading():
    text = hints.hint_text("3", 2)
    assert text.startswith("Exercise 3, attention: ") and "Hint 2 of 3, the idea (on " in text
    assert "more (a precise pointer): attention-kit hint attention --level 3" in text
    sections = load().exercise("attention").reading
    assert sections and ("\nread: " + ", ".join(f"docs/reading.md#{s}" for s in sections) + "\n") in text


def test_pytest_m_takes_numbers_and_stops_on_an_unknown_name():
    def pytest_m(expression):
        return subprocess.run([sys.executable, "-m", "pytest", "tests", "--impl", "solutions", "-m", expression,
                               "-q", "-p", "no:cacheprovider", "--co"], cwd=ROOT, capture_output=True, text=True)

    by_number, by_name = pytest_m("3"), pytest_m("attention")
    assert by_number.returncode == 0 and "test_03_attention" in by_name.stdout
    assert by_number.stdout.splitlines()[:-1] == by_name.stdout.splitlines()[:-1]  # the last line is a timing
    typo = pytest_m("softmx or masks")
    assert typo.returncode == 4, typo.stdout + typo.stderr
    errors = [line for line in (typo.stdout + typo.stderr).splitlines() if line.strip()]
    assert errors == [errors[0]] and "no exercise named 'softmx'; the exercises are softmax, " in errors[0], errors
    assert pytest_m("not slow and (1 or 2)").returncode == 0


def test_impl_typo_lists_the_folders_closest_first(capsys):
    assert status.run(argparse.Namespace(impl="solution")) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "folders holding exercise modules: solutions, exercises" in error


def test_status_says_a_module_does_not_import(tmp_path):
    folder = make_partial(tmp_path / "syntax", done=("softmax", "projections", "attention"))
    with (folder / "projections.py").open("a", encoding="utf-8") as file:
        file.write("\ndef broken(:\n")
    line = len((folder / "projections.py").read_text(encoding="utf-8").splitlines())
    result = status.run_suite(folder)
    assert result["projections"].state == status.DOES_NOT_IMPORT
    assert result["projections"].label == f"does not import: syntax error, line {line}"
    # attention imports softmax only; multihead imports projections, so it does not import either.
    assert result["attention"].state == status.DONE
    assert result["multihead"].label == f"does not import: syntax error in projections.py, line {line}"
    shown = status.render_plain(result)
    assert re.search(rf"2\. projections +0/\d+ +does not import: syntax error, line {line}\n", shown), shown


def test_no_traceback_on_a_closed_pipe_or_ctrl_c():
    import signal
    import time

    reader = subprocess.Popen([sys.executable, "-m", "grader", "status"], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    reader.stdout.close()  # like `| head` that has stopped reading
    error = reader.communicate(timeout=HANG_SECONDS)[1].decode()
    assert reader.returncode == 141 and "Traceback" not in error, error

    # SIGINT as a terminal sends it, even where this test runs in the background (which ignores it, and a child
    # inherits that).
    watcher = subprocess.Popen([sys.executable, "-m", "grader", "watch", "--interval", "0.2"], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    for line in watcher.stdout:
        if line.startswith("Watching"):
            break
    time.sleep(0.3)
    watcher.send_signal(signal.SIGINT)
    out, error = watcher.communicate(timeout=HANG_SECONDS)
    assert "Traceback" not in error and "Stopped watching." in out, error


def test_quiet_exit_gives_the_shell_statuses():
    from grader import cli

    def interrupted():
        with cli.quiet_exit() as status_holder:
            raise KeyboardInterrupt
        return status_holder.code

    assert interrupted() == 130


@pytest.mark.parametrize("ci", ["", "true"], ids=["terminal", "CI"])  # on CI pytest prints whole messages
def test_pytest_x_shows_the_failure_not_pytest_checks_traceback(tmp_path, ci):
    folder = make_partial(tmp_path / "stop", done=())
    source = (SOLUTIONS / "softmax.py").read_text(encoding="utf-8")
    (folder / "softmax.py").write_text(source.replace("totals = np.sum(exponentials, axis=axis, keepdims=True)",
                                                      "totals = np.sum(exponentials)"), encoding="utf-8")
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith("PYTEST_") and k not in ("CI", "BUILD_NUMBER")}
    environment["COLUMNS"] = "160"  # the summary line is cut to the terminal's width
    if ci:
        environment["CI"] = ci  # GitHub Classroom runs the tests with CI set
    done = subprocess.run([sys.executable, "-m", "pytest", "tests", "-m", "softmax", "-x", f"--impl={folder}",
                           "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True, env=environment)
    assert done.returncode == 1 and "FAILURE: each row (last axis)" in done.stdout, done.stdout
    assert "Stopping on first failure" not in done.stdout and "tests/feedback.py:" not in done.stdout, done.stdout
    assert "FAILED tests/test_01_softmax.py::test_rows_sum_to_one - each row" in done.stdout


def test_pytest_x_stops_a_check_failed_within_a_call_of_the_test_s_own(tmp_path):
    # A helper's blind mistake: kv_cache_append growing the caller's cache in place. Its change is found by the
    # call of the gate on an input drawn for the submission, which catches the function's own exceptions as its
    # answer: under -x it caught pytest-check's stop and told the student "observed: AssertionError: Stopping on
    # first failure ... your kv_cache_append() answers the tests' own inputs but not this one".
    folder = make_partial(tmp_path / "x", done=tuple(load().names))
    source = (folder / "decoding.py").read_text(encoding="utf-8")
    assert "new = dict(cache)" in source
    (folder / "decoding.py").write_text(source.replace("new = dict(cache)", "new = cache"), encoding="utf-8")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k != "CI"}
    done = subprocess.run([sys.executable, "-m", "pytest", "tests/test_11_decoding.py", "-x", f"--impl={folder}",
                           "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True, env=environment)
    assert done.returncode == 1 and "kv_cache_append() changed its input cache" in done.stdout, done.stdout
    assert "Stopping on first failure" not in done.stdout and "an input drawn for your submission" not in done.stdout


def test_a_cache_grown_in_place_fails_kv_cache_append_not_causal_decode(tmp_path):
    # The same blind mistake without -x: the watched causal_decode replayed its steps on the caches it had been
    # given, which the append had grown in place since, and failed a causal_decode that is right.
    folder = make_partial(tmp_path / "in-place", done=tuple(load().names))
    source = (folder / "decoding.py").read_text(encoding="utf-8")
    (folder / "decoding.py").write_text(source.replace("new = dict(cache)", "new = cache"), encoding="utf-8")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k != "CI"}
    done = subprocess.run([sys.executable, "-m", "pytest", "tests/test_11_decoding.py", "-rA", f"--impl={folder}",
                           "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True, env=environment)
    assert "FAILED tests/test_11_decoding.py::test_cache_is_never_changed" in done.stdout, done.stdout
    assert "PASSED tests/test_11_decoding.py::test_causal_decode_equals_causal_attention" in done.stdout, done.stdout
    assert "PASSED tests/test_11_decoding.py::test_causal_decode_of_one_sequence_in_float32" in done.stdout


def test_pytest_x_leads_with_the_diagnosis_once(tmp_path):
    # pytest -x's report was rendered with the diagnosis in front of a text that already led with it: twice.
    folder = make_partial(tmp_path / "x", done=tuple(load().names))
    source = (folder / "layer.py").read_text(encoding="utf-8")
    biased = "variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)"
    assert biased in source
    (folder / "layer.py").write_text(source.replace(biased, "variance = ((x - mean) ** 2).sum(axis=-1, "
                                                    "keepdims=True) / (x.shape[-1] - 1)"), encoding="utf-8")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k != "CI"}
    done = subprocess.run([sys.executable, "-m", "pytest", "tests/test_07_layer.py", "-x", f"--impl={folder}",
                           "-p", "no:cacheprovider", "-p", "no:randomly"], cwd=ROOT, capture_output=True, text=True,
                          env=environment)
    assert done.returncode == 1 and "unbiased variance" in done.stdout, done.stdout
    assert done.stdout.count("Diagnosis:") == 1, done.stdout


def test_watch_after_everything_passed_names_the_regression(tmp_path):
    folder = make_partial(tmp_path / "all", done=tuple(load().names))
    watcher = watch.Watcher(folder)
    assert "pass. Well done!" in watcher.check_all()[0] and watcher.current is None
    source = (folder / "masks.py").read_text(encoding="utf-8")
    (folder / "masks.py").write_text(source.replace("np.tril(", "np.triu("), encoding="utf-8")
    lines = watcher.step(settle=0)
    assert lines[1] == "REGRESSION: exercise 4, masks passed before and fails now", lines
    assert watcher.current == "masks"


def test_watch_names_an_exercise_the_course_gives_or_lacks(partial_dir, capsys, monkeypatch):
    # A Part III student typing the README's `attention-kit watch 4` got a KeyError traceback.
    monkeypatch.setenv(PART_ENV, "3")
    parser = argparse.ArgumentParser()
    watch.add_arguments(parser)
    assert watch.run(parser.parse_args(["4", "--impl", str(partial_dir), "--once"])) == 2
    error = capsys.readouterr().err
    assert "exercise 4, masks is not part of this course (it has exercises 12, 13, 14, 15, and " in error
    assert error.count("\n") == 1
    assert watch.run(parser.parse_args(["softmax", "--impl", str(partial_dir), "--once"])) == 2
    error = capsys.readouterr().err
    assert "exercise 1, softmax is given in this course" in error and "exercises 12, 13, 14, 15" in error


def test_the_trained_pictures_caption_carries_the_demos_weight():
    # The caption said "it" puts 0.99 on "vessel" while the demo prints and draws 1.00.
    text = (ROOT / "docs" / "student-loop.md").read_text(encoding="utf-8")
    match = re.search(r'trained with positions "it" puts (\d\.\d\d) on "vessel"', text)
    assert match, "the caption of docs/demo-trained.png moved: update this test"
    trained = demo.compute_trained(SOLUTIONS)[0][2]
    it, vessel = demo.TOKENS.index("it"), demo.TOKENS.index("vessel")
    assert f"{trained.weights[it, vessel]:.2f}" == match.group(1)


def test_hint_names_an_exercise_the_course_lacks(capsys, monkeypatch):
    # A Part III student's `attention-kit hint masks` hinted at exercise 4, which the release does not hold.
    monkeypatch.setenv(PART_ENV, "3")
    parser = argparse.ArgumentParser()
    hints.add_arguments(parser)
    assert hints.run(parser.parse_args(["masks"])) == 2
    assert capsys.readouterr().err == ("attention-kit hint: exercise 4, masks is not part of this course (it has "
                                       "exercises 12, 13, 14, 15, and 1, 2, 3, 5, 6, 8, 9 given)\n")
    assert hints.run(parser.parse_args(["attention"])) == 0  # given: its hints help to read it
    shown = capsys.readouterr().out
    assert shown.startswith("Exercise 3, attention:")
    assert "given in this course: attention.py is working code" in shown.splitlines()[1], shown
    assert hints.run(parser.parse_args(["negation"])) == 0  # assigned: no such line
    assert "given in this course" not in capsys.readouterr().out
