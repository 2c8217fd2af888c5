"""Attacks on `attention-kit grade`: a gradebook an instructor can trust.

One class of attack (or of broken input) per test: submissions written here
try to earn points without their own code, to stop the batch, to inject into
the gradebook, to read what is hidden, or to cost others time. Each must get
its own row and no more than its code deserves.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from grader.curriculum import ROOT, load
from grader.grading.grade import grade_batch
from grader.grading.report import csv_cell, escape_text
from grader.sandbox import frames, protocol
from grader.sandbox import limits as confine
from grader.sandbox.proxy import IsolatedImplementation, Limits, WorkerCrashed
from grader.tests.waiting import HANG_SECONDS

# One xdist worker runs this file: the hostile batch graded once (a module fixture) is then built once,
# not once per worker.
pytestmark = pytest.mark.xdist_group("test_trust")

SOLUTIONS = ROOT / "solutions"
EXERCISES = ["softmax", "attention"]  # attention depends on softmax: fair grading's channel is in use
FAST = Limits(call_timeout=2.0)
MARKER = "MARKER-" + "7f3c9e"  # planted in hidden tests and in a copy of the reference; must reach no output

# Every function forwards its arguments to the reference function of the same name, through the worker's own
# forwarder (found with gc): the submission holds no attention code at all.
FORWARDER = (
    "import gc, __main__\n\n"
    "def _reference(exercise, name):\n"
    "    worker = next(o for o in gc.get_objects() if isinstance(o, __main__.Worker))\n"
    "    return worker.forwarder(exercise, name)\n\n"
)


def forwarding_submission(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for exercise in load().exercises:
        code = FORWARDER + "".join(
            f"def {name}(*args, **kwargs):\n    return _reference({exercise.name!r}, {name!r})(*args, **kwargs)\n\n"
            for name in exercise.functions)
        (folder / exercise.module_file).write_text(code, encoding="utf-8")
    return folder


def copy_reference(target: Path, **appended: str) -> Path:
    shutil.copytree(SOLUTIONS, target, ignore=shutil.ignore_patterns("__pycache__"))
    for module, code in appended.items():
        path = target / f"{module}.py"
        path.write_text(path.read_text(encoding="utf-8") + "\n\n" + code + "\n", encoding="utf-8")
    return target


def course_of_part(folder: Path, monkeypatch: pytest.MonkeyPatch, part: str) -> None:
    """Make a course whose ``[course] part`` is ``part`` the course in force, and its graded selection."""
    from grader import course
    from grader.curriculum import PART_ENV

    folder.mkdir(parents=True, exist_ok=True)
    (folder / course.COURSE_FILE).write_text(f'[course]\ntitle = "a course"\npart = "{part}"\n', encoding="utf-8")
    monkeypatch.setenv(course.COURSE_ENV, str(folder))
    monkeypatch.setenv(PART_ENV, part)


def notebook(cells: list) -> str:
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def read_grades(out: Path) -> dict[str, dict[str, str]]:
    return {row["student"]: row for row in csv.DictReader(io.StringIO((out / "grades.csv").read_text("utf-8")))}


def everything_written(out: Path) -> str:
    return "\n".join(path.read_text(encoding="utf-8", errors="replace") for path in out.rglob("*") if path.is_file())


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """One batch of hostile and broken entries beside honest ones, graded once (as root: with bubblewrap)."""
    root = tmp_path_factory.mktemp("hostile")
    folder = root / "submissions"
    folder.mkdir()
    copy_reference(folder / "honest")
    forwarding_submission(folder / "forwarder")
    (folder / "link_to_solutions").symlink_to(SOLUTIONS)
    (folder / "link_to_classmate").symlink_to(folder / "honest")
    (folder / "link.zip").symlink_to(SOLUTIONS / "softmax.py")
    (folder / "grades.csv").mkdir()  # a student folder named like the gradebook
    shutil.copytree(folder / "honest", folder / "grades.csv", dirs_exist_ok=True)
    copy_reference(folder / "=HYPERLINK(1)")
    copy_reference(folder / "-2+3")
    copy_reference(folder / "bidi\u202egnp.exe")
    copy_reference(folder / os.fsdecode(b"undecodable\xff"))  # a name that is not UTF-8 (a lone surrogate)
    os.mkfifo(folder / "pipe")
    os.mkfifo(folder / "pipe2.zip")  # ids of their own: entries sharing an id are refused before they are read
    os.mkfifo(folder / "pipe3.ipynb")
    (folder / "notes.txt").write_text("not a submission\n")
    copy_reference(folder / "twin")  # a folder and a zip for one student: both refused, none chosen
    with zipfile.ZipFile(folder / "twin.zip", "w") as archive:
        for path in sorted(SOLUTIONS.glob("*.py")):
            archive.write(path, f"hw/{path.name}")
    (folder / "metadata.ipynb").write_text(notebook([{"cell_type": "code", "metadata": [], "source": "x = 1"}]))
    (folder / "source.ipynb").write_text(notebook([{"cell_type": "code", "metadata": {}, "source": 42}]))
    (folder / "cells.ipynb").write_text(notebook(["not a cell"]))
    (folder / "nested.ipynb").write_text("[" * 100_000 + "]" * 100_000)
    deep = "def softmax(x, axis=-1):\n    return " + "(" * 50_000 + "x" + ")" * 50_000 + "\n"
    (folder / "deep.ipynb").write_text(notebook([{"cell_type": "code", "metadata": {}, "source": deep}]))
    loops = "def {0}(*args, **kwargs):\n    while True:\n        pass\n"
    (folder / "looper").mkdir()
    for exercise in EXERCISES:
        names = load().exercise(exercise).functions
        (folder / "looper" / f"{exercise}.py").write_text("".join(loops.format(n) for n in names))
    # Reads the reference's own error text through the channel: its source lines must stay on the grading side.
    copy_reference(folder / "prober", attention=(
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        "    import traceback\n"
        "    try:\n        softmax('not an array', axis='x')\n"
        "    except Exception as error:\n"
        "        raise ValueError('seen: ' + repr(error) + ' '.join(getattr(error, '__notes__', [])))\n"))
    hidden = root / "hidden"
    hidden.mkdir()
    (hidden / "test_secret_softmax.py").write_text(
        "import numpy as np\n\n"
        "EXERCISE = 'softmax'\n\n\n"
        "def test_secret_shape(impl):\n"
        f"    out = impl.softmax(np.zeros((2, 3)))  # {MARKER} call\n"
        f"    assert abs(out.sum() - 2.0) < 1e-9 and '{MARKER}-assert'\n\n\n"
        "def test_secret_raises(impl):\n"
        f"    assert impl.softmax(np.ones(3)).sum() < 1.5  # {MARKER} never\n", encoding="utf-8")
    # Fail the hidden tests: one by an exception inside them, one by a wrong value under a rewritten assert.
    copy_reference(folder / "raiser", softmax="def softmax(x, axis=-1):\n    raise ValueError('mine')\n")
    copy_reference(folder / "wrong", softmax="def softmax(x, axis=-1):\n    return x * 1.0\n")
    out = root / "out"
    printed: list[str] = []
    status = grade_batch(folder, out, jobs=2, hidden=hidden, exercises=EXERCISES, budget=4.0,
                         echo=lambda *args: printed.append(" ".join(map(str, args))))
    return {"folder": folder, "out": out, "status": status, "grades": read_grades(out), "printed": printed}


def test_every_entry_gets_a_row_and_the_gradebook_is_written(hostile):
    entries = [p for p in hostile["folder"].iterdir()]
    assert len(hostile["grades"]) == len(entries), sorted(hostile["grades"])
    assert hostile["status"] == 0  # nothing here is the grader's failure


def test_the_reference_channel_earns_nothing_for_a_submission_without_code(hostile):
    row = hostile["grades"]["forwarder"]
    assert float(row["score"]) == 0, row
    assert "refused" in row["status"]
    results = json.loads((hostile["out"] / "forwarder" / "results.json").read_text())
    assert results["extra_data"]["refused"] and "Refused requests" in results["output"]


def test_symbolic_links_are_not_followed(hostile):
    grades = hostile["grades"]
    for student in ("link_to_solutions", "link_to_classmate", "link"):
        assert float(grades[student]["score"]) == 0, grades[student]
        assert "symbolic link (not followed)" in grades[student]["status"]


def test_fifos_and_unknown_formats_get_a_row_that_says_why(hostile):
    grades = hostile["grades"]
    assert "a FIFO" in grades["pipe"]["status"] and float(grades["pipe"]["score"]) == 0
    assert "a FIFO" in grades["pipe2"]["status"] and "a FIFO" in grades["pipe3"]["status"]
    assert "unsupported format" in grades["notes"]["status"]
    assert grades["pipe"]["status"] != grades["honest"]["status"]


def test_two_entries_for_one_id_are_both_refused_each_in_its_row(hostile):
    grades = hostile["grades"]
    line = "two submissions for twin: twin/ and twin.zip; keep one"
    assert "twin" not in grades, "one of the two entries was chosen for the id"
    assert grades["twin-folder"]["status"] == line and grades["twin.zip"]["status"] == line, grades
    assert float(grades["twin.zip"]["score"]) == 0 and (hostile["out"] / "grades.csv").is_file()
    assert any(line in printed for printed in hostile["printed"]), hostile["printed"]


def test_broken_notebooks_each_get_one_line(hostile):
    grades = hostile["grades"]
    assert grades["metadata"]["status"] == "unreadable notebook: cell 1 metadata is not an object"
    assert grades["source"]["status"] == "unreadable notebook: cell 1 source is not text"
    assert grades["cells"]["status"] == "unreadable notebook: cell 1 is not an object"
    assert "nested too deeply" in grades["nested"]["status"]
    assert float(grades["deep"]["score"]) == 0 and grades["deep"]["status"] != "ok"


def test_an_id_that_collides_with_the_gradebook_is_renamed_and_reported(hostile):
    grades = hostile["grades"]
    renamed = [student for student in grades if student.startswith("grades.csv-")]
    assert renamed and float(grades[renamed[0]]["score"]) == float(grades[renamed[0]]["max_score"])
    assert (hostile["out"] / "grades.csv").is_file()
    assert any("grades.csv" in line and "graded as" in line for line in hostile["printed"])


def test_gradebook_cells_are_not_formulas_and_ids_are_escaped(hostile):
    text = (hostile["out"] / "grades.csv").read_text(encoding="utf-8")
    for cells in csv.reader(io.StringIO(text)):
        for cell in cells[:2]:
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell
    assert "'=HYPERLINK(1)" in hostile["grades"] and "'-2+3" in hostile["grades"]
    assert "\u202e" not in text and "bidi\\u202egnp.exe" in hostile["grades"]
    assert "undecodable\\xff" in hostile["grades"]
    assert "\udcff" not in (hostile["out"] / "grades-long.csv").read_text(encoding="utf-8", errors="surrogateescape")
    assert not any("\u202e" in line for line in hostile["printed"])


def test_calls_that_all_time_out_do_not_say_ok(hostile):
    row = hostile["grades"]["looper"]
    assert "every call timed out or crashed" in row["status"], row
    assert float(row["score"]) == 0
    results = json.loads((hostile["out"] / "looper" / "results.json").read_text())
    assert "time budget" in json.dumps(results)  # the budget cut the rest short, and says so


def test_nothing_hidden_reaches_any_output(hostile):
    written = everything_written(hostile["out"]) + "\n".join(hostile["printed"])
    assert MARKER not in written
    assert "impl.softmax(np.ones(3)).sum() < 1.5" not in written  # the hidden assertion's expression
    for student in ("raiser", "wrong"):
        results = json.loads((hostile["out"] / student / "results.json").read_text())
        hidden = [t for t in results["tests"] if "hidden" in t["tags"]]
        assert hidden and all(t["status"] == "failed" for t in hidden), hidden
        assert all(t["output"].strip() for t in hidden)  # a name and a message, not nothing
    prober = json.loads((hostile["out"] / "prober" / "results.json").read_text())
    seen = [t["output"] for t in prober["tests"] if "seen:" in t["output"]]
    assert seen, "the probe did not run"
    reference_lines = {line.strip() for path in SOLUTIONS.glob("*.py") for line in path.read_text().splitlines()
                       if len(line.strip()) > 30 and not line.strip().startswith(('"', "#", "def ", "Parameters"))}
    for output in seen:
        assert not any(line in output for line in reference_lines), output


def test_honest_submissions_still_get_full_marks(hostile):
    for student in ("honest", "'=HYPERLINK(1)"):
        row = hostile["grades"][student]
        assert row["status"] == "ok" and float(row["score"]) == float(row["max_score"]) > 0, row


# ---------------------------------------------------------------- the channel, directly


@pytest.fixture
def isolated(tmp_path):
    opened: list[IsolatedImplementation] = []

    def build(folder: Path, **options) -> IsolatedImplementation:
        implementation = IsolatedImplementation(folder, limits=options.pop("limits", FAST), **options)
        opened.append(implementation)
        return implementation

    yield build
    for implementation in opened:
        implementation.close()


def test_the_channel_answers_only_the_dependencies_of_the_exercise_under_test(isolated, tmp_path):
    impl = isolated(forwarding_submission(tmp_path / "student"))
    with pytest.raises(PermissionError, match="refused"):
        impl.function("softmax", "softmax")(np.zeros((2, 3)))
    q = np.ones((2, 4))
    with pytest.raises(PermissionError, match="refused"):
        impl.function("attention", "scaled_dot_product_attention")(q, q, q)
    with pytest.raises(PermissionError, match="refused"):  # layer may not ask for layer's own functions
        impl.function("layer", "layer_norm")(q)
    assert impl.refusals == 3
    # What the channel allows is what the manifest's depends say, no more.
    assert impl.allowed_callbacks("attention") == {("softmax", "softmax")}
    assert impl.allowed_callbacks("softmax") == frozenset()


def test_without_fairness_the_channel_answers_nothing(isolated, tmp_path):
    folder = copy_reference(tmp_path / "student", attention=FORWARDER + (
        "def attention_scores(q, k):\n    return _reference('softmax', 'softmax')(q)\n"))
    impl = isolated(folder, fair=False)
    with pytest.raises(PermissionError, match="no-fair"):
        impl.function("attention", "attention_scores")(np.ones((2, 3)), np.ones((2, 3)))
    assert impl.allowed_callbacks("all") == frozenset()


def test_messages_outside_the_protocol_end_the_worker(isolated, tmp_path):
    forged = frames.pack({"op": "callback", "exercise": 7, "function": ["x"], "payload": None}, [])
    write = f"    os.write(int(sys.argv[sys.argv.index('--replies') + 1]), {forged!r})\n    return x\n"
    folder = copy_reference(tmp_path / "student", softmax="def softmax(x, axis=-1):\n    import os, sys\n" + write)
    impl = isolated(folder)
    with pytest.raises(WorkerCrashed, match="protocol does not allow"):
        impl.function("softmax", "softmax")(np.zeros(2))
    with pytest.raises(protocol.ProtocolError):
        protocol.check({"op": "eval", "code": "1"}, protocol.REQUESTS)


def test_a_students_worker_cannot_send_answers_of_its_own(isolated, tmp_path):
    """What the kit's check does (callbacks answered in its worker, sent sealed) ends a student's worker."""
    folder = copy_reference(tmp_path / "student", attention=FORWARDER + (
        "def attention_scores(q, k):\n"
        "    worker = next(o for o in gc.get_objects() if isinstance(o, __main__.Worker))\n"
        "    worker.answer_here = True\n"
        "    return _reference('softmax', 'softmax')(q)\n"))
    impl = isolated(folder)
    with pytest.raises(WorkerCrashed, match="protocol does not allow"):
        impl.function("attention", "attention_scores")(np.ones((2, 3)), np.ones((2, 3)))


def test_the_worker_handles_only_the_requests_the_protocol_lists():
    import ast

    functions = {}  # the worker's own code and the fork server's
    for name in ("worker.py", "forkserver.py"):
        tree = ast.parse((ROOT / "grader" / "sandbox" / name).read_text(encoding="utf-8"))
        functions |= {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}

    def handled(function: str) -> set[str]:
        return {node.comparators[0].value for node in ast.walk(functions[function])
                if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "op"
                and isinstance(node.comparators[0], ast.Constant)}

    assert handled("dispatch") == set(protocol.REQUESTS)  # what the grading process may ask a worker
    assert handled("serve") == set(protocol.SERVER_REQUESTS)  # what it may ask the fork server
    elsewhere = {op for name in functions if name not in ("dispatch", "serve") for op in handled(name)}
    assert not elsewhere, f"operations handled outside dispatch() and serve(): {elsewhere}"


def test_a_reference_error_reaches_the_student_as_type_and_message_only(isolated, tmp_path):
    # A copy of the reference whose softmax raises, on a line that carries a marker.
    reference = copy_reference(tmp_path / "reference", softmax=(
        "_original = softmax\n\n\ndef softmax(x, axis=-1):\n    if isinstance(x, str):\n"
        f"        raise ValueError('the reference refuses strings')  # {MARKER}\n"
        "    return _original(x, axis)\n"))
    student = copy_reference(tmp_path / "student", attention=(
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        "    try:\n        softmax('text')\n"
        "    except Exception as error:\n"
        "        raise RuntimeError(type(error).__name__ + ': ' + str(error) + ' | '"
        " + ' '.join(getattr(error, '__notes__', [])))\n"))
    impl = isolated(student, reference=reference)
    q = np.ones((2, 3))
    with pytest.raises(RuntimeError) as info:
        impl.function("attention", "scaled_dot_product_attention")(q, q, q)
    text = str(info.value) + "".join(getattr(info.value, "__notes__", []))
    assert "ValueError: the reference refuses strings" in text
    assert MARKER not in text and "softmax.py line" not in text.split("|")[1]


# ---------------------------------------------------------------- bounded cost


def test_a_slow_submission_runs_out_of_its_budget_not_of_everyones_time(isolated, tmp_path):
    folder = copy_reference(tmp_path / "student", softmax=(
        "def softmax(x, axis=-1):\n    import time\n    time.sleep(0.4)\n    return x\n"))
    impl = isolated(folder, limits=Limits(call_timeout=1.0, student_seconds=1.0))
    softmax = impl.function("softmax", "softmax")
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="time budget"):
        for _ in range(10):
            softmax(np.zeros(2))
    assert time.monotonic() - started < 3.0
    with pytest.raises(TimeoutError, match="was not run: your code has used up its time"):
        softmax(np.zeros(2))
    # The budget is the exercise's: another exercise's functions still run, with a budget of their own.
    assert impl.function("masks", "causal_mask")(2).shape == (2, 2)


def test_a_huge_reply_is_refused_before_it_is_read(isolated, tmp_path):
    folder = copy_reference(tmp_path / "student", softmax=(
        "def softmax(x, axis=-1):\n    import numpy\n    return numpy.ones(3_000_000)\n"))
    impl = isolated(folder, limits=Limits(call_timeout=5.0, reply_bytes=4 << 20))
    with pytest.raises(WorkerCrashed, match="more than the grader accepts"):
        impl.function("softmax", "softmax")(np.zeros(2))
    assert len(impl._channel.buffer) < 1 << 20  # the reply was never buffered whole
    assert impl.function("masks", "causal_mask")(2).shape == (2, 2)  # a fresh worker


# ---------------------------------------------------------------- isolation, or a refusal


def grade_command(folder: Path, out: Path, *options: str, env: dict | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "grader", "grade", str(folder), "--out", str(out), "--jobs", "1",
               "--exercise", "softmax", *options]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=HANG_SECONDS,
                          env={**os.environ, **(env or {})})


def test_without_namespaces_the_grader_refuses_and_says_how_to_get_them(tmp_path):
    folder = tmp_path / "subs"
    copy_reference(folder / "ada")
    done = grade_command(folder, tmp_path / "out", env={confine.SIMULATE_NO_BWRAP: "1"})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "apt-get install bubblewrap" in done.stdout and "Gradescope" in done.stdout
    assert not (tmp_path / "out" / "ada").exists()  # no student code ran


def test_accepting_no_isolation_is_said_everywhere(tmp_path):
    folder = tmp_path / "subs"
    copy_reference(folder / "ada")
    out = tmp_path / "out"
    done = grade_command(folder, out, "--accept-no-isolation", env={confine.SIMULATE_NO_BWRAP: "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "NOT ISOLATED" in done.stdout
    assert "graded without isolation" in read_grades(out)["ada"]["status"]
    assert "WITHOUT isolation" in (out / "ada" / "feedback.md").read_text()


def test_container_mode_runs_student_code_as_an_unprivileged_user_or_refuses(tmp_path):
    folder = tmp_path / "subs"
    copy_reference(folder / "ada", softmax="def softmax(x, axis=-1):\n    import os\n    print('uid', os.getuid())\n"
                                           "    raise ValueError('uid %d' % os.getuid())\n")
    out = tmp_path / "out"
    done = grade_command(folder, out, "--container", env={confine.SIMULATE_NO_BWRAP: "1"})
    if done.returncode == 2:  # as root with an interpreter nobody else can read: never run as root; or the
        # checkout's reference reachable by other users, which a worker without namespaces could read
        assert (os.geteuid() == 0 and "unprivileged user" in done.stdout) or \
            "--container runs student code without namespaces, as users who could read" in done.stderr, \
            done.stdout + done.stderr
        assert not (out / "ada").exists()  # no student code ran
        return
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((out / "ada" / "results.json").read_text())
    assert "container" in results["extra_data"]["isolation"]
    if os.geteuid() == 0:
        assert "uid 0" not in json.dumps(results)


def test_container_mode_refuses_while_another_user_could_reach_the_kits_secrets(monkeypatch):
    # A hostile round: --container (no namespaces) with a checkout others can read: a worker read solutions/.
    from grader.grading import grade
    from grader.sandbox import given

    base = Path(tempfile.mkdtemp(prefix="attention-kit-container-"))  # in the system's temp folder: o+x above
    try:
        kit = base / "kit"
        reference, hidden = kit / "solutions", kit / "hidden"
        for folder in (reference, hidden):
            folder.mkdir(parents=True)
        for folder in (base, kit, reference, hidden):
            os.chmod(folder, 0o755)
        monkeypatch.setattr(grade, "reference_dir", lambda: reference)
        monkeypatch.setattr(given, "folder", lambda: None)
        if any(not path.stat().st_mode & 0o001 for path in base.resolve().parents):
            pytest.fail(f"the system's temp folder {base.parent} is not passable by others: this test needs one")
        assert grade._exposed_to_workers([hidden]) == str(reference)
        os.chmod(reference, 0o700)
        assert grade._exposed_to_workers([hidden]) == str(hidden)
        os.chmod(kit, 0o700)  # as the Gradescope runner closes the bundle's kit
        assert grade._exposed_to_workers([hidden]) == ""
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="starting processes as another user needs root")
def test_every_process_of_an_unconfined_worker_is_killed_by_its_uid():
    uid = confine.fresh_uid()
    assert uid != confine.fresh_uid()
    sleeper = shutil.which("sleep") or "/bin/sleep"
    # A daemon: its own session, parent gone. A session kill would miss it; a uid kill does not.
    started = [subprocess.Popen(["setsid", sleeper, "60"], user=uid, group=confine.UNPRIVILEGED_GID,
                                extra_groups=[], start_new_session=True) for _ in range(3)]
    time.sleep(0.3)
    owned = [pid for pid in os.listdir("/proc") if pid.isdigit() and confine._owner(pid) == uid]
    assert owned
    confine.kill_user(uid)
    for process in started:
        process.wait(timeout=HANG_SECONDS)
    time.sleep(0.2)
    assert not [pid for pid in os.listdir("/proc") if pid.isdigit() and confine._owner(pid) == uid
                and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"]


@pytest.mark.skipif(os.geteuid() != 0, reason="starting processes as another user needs root")
def test_an_unconfined_workers_processes_cannot_stop_the_kill_of_their_uid():
    uid = confine.fresh_uid()
    # A process that SIGSTOPs everything its user may signal, over and over: a killer running as that user
    # would be stopped before it could kill it.
    # One of them (two would stop each other; and one started from here after the first could be stopped
    # between taking the user and executing, and never start).
    started = [subprocess.Popen(["sh", "-c", "while :; do kill -STOP -1 2>/dev/null; done"], user=uid,
                                group=confine.UNPRIVILEGED_GID, extra_groups=[], start_new_session=True)]
    try:
        time.sleep(0.3)
        confine.kill_user(uid)  # returns only once they are gone: the killer has no timeout to fall back on
        for process in started:
            process.wait(timeout=HANG_SECONDS)
        time.sleep(0.2)
        assert not [pid for pid in os.listdir("/proc") if pid.isdigit() and confine._owner(pid) == uid
                    and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"]
    finally:
        for process in started:
            process.kill()


def test_as_an_ordinary_user_the_grader_refuses_or_isolates(tmp_path):
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to run the grader as another user")
    if not confine._readable_by_others(os.path.realpath(sys.executable)):
        pytest.skip(f"the interpreter {os.path.realpath(sys.executable)} cannot be read by another user here")
    folder = tmp_path / "subs"
    copy_reference(folder / "ada")
    out = tmp_path / "out"
    for path in (tmp_path, folder, folder / "ada"):
        os.chmod(path, 0o777)
    command = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m", "grader", "grade",
               str(folder), "--out", str(out), "--jobs", "1", "--exercise", "softmax"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=HANG_SECONDS,
                          env={**os.environ, confine.SIMULATE_NO_BWRAP: "1", "HOME": str(tmp_path)})
    assert done.returncode == 2 and "apt-get install bubblewrap" in done.stdout, done.stdout + done.stderr


# ---------------------------------------------------------------- the grader's own failures


def test_a_broken_configuration_is_not_graded_never_a_zero(tmp_path):
    kit = tmp_path / "kit"
    for name in ("grader", "tests", "solutions", "exercises", "conftest.py"):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, kit / name, ignore=shutil.ignore_patterns("__pycache__", "tests" if name ==
                                                                               "grader" else "__nothing__"))
        elif source.is_file():
            shutil.copyfile(source, kit / name)
    folder = tmp_path / "subs"
    copy_reference(folder / "ada")
    out = tmp_path / "out"
    command = [sys.executable, "-m", "grader", "grade", str(folder), "--out", str(out), "--jobs", "1",
               "--exercise", "softmax", "--hidden", str(tmp_path / "nothing")]
    (tmp_path / "nothing").mkdir()
    done = subprocess.run(command, cwd=kit, capture_output=True, text=True, timeout=HANG_SECONDS,
                          env={**os.environ, "PYTHONPATH": str(kit)})
    assert done.returncode == 1, done.stdout + done.stderr
    row = read_grades(out)["ada"]
    assert row["status"].startswith("not graded: "), row
    assert row["score"] == "" and row["softmax"] == ""  # no score recorded, not a zero
    assert "rerun" in done.stdout
    # Fixed, a rerun grades the student (without --force).
    shutil.copyfile(ROOT / "pyproject.toml", kit / "pyproject.toml")
    done = subprocess.run(command, cwd=kit, capture_output=True, text=True, timeout=HANG_SECONDS,
                          env={**os.environ, "PYTHONPATH": str(kit)})
    assert done.returncode == 0, done.stdout + done.stderr
    row = read_grades(out)["ada"]
    assert row["status"] == "ok" and float(row["score"]) == float(row["max_score"]) > 0


def test_a_worker_that_does_not_start_is_the_graders_failure(tmp_path, monkeypatch):
    from grader.grading import grade, session
    from grader.grading.records import Job, suite_files

    monkeypatch.setenv("ATTENTION_KIT_FRESH_PYTEST", "1")  # no second long-lived pytest session inside this one
    monkeypatch.setattr(confine, "command", lambda *args, **kwargs: ([sys.executable, "-c", "raise SystemExit(3)"],
                                                                    str(tmp_path)))
    # A fork server (where workers are forked) that does not start either; none of this process's is reused.
    monkeypatch.setattr(confine, "server_command", lambda *args, **kwargs: [sys.executable, "-c", "exit(3)"])
    from grader.sandbox import process

    monkeypatch.setattr(process, "_SERVER", [])
    folder = copy_reference(tmp_path / "ada")
    suite = [f for f in grade.graded_suite(None, ["softmax"])[0]]
    job = Job(student="ada", folder=str(folder), files=tuple(f.path for f in suite), suite=suite_files(suite))
    result = session.grade_in_process(job)
    assert result.records and all(r.internal for r in result.records), result.records[:2]
    from grader.grading.report import score_tests

    tests = score_tests(result.records, suite, {}, result.error)
    assert tests and not any(t.graded for t in tests)


# ---------------------------------------------------------------- safe text


@pytest.mark.parametrize("text, cell", [
    ("=1+1", "'=1+1"), ("+SUM(A1)", "'+SUM(A1)"), ("-2", "'-2"), ("@cmd", "'@cmd"), ("\tx", "\\x09x"),
    ("ada", "ada"), ("a\u202eb", "a\\u202eb"), ("\uff1dformula", "'\uff1dformula"), ("x\ny", "x\\x0ay"),
    ("'=eve", "''=eve"), ("'ada", "''ada"), ("o'brien", "o'brien"),
])
def test_csv_cells(text, cell):
    assert csv_cell(text) == cell


def test_two_ids_never_share_a_csv_cell():
    # A hostile round: an entry named '=eve was written as the cell of the student =eve ('=eve), two rows alike.
    ids = ["=eve", "'=eve", "''=eve", "+1", "'+1", "'", "''", "eve", "'eve", "@x", "'@x"]
    assert len({csv_cell(student) for student in ids}) == len(ids)


def test_undecodable_and_invisible_characters_are_shown_escaped():
    assert escape_text("bad\udcffname") == "bad\\xffname"
    assert escape_text("zero\u200bwidth") == "zero\\u200bwidth"
    assert escape_text("line\nbreak", keep="\n") == "line\nbreak"


def test_a_fifo_in_place_of_a_notebook_does_not_hang(tmp_path):
    from grader.grading import submissions

    os.mkfifo(tmp_path / "ada.ipynb")
    assert stat.S_ISFIFO(os.lstat(tmp_path / "ada.ipynb").st_mode)
    started = time.monotonic()
    prepared = submissions.prepare(tmp_path / "ada.ipynb", tmp_path / "work")
    assert "FIFO" in prepared.status and time.monotonic() - started < 5


def test_a_missing_data_file_of_the_tests_is_the_graders_failure(tmp_path, monkeypatch):
    from grader.grading import session
    from grader.grading.records import Job, suite_files
    from grader.grading.report import score_tests

    monkeypatch.setenv("ATTENTION_KIT_FRESH_PYTEST", "1")  # no second long-lived pytest session inside this one
    test_file = tmp_path / "test_needs_data_softmax.py"
    test_file.write_text(
        "import numpy as np\n\nEXERCISE = 'softmax'\n\n\n"
        "def test_with_data(impl):\n    impl.softmax(np.zeros(3))\n    np.load('/nonexistent/golden.npz')\n\n\n"
        "def test_student_timeout(impl):\n    raise TimeoutError('softmax() did not finish')\n", encoding="utf-8")
    from grader.suite import TestFile

    suite = [TestFile(str(test_file), "softmax", None, hidden=True)]
    folder = copy_reference(tmp_path / "ada")
    job = Job(student="ada", folder=str(folder), files=(str(test_file),), suite=suite_files(suite))
    records = {r.nodeid.split("::")[-1]: r for r in session.grade_in_process(job).records}
    assert "FileNotFoundError" in (records["test_with_data"].internal or "")
    assert not records["test_student_timeout"].internal  # a timeout is the student's
    tests = score_tests(list(records.values()), suite, {}, None)
    assert sum(not t.graded for t in tests) == 1


def test_a_reused_pytest_session_grades_exactly_as_a_fresh_one(tmp_path, monkeypatch):
    """The grading processes collect the suite once and rerun it per student, with a warm worker waiting for the
    next student: same rows, same feedback as pytest.main and a fresh worker per student."""
    from grader.grading import pool
    from grader.grading.samples import plant_mutants

    folder = tmp_path / "subs"
    copy_reference(folder / "a_correct")
    for index, mutant in enumerate(plant_mutants(tmp_path / "pool", 4)):
        shutil.copytree(mutant, folder / f"mutant{index}")
    copy_reference(folder / "z_correct")
    outcome = {}
    for fresh in ("", "1"):
        pool.stop_idle()  # new grading processes, which read the setting when they start
        monkeypatch.setenv("ATTENTION_KIT_FRESH_PYTEST", fresh)
        monkeypatch.setenv("ATTENTION_KIT_NO_SPARE", fresh)  # and without a warm worker
        out = tmp_path / f"out{fresh or 0}"
        assert grade_batch(folder, out, jobs=1, hidden=None, exercises=EXERCISES, echo=lambda *a: None) == 0
        outcome[fresh] = {student: ((out / student / "feedback.md").read_text(),
                                    [(t["name"], t.get("score"), t["status"], t["output"]) for t in  # not durations
                                     json.loads((out / student / "results.json").read_text())["tests"]])
                          for student in read_grades(out)}
        outcome[fresh]["grades.csv"] = (out / "grades.csv").read_text()
    pool.stop_idle()
    assert outcome[""] == outcome["1"]


def test_the_isolation_policy(monkeypatch):
    """Namespaces: always used. Without: refuse; a container runs as an unprivileged user; 'none' says so."""
    bwrap = confine.Plan("bwrap", 65534, "namespaces (bwrap)")
    unconfined = confine.Plan("rlimits", 65534, "rlimits only", isolated=False, missing="bwrap is not installed")
    unreadable = confine.Plan("rlimits", None, "rlimits only", isolated=False, missing="bwrap is not installed")
    for found, policy, expected in [(bwrap, "require", "bwrap"), (bwrap, "container", "bwrap"),
                                    (unconfined, "container", "container"), (unconfined, "none", "rlimits")]:
        monkeypatch.setattr(confine, "plan", lambda found=found: found)
        confine.choose.cache_clear()
        chosen = confine.choose(policy)
        assert chosen.mode == expected, (found, policy, chosen)
        assert chosen.isolated == (policy != "none" or found.mode == "bwrap")
        if policy == "none" and found.mode != "bwrap":
            assert chosen.description.startswith("NOT ISOLATED")
    for found, policy in [(unconfined, "require"), (unreadable, "require")] + (
            [(unreadable, "container")] if os.geteuid() == 0 else []):
        monkeypatch.setattr(confine, "plan", lambda found=found: found)
        confine.choose.cache_clear()
        with pytest.raises(confine.IsolationUnavailable):
            confine.choose(policy)
    confine.choose.cache_clear()
