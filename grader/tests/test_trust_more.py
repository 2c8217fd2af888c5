"""More attacks on `attention-kit grade` (the hostile tester's findings on an earlier snapshot).

Each test names the finding it closes (F1..F13, S1.. of the attack report): the grading process's memory
stays bounded whatever a worker asks or writes, a student's own stall is the student's timeout, and a
broken kit is never a student's points.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from grader.sandbox import proxy
from grader.sandbox.proxy import IsolatedImplementation, Limits, WorkerCrashed
from grader.tests.test_trust import copy_reference, course_of_part

# The worker's own channel, reached from student code (the worker is __main__ inside the sandbox, its codec and
# frames modules beside it).
CHANNEL = (
    "import os, sys, time\n"
    "import numpy as np\n"
    "_M = sys.modules['__main__']\n"
    "_W = int(sys.argv[sys.argv.index('--replies') + 1])\n"
    "_R = int(sys.argv[sys.argv.index('--requests') + 1])\n\n"
    "def _ask(exercise, function, args):\n"
    "    arrays = []\n"
    "    payload = _M.codec.encode([list(args), {}], arrays)\n"
    "    os.write(_W, _M.frames.pack({'op': 'callback', 'exercise': exercise, 'function': function,\n"
    "                                 'payload': payload}, arrays))\n\n"
)

# A function of the reference asked for over the worker's own channel, as the worker asks for one that the kit has no
# given implementation of: fair grading answers it in the reference's worker, charged to the student.
FORWARDED = CHANNEL + (
    "init_weight = _M.Worker(_M.Channel(_R, _W), '/').forwarder('projections', 'init_weight')\n\n")


@pytest.fixture
def isolated():
    opened: list[IsolatedImplementation] = []

    def build(folder: Path, **options) -> IsolatedImplementation:
        implementation = IsolatedImplementation(folder, limits=options.pop("limits", Limits(call_timeout=2.0)),
                                                **options)
        opened.append(implementation)
        return implementation

    yield build
    for implementation in opened:
        implementation.close()


def _student(tmp_path: Path, split_heads_body: str) -> Path:
    return copy_reference(tmp_path / "student", multihead=CHANNEL + "def split_heads(x, n_heads):\n" + split_heads_body)


# ---------------------------------------------------------------- F1, F2: the grading process's memory


def _peak_rss_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_f1_the_grading_process_computes_nothing_for_a_callback(isolated, tmp_path):
    # 9000 x 9000 float64 is 618 MiB: the reference's worker computes it (within the student's memory limit), and
    # the answer, over the replies' limit, never reaches the grading process, whose peak memory stays flat.
    folder = copy_reference(tmp_path / "student", multihead=FORWARDED + (
        "def split_heads(x, n_heads):\n"
        "    init_weight(np.random.default_rng(0), 9000, 9000)\n    return x\n"))
    impl = isolated(folder, limits=Limits(call_timeout=20.0))
    proxy._ANSWERS.clear()
    before = _peak_rss_mib()
    with pytest.raises(MemoryError, match=r"the reference's projections\.init_weight\(\), which your code called"):
        impl.function("multihead", "split_heads")(np.zeros((2, 3, 4)), 2)
    assert _peak_rss_mib() - before < 200
    assert not proxy._ANSWERS  # a refusal is never remembered
    assert impl.reference_spent > 0.2  # the reference's work was charged to the student ...
    assert impl.spent >= impl.reference_spent  # ... as the student's own time
    # The same callback with honest sizes is answered.
    impl.function("multihead", "split_heads")  # still importable
    honest = copy_reference(tmp_path / "honest")
    assert isolated(honest).function("multihead", "split_heads")(np.zeros((2, 3, 4)), 2).shape == (2, 2, 3, 2)


def test_f1_a_callback_beyond_the_memory_limit_is_the_students_memory_error(isolated, tmp_path):
    folder = copy_reference(tmp_path / "student", multihead=FORWARDED + (
        "def split_heads(x, n_heads):\n"
        "    init_weight(np.random.default_rng(0), 20000, 20000)\n    return x\n"))
    impl = isolated(folder, limits=Limits(call_timeout=20.0, memory_bytes=256 << 20))
    before = _peak_rss_mib()
    with pytest.raises(MemoryError):
        impl.function("multihead", "split_heads")(np.zeros((2, 3, 4)), 2)
    assert _peak_rss_mib() - before < 100
    assert not impl.internal  # the student's doing, not the grader's


def test_f1_the_reference_s_cpu_is_charged_to_the_call_that_asked_for_it(isolated, tmp_path):
    # Many small callbacks, each cheap: together they use the call's CPU budget, and the call times out as the
    # student's (before, the reference's time was free, and held a grading process for minutes).
    folder = copy_reference(tmp_path / "student", multihead=FORWARDED + (
        "def split_heads(x, n_heads):\n"
        "    seed = 0\n"
        "    while True:\n"
        "        seed += 1\n"
        "        init_weight(np.random.default_rng(seed), 300, 300)\n"))
    impl = isolated(folder, limits=Limits(call_timeout=1.0))
    proxy._ANSWERS.clear()
    with pytest.raises(TimeoutError):
        impl.function("multihead", "split_heads")(np.zeros((2, 3, 4)), 2)
    assert impl.spent < 5  # stopped at its 1 CPU-s, the reference's share included (wall time is the machine's)
    assert impl.reference_spent > 0.3
    assert not impl.internal


def test_f1_one_long_callback_is_stopped_at_the_call_s_budget_with_a_line_that_names_it(isolated, tmp_path):
    folder = copy_reference(tmp_path / "student", multihead=FORWARDED + (
        "def split_heads(x, n_heads):\n"
        "    try:\n"
        "        init_weight(np.random.default_rng(0), 6000, 6000)\n"
        "    except TimeoutError as error:\n"
        "        raise ValueError(str(error))\n"
        "    return x\n"))
    impl = isolated(folder, limits=Limits(call_timeout=0.3))
    proxy._ANSWERS.clear()
    with pytest.raises((ValueError, TimeoutError)) as raised:
        impl.function("multihead", "split_heads")(np.zeros((2, 3, 4)), 2)
    if isinstance(raised.value, ValueError):
        assert "projections.init_weight(), which your code called, used the" in str(raised.value)
    assert impl.reference_spent >= 0.2
    assert not impl.internal


def test_a_dependency_runs_given_code_in_the_students_own_worker_charged_as_its_own(isolated, tmp_path, monkeypatch):
    # Fair grading serves projections (a dependency of multihead) from the kit's given implementation, in the
    # student's worker: no callback, nothing asked of the reference, its time and memory the student's own. Only
    # where the course does not assign projections (Part II's: test_given_assigned.py for the others).
    course_of_part(tmp_path / "course", monkeypatch, "2")
    folder = copy_reference(tmp_path / "student", multihead=(
        "import sys as _sys\n\n"
        "def split_heads(x, n_heads):\n"
        "    if n_heads == 3:\n"
        "        init_weight(np.random.default_rng(0), 20000, 20000)\n"
        "    return _sys.modules[__package__ + '.projections'].__file__\n"))
    impl = isolated(folder, limits=Limits(call_timeout=20.0, memory_bytes=256 << 20))
    split_heads = impl.function("multihead", "split_heads")
    assert split_heads(np.zeros((2, 3, 4)), 2) == "given/projections.py"
    with pytest.raises(MemoryError):
        split_heads(np.zeros((2, 3, 4)), 3)
    assert impl.reference_spent == 0
    assert not impl.internal


def test_f2_bytes_flooding_the_replies_pipe_while_an_answer_is_sent_are_never_buffered(isolated, tmp_path):
    folder = _student(tmp_path, (
        "    _ask('projections', 'init_weight', [np.random.default_rng(2), 400, 400])\n"
        "    chunk = b'\\0' * (1 << 20)\n"
        "    for _ in range(64):\n        os.write(_W, chunk)\n"
        "    time.sleep(30)\n"))
    impl = isolated(folder, limits=Limits(call_timeout=5.0, reply_bytes=4 << 20))
    with pytest.raises(WorkerCrashed):
        impl.function("multihead", "split_heads")(np.zeros((2, 3, 4)), 2)
    # One allowed frame at most, not 64 MiB.
    assert len(impl._channel.buffer) <= (4 << 20) + proxy.MAX_REPLY_HEADER + (1 << 20)


# ---------------------------------------------------------------- F3: a student's stall is the student's time


def test_f3_reading_the_answers_slowly_is_the_students_time(isolated, tmp_path):
    folder = _student(tmp_path, (
        "    seed = 0\n"
        "    while True:\n"
        "        seed += 1\n"
        "        _ask('projections', 'init_weight', [np.random.default_rng(seed), 300, 300])\n"
        "        got = 0\n"
        "        while got < 720_000:\n"
        "            got += len(os.read(_R, 65536))\n            time.sleep(1)\n"))
    impl = isolated(folder)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="did not finish within 2 s"):
        impl.function("multihead", "split_heads")(np.zeros((2, 3, 4)), 2)
    assert time.monotonic() - started < 8
    assert impl.reference_spent < 1.0


def test_f3_a_killed_grading_process_leaves_no_scratch_folder(tmp_path):
    from grader.tests.test_trust import grade_command

    folder = tmp_path / "subs"
    # Its first two calls in each worker answer (so a test ends and the process is past its start-up grace); then
    # every call sleeps past the stall detector's 2 s, and the grading process is killed within seconds.
    copy_reference(folder / "slow", softmax="_real_softmax, _calls = softmax, [0]\n\n\ndef softmax(x, axis=-1):\n"
                                            "    _calls[0] += 1\n    if _calls[0] > 2:\n        import time\n\n"
                                            "        time.sleep(3)\n    return _real_softmax(x, axis)\n")
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    done = grade_command(folder, tmp_path / "out", "--timeout", "2", env={"TMPDIR": str(temporary)})
    assert done.returncode == 1, done.stdout + done.stderr
    # The grading process was killed at the stall detector (the machine's stall, when it is busy, after retries).
    assert "gave no result within 2 s" in done.stdout or "too busy: no test finished within 2 s" in done.stdout
    time.sleep(1.5)  # the orphaned worker ends with its call
    assert not [p.name for p in temporary.iterdir() if p.name.startswith("attention-kit")]


# ---------------------------------------------------------------- F5: the worker sees numpy, not the kit

PROBE = '''
def softmax(x, axis=-1):
    import os, sys
    seen = []
    for entry in list(sys.path) + [os.path.dirname(os.__file__)]:
        for folder, dirs, files in os.walk(entry):
            dirs[:] = [d for d in dirs if not d.startswith(("numpy", "__pycache__"))]
            if "site-packages" in folder or "dist-packages" in folder:
                seen += [os.path.join(folder, f) for f in files] + [os.path.join(folder, d) for d in dirs]
            seen += [os.path.join(folder, f) for f in files
                     if f.endswith(".pth") or f in ("curriculum.toml", "golden.npz", "API.md")]
            seen += [os.path.join(folder, d) for d in dirs if d in ("solutions", "hidden_tests", "_kit", "grader")]
    opened = []
    for path in TARGETS:
        try:
            with open(path, "rb") as handle:
                opened.append(path + ":" + str(len(handle.read())))
        except OSError:
            pass
    raise RuntimeError("SEEN=" + repr(sorted(set(seen))[:20]) + " OPENED=" + repr(opened))
'''


def test_f5_student_code_sees_only_numpy_of_any_site_packages_and_cannot_open_the_kit(isolated, tmp_path):
    import grader
    from grader.curriculum import ROOT
    from grader.sandbox import limits as confine

    if confine.choose("require").mode != "bwrap":
        pytest.skip("needs bubblewrap")
    targets = [str(ROOT / "solutions" / "softmax.py"), str(Path(grader.__file__).parent / "curriculum.toml"),
               *[str(p) for p in (ROOT / "grader" / "hidden_tests").glob("*.py")],
               *[str(Path(d) / "grader" / "_kit" / "solutions" / "softmax.py") for d in confine.hidden_paths()]]
    folder = copy_reference(tmp_path / "student")
    (folder / "softmax.py").write_text(f"TARGETS = {targets!r}\n" + PROBE, encoding="utf-8")
    impl = isolated(folder)
    with pytest.raises(RuntimeError) as info:
        impl.function("softmax", "softmax")(np.zeros(2))
    assert str(info.value).split("\n")[0].startswith("SEEN=[] OPENED=[]"), str(info.value)[:2000]
    # numpy itself still works there (the honest path is covered by every grading test).


# ---------------------------------------------------------------- F4: Gradescope never shows a 0 for its own failure


def test_f4_an_autograder_failure_has_no_score_and_says_not_graded(tmp_path):
    import json
    import shutil as sh

    from grader.curriculum import ROOT
    from grader.grading import gradescope

    sh.copytree(ROOT / "solutions", tmp_path / "submission", ignore=sh.ignore_patterns("__pycache__"))
    results = gradescope.autograde(tmp_path, python=sh.which("false") or "/bin/false")
    written = json.loads((tmp_path / "results" / "results.json").read_text(encoding="utf-8"))
    assert "score" not in results and "score" not in written
    assert written["output"].startswith("NOT GRADED")
    assert "score" not in gradescope.failure_results("x", students_fault=False)
    # A results.json the grader marked not graded keeps no score either (its partial sum is no grade).
    from grader.grading.formats import gradescope_results
    from grader.grading.rows import StudentRow, TestEntry

    partial = StudentRow(student="s", status="not graded: the reference failed", score=12.0, computed=12.0,
                         max_score=24.0, exercises={"softmax": None}, computed_exercises={"softmax": None},
                         maxima={"softmax": 24.0}, tests=(TestEntry("softmax: t", "1.1", 2.0, "passed", "",
                                                                    "softmax", score=1.0),))
    cleaned = gradescope_results.results(partial)
    assert "score" not in cleaned and "score" not in cleaned["tests"][0]
    assert cleaned["output"].startswith("NOT GRADED")


# ---------------------------------------------------------------- F6-F9, F13: a broken kit is never a student's points


def test_f6_a_broken_reference_leaves_its_tests_not_graded_never_points(tmp_path, monkeypatch):
    from grader.grading import grade, kit_check
    from grader.sandbox import sealed
    from grader.tests.test_trust import SOLUTIONS, read_grades

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # never the instructor's own cache
    broken = copy_reference(tmp_path / "broken-reference", softmax="raise RuntimeError('broken reference')")
    monkeypatch.setattr(kit_check, "KIT_REFERENCE", broken)
    kit_check._KIT_CHECKS.clear()
    copy_reference(tmp_path / "subs" / "ada")
    lines: list[str] = []
    code = grade.grade_batch(tmp_path / "subs", tmp_path / "out", jobs=1, exercises=["softmax", "attention"],
                             echo=lines.append)
    kit_check._KIT_CHECKS.clear()
    assert code != 0
    row = read_grades(tmp_path / "out")["ada"]
    assert row["status"].startswith("not graded: the kit's own reference fails tests/test_01_softmax.py::")
    assert "broken reference" in row["status"] and row["score"] == ""
    assert any(line.startswith("not graded") for line in lines)
    # The broken check's answers to its callbacks (softmax, from attention) are kept as that reference's, never
    # as the answers of the reference in force, which a later batch's students would open: a grading process
    # named its file by the reference in force there, and correct work then lost points on "broken reference".
    answers = sealed.file_for(kit_check.passed_store(), SOLUTIONS)
    assert not answers.exists(), "the broken check wrote the good reference's answers"
    assert sealed.file_for(kit_check.passed_store(), broken).exists()
    monkeypatch.setattr(kit_check, "KIT_REFERENCE", None)
    assert grade.grade_batch(tmp_path / "subs", tmp_path / "again", jobs=1, exercises=["softmax", "attention"],
                             echo=lambda line: None) == 0
    kit_check._KIT_CHECKS.clear()
    again = read_grades(tmp_path / "again")["ada"]
    assert again["status"] == "ok" and again["score"] == again["max_score"], again


def planned_kit_checks(tmp_path, monkeypatch) -> list:
    """The kit checks each batch plans (their canary: the tests still to run), in a cache of the test's own."""
    from grader.grading import kit_check

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    planned: list = []
    original = kit_check.plan

    def spy(*args, **kwargs):
        known, canary, key = original(*args, **kwargs)
        planned.append(canary)
        return known, canary, key

    monkeypatch.setattr(kit_check, "plan", spy)
    return planned


def test_a_kit_check_that_passed_is_not_run_again_for_the_same_kit(tmp_path, monkeypatch):
    # The kit's check grades the reference like one more student: a batch of an unchanged kit (same fingerprint,
    # reference, options, Python and numpy) skips it; a failed check is never remembered.
    from grader.grading import grade, kit_check

    planned = planned_kit_checks(tmp_path, monkeypatch)
    copy_reference(tmp_path / "subs" / "ada")
    for out in ("first", "second"):
        kit_check._KIT_CHECKS.clear()  # a new batch process
        assert grade.grade_batch(tmp_path / "subs", tmp_path / out, jobs=1, exercises=["softmax"],
                                 echo=lambda line: None) == 0
    assert planned[0] is not None and planned[1] is None
    kept = sorted((kit_check.passed_store() / "kit-check-use").iterdir())  # one per test file that passed whole
    assert len(kept) == len(planned[0].files)
    broken = copy_reference(tmp_path / "broken-reference", softmax="raise RuntimeError('broken reference')")
    monkeypatch.setattr(kit_check, "KIT_REFERENCE", broken)
    for out in ("third", "fourth"):
        kit_check._KIT_CHECKS.clear()
        assert grade.grade_batch(tmp_path / "subs", tmp_path / out, jobs=1, exercises=["softmax"],
                                 echo=lambda line: None) != 0
    assert planned[2] is not None and planned[3] is not None
    assert sorted((kit_check.passed_store() / "kit-check-use").iterdir()) == kept
    kit_check._KIT_CHECKS.clear()


def test_f8_missing_tests_are_the_kits_failure(tmp_path, monkeypatch):
    from grader.grading import grade
    from grader.tests.test_trust import read_grades

    def without_softmax_tests(hidden, exercises=None):
        return [], ["tests/test_01_softmax.py is missing: exercise softmax is not graded"]

    monkeypatch.setattr(grade, "graded_suite", without_softmax_tests)
    copy_reference(tmp_path / "subs" / "ada")
    code = grade.grade_batch(tmp_path / "subs", tmp_path / "out", jobs=1, exercises=["softmax"], echo=lambda _: None)
    assert code != 0
    row = read_grades(tmp_path / "out")["ada"]
    assert row["status"].startswith("not graded: the kit is broken: tests/test_01_softmax.py is missing")
    assert row["score"] == ""


@pytest.mark.parametrize("source, named", [
    ("import no_such_module\n", "test_extra_softmax.py"),  # F9: does not import (was read as Ctrl-C)
    ("def test_broken(:\n", "test_extra_softmax.py"),  # F9: does not parse
    ("def test_words(impl):\n    impl.softmax(np.array(['a', 'b']))\n", "test_words"),  # F13: the channel's limit
])
def test_f9_f13_a_broken_hidden_test_is_not_graded_for_anyone(tmp_path, source, named):
    from grader.grading.grade import grade_batch
    from grader.tests.test_trust import read_grades

    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "test_extra_softmax.py").write_text(
        "import numpy as np\n\nEXERCISE = 'softmax'\nPOINTS = 3\n\n\n" + source, encoding="utf-8")
    copy_reference(tmp_path / "subs" / "ada")
    code = grade_batch(tmp_path / "subs", tmp_path / "out", jobs=1, exercises=["softmax"], hidden=hidden,
                       echo=lambda _: None)
    assert code == 1
    row = read_grades(tmp_path / "out")["ada"]
    assert row["status"].startswith("not graded: ") and named in row["status"], row["status"]
    assert row["score"] == ""


# ---------------------------------------------------------------- F11, F12: every entry accounted for


def test_f12_an_out_folder_overlapping_the_submissions_is_refused(tmp_path):
    from grader.grading.grade import grade_batch

    copy_reference(tmp_path / "subs" / "ada")
    for out in (tmp_path / "subs", tmp_path / "subs" / "out", tmp_path / "subs" / "ada" / "out", tmp_path):
        lines: list[str] = []
        assert grade_batch(tmp_path / "subs", out, jobs=1, exercises=["softmax"], echo=lines.append) == 2
        assert any("overlap" in line for line in lines), lines
    assert not (tmp_path / "subs" / "grades.csv").exists() and not (tmp_path / "subs" / "out").exists()


def test_f11_skipped_entries_are_named_with_the_reason(tmp_path):
    from grader.grading.grade import grade_batch

    copy_reference(tmp_path / "subs" / "ada")
    (tmp_path / "subs" / ".hidden").mkdir()
    (tmp_path / "subs" / "venv").mkdir()
    lines: list[str] = []
    grade_batch(tmp_path / "subs", tmp_path / "out", jobs=1, exercises=["softmax"], echo=lines.append)
    assert any(".hidden was skipped" in line and "hidden and holds no .py" in line for line in lines), lines
    assert any("venv was skipped" in line for line in lines), lines


def test_a_hidden_entry_that_holds_modules_gets_its_row(tmp_path):
    # Every entry is one row, oddly named included: a dot-named folder with modules (".bob", "...") is graded
    # under a safe id; hidden junk (.DS_Store, an editor's settings folder) is skipped, and said so.
    from grader.grading.grade import grade_batch

    for name in ("ada", ".bob", "..."):
        copy_reference(tmp_path / "subs" / name)
    (tmp_path / "subs" / ".vscode").mkdir()
    (tmp_path / "subs" / ".vscode" / "settings.json").write_text("{}")
    (tmp_path / "subs" / ".DS_Store").write_bytes(b"\0")
    lines: list[str] = []
    assert grade_batch(tmp_path / "subs", tmp_path / "out", jobs=1, exercises=["softmax"], echo=lines.append) == 0
    rows = (tmp_path / "out" / "grades.csv").read_text().splitlines()[1:]
    assert len(rows) == 3 and all(",ok," in row for row in rows), rows
    assert any(".vscode was skipped" in line for line in lines) and any(".DS_Store was skipped" in line
                                                                         for line in lines), lines


# ---------------------------------------------------------------- S1, S4: what the student sees


def test_s1_printed_output_survives_a_killed_worker(isolated, tmp_path):
    folder = copy_reference(tmp_path / "student", softmax=(
        "def softmax(x, axis=-1):\n    print('HELLO-FROM-STUDENT')\n    while True:\n        pass\n"))
    impl = isolated(folder, limits=Limits(call_timeout=1.0))
    with pytest.raises(TimeoutError):
        impl.function("softmax", "softmax")(np.zeros(2))
    assert "HELLO-FROM-STUDENT" in impl.output


def test_s8_numpy_source_lines_are_never_scrubbed():
    from grader.grading.secrets import Secrets

    secrets = Secrets(())
    numpy_line = "x = np.asarray(x)"  # in the reference and in numpy's own source: no secret
    numpy_dir = Path(np.__file__).parent
    assert any(numpy_line in p.read_text(encoding="utf-8") for p in numpy_dir.rglob("*.py"))
    assert secrets.scrub(f"    {numpy_line}") == f"    {numpy_line}"
    secret = next(line for line in secrets.lines if len(line) > 30)  # a line of the reference only: still hidden
    assert "hidden code" in secrets.scrub(f"    {secret}")


def test_s4_a_hidden_test_shows_the_students_own_exception(tmp_path):
    import json

    from grader.grading.grade import grade_batch

    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "test_extra_softmax.py").write_text(
        "import numpy as np\n\nEXERCISE = 'softmax'\nPOINTS = 3\n\n\n"
        "def test_calls(impl):\n    assert impl.softmax(np.zeros((2, 3))).shape == (2, 3)\n", encoding="utf-8")
    copy_reference(tmp_path / "subs" / "ada", softmax=(
        "def softmax(x, axis=-1):\n    raise KeyError('STUDENT-OWN-MESSAGE')\n"))
    grade_batch(tmp_path / "subs", tmp_path / "out", jobs=1, exercises=["softmax"], hidden=hidden,
                echo=lambda _: None)
    tests = json.loads((tmp_path / "out" / "ada" / "results.json").read_text(encoding="utf-8"))["tests"]
    shown = next(t["output"] for t in tests if "hidden" in t.get("tags", []))
    assert "KeyError" in shown and "STUDENT-OWN-MESSAGE" in shown, shown


# ---------------------------------------------------------------- F9-suite: no property for a degenerate output


@pytest.mark.parametrize("body", ["return np.full(np.shape(x), np.nan)", "return np.zeros(np.shape(x))"])
def test_f9_suite_degenerate_softmax_earns_no_shift_invariance(tmp_path, body):
    from grader.grading.grade import grade_batch
    from grader.tests.test_trust import read_grades

    copy_reference(tmp_path / "subs" / "ada", softmax=f"def softmax(x, axis=-1):\n    {body}\n")
    grade_batch(tmp_path / "subs", tmp_path / "out", jobs=1, exercises=["softmax"], echo=lambda _: None)
    import json

    tests = json.loads((tmp_path / "out" / "ada" / "results.json").read_text(encoding="utf-8"))["tests"]
    shift = next(t for t in tests if t["name"].endswith("test_shift_invariance"))
    assert shift["score"] == 0, shift
    assert float(read_grades(tmp_path / "out")["ada"]["softmax"]) == 0


def test_f9_a_broken_manifest_is_one_line_naming_the_file(tmp_path, monkeypatch, capsys):
    from grader import cli, curriculum

    text = curriculum.MANIFEST.read_text(encoding="utf-8")
    for broken in (text.replace("points = 10", 'points = "twenty"', 1), text + "\n[[exercise\n",
                   text.replace('name = "softmax"', "", 1)):
        path = tmp_path / "curriculum.toml"
        path.write_text(broken, encoding="utf-8")
        with pytest.raises(curriculum.ManifestError, match=f"the kit is broken: {path}"):
            curriculum.load(path)
        curriculum.load.cache_clear()
    error = curriculum.ManifestError(f"the kit is broken: {path}: a field has the wrong type")

    def broken_load(*args, **kwargs):
        raise error

    monkeypatch.setattr(curriculum, "load", broken_load)
    assert cli.main(["grade", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.strip() == f"error: not graded: {error}"


def test_f1_a_tests_own_function_run_for_the_student_is_charged_to_the_call(isolated, tmp_path):
    # The test's predict runs in the grading process (it is the test's code); a student's code that calls it
    # again and again spends its own call's CPU time, not free time of the grading process.
    folder = copy_reference(tmp_path / "student", explain=(
        "def occlusion_importance(predict, tokens, target):\n"
        "    while True:\n"
        "        predict(np.asarray(tokens)[None, :].repeat(8, axis=0))\n"))
    impl = isolated(folder, limits=Limits(call_timeout=1.0))

    def predict(tokens):
        total = 0.0
        for _ in range(2000):  # about a millisecond of the grading process's CPU per call
            total += float(np.sum(tokens))
        return np.full((len(tokens), 2), 0.5) + 0 * total

    with pytest.raises(TimeoutError):
        impl.function("explain", "occlusion_importance")(predict, np.array([1, 2, 3]), 0)
    assert impl.spent < 5  # stopped at its 1 CPU-s, the grading side's share included (wall time is the machine's)
    assert impl.reference_spent > 0.3  # the grading side's CPU for the student's requests, charged
    assert not impl.internal


def test_a_looping_function_costs_its_own_exercises_tests_only(isolated, tmp_path):
    # Its exercise's timeouts and time budget run out; another exercise's calls still run, with their own.
    folder = copy_reference(tmp_path / "student", masks="def causal_mask(n):\n    while True:\n        pass\n")
    impl = isolated(folder, limits=Limits(call_timeout=0.3, student_seconds=0.7, total_timeouts=2,
                                          function_timeouts=5))
    mask = impl.function("masks", "causal_mask")
    messages = []
    for _ in range(4):
        with pytest.raises(TimeoutError) as raised:
            mask(3)
        messages.append(str(raised.value))
    assert "was not run" in messages[-1], messages
    softmax = impl.function("softmax", "softmax")
    np.testing.assert_allclose(softmax(np.zeros((2, 4))), np.full((2, 4), 0.25))
    assert impl.spent >= 0.5


def test_a_call_stopped_at_its_cpu_budget_says_how_much_cpu_it_used(isolated, tmp_path):
    folder = copy_reference(tmp_path / "student", softmax="def softmax(x, axis=-1):\n    while True:\n        pass\n")
    impl = isolated(folder, limits=Limits(call_timeout=0.4))
    with pytest.raises(TimeoutError, match=r"did not finish within 0\.4 s: an infinite loop\? \(it used 0\.\d s of "
                                           r"CPU time in \d+\.\d s"):
        impl.function("softmax", "softmax")(np.zeros(3))
