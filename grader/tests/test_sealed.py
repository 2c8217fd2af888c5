"""Fair grading's answers known in advance, sealed: the same grades, fewer round trips, nothing a worker could not ask.

The kit's check records the reference's answers to its callbacks (``grader.sandbox.sealed``); a student's worker
then opens, without asking, the answer to a question the check asked, and only with that question (issue 33: the
round trips were more than half of what grading a student of every part cost).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np

from grader.curriculum import ROOT
from grader.sandbox import frames
from grader.sandbox.sealed import Sealed, read
from grader.tests.test_trust import copy_reference
from grader.tests.waiting import HANG_SECONDS


def _callback(values: np.ndarray) -> bytes:
    return frames.pack({"op": "callback", "exercise": "softmax", "function": "softmax", "payload": {"$a": 0}},
                       [values])


def test_a_sealed_answer_opens_only_with_its_own_question() -> None:
    question = _callback(np.arange(6.0).reshape(2, 3))
    answer = frames.pack({"status": "ok", "payload": {"$a": 0}}, [np.full((2, 3), 0.25)])
    index, key = frames.seal_keys(question)
    sealed = frames.seal(key, answer)
    assert frames.seal(key, sealed) == answer
    assert b'"status"' not in sealed and np.full((2, 3), 0.25).tobytes() not in sealed
    other_index, other_key = frames.seal_keys(_callback(np.arange(6.0).reshape(2, 3) + 1e-12))
    assert other_index != index and frames.seal(other_key, sealed) != answer
    # Neither digest is the other, nor the question's plain SHA-256 (which anyone could compute from an index).
    assert len({index, key[:frames.SEAL_INDEX], __import__("hashlib").sha256(question).digest()[:20]}) == 3


def test_the_keystream_is_aes_256_ctr_where_openssl_is_reached_and_shake_otherwise(monkeypatch) -> None:
    # NIST SP 800-38A, F.5.5 (CTR-AES256.Encrypt): its key, its first counter block, its first plaintext block.
    key = bytes.fromhex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4")
    counter = bytes.fromhex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff")
    out = bytearray(16)
    assert frames._AES is not None and frames.SEAL_CIPHER == "aes-256-ctr"  # this machine's hashlib is OpenSSL's
    frames._AES(key, bytes.fromhex("6bc1bee22e409f96e93d7e117393172a"), out, counter)
    assert out.hex() == "601ec313775789a5b7a7f504bbf3d228"
    # A zero counter, and a keystream that does not repeat within an answer of megabytes (a 16-byte block).
    data = bytes(3 << 20)
    stream = bytes(frames.seal(key, data))
    assert stream[:16] != stream[16:32] and stream[-16:] != stream[:16] and frames.seal(key, stream) == data
    # A key of another length is hashed to 32 bytes, never read past its end.
    assert frames.seal(b"short", frames.seal(b"short", b"answer")) == b"answer" != frames.seal(b"short", b"answer")
    # Without OpenSSL: SHAKE-128, a keystream of its own, and a file of answers of its own name.
    monkeypatch.setattr(frames, "_AES", None)
    assert bytes(frames.seal(key, data)) == __import__("hashlib").shake_128(key).digest(len(data)) != stream
    from grader.sandbox import sealed

    here = sealed.reference_digest(ROOT / "solutions")
    monkeypatch.setattr(frames, "SEAL_CIPHER", "shake-128")
    assert sealed.reference_digest(ROOT / "solutions") != here


def test_only_the_kits_check_records_and_a_worker_gets_one_views_answers(tmp_path: Path) -> None:
    table = Sealed()
    question, answer = _callback(np.ones(3)), frames.pack({"status": "ok", "payload": 1.5}, [])
    table.record("attention", question, answer, 0.25)  # a student's callback: never recorded
    table.recording(True)
    table.record("attention", question, answer, 0.25)
    assert table.request("attention", 1 << 20) is None  # while recording every callback must reach the grader
    path = tmp_path / "answers" / "kit.frame"
    table.save(path)
    assert table.recorded is None
    table.use(path)
    frame = table.request("attention", 1 << 20)
    assert frame is not None and table.request("attention", 1 << 20) is frame  # packed once, sent to every worker
    (header, arrays), _ = frames.unpack(frame)
    assert header["op"] == "answers" and header["view"] == "attention" and len(header["entries"]) == 1
    index, size, cpu = header["entries"][0]
    assert (size, cpu) == (len(answer), 0.25) and arrays[0].nbytes == size
    assert bytes.fromhex(index) == frames.seal_keys(question)[0]
    assert table.request("multihead", 1 << 20) is None and table.request("attention", len(frame) - 1) is None
    whole = path.read_bytes()
    path.write_bytes(whole[:-3])  # a damaged file: no answers, and grading goes on as before
    assert read(path) == {}
    table.use(path)
    assert table.request("attention", 1 << 20) is None
    path.write_bytes(whole.replace(bytes(header["entries"][0][0], "ascii"), b"not an index"))  # a bad header too
    table.use(path)
    assert table.request("attention", 1 << 20) is None
    path.write_bytes(whole)  # and the same file whole again: read again, its answers given
    table.use(path)
    assert table.request("attention", 1 << 20) == frame


def _saved_table(path: Path) -> Sealed:
    """A table of two views' answers, saved to ``path`` as the kit's check saves them, and in force."""
    table = Sealed()
    table.recording(True)
    for view, count in (("attention", 3), ("training", 2)):
        for number in range(count):
            table.record(view, _callback(np.full(4, float(number))),
                         frames.pack({"status": "ok", "payload": {"$a": 0}}, [np.arange(50.0) * number]), 0.5)
    table.save(path)
    table.use(path)
    return table


def test_a_worker_given_a_views_answers_never_grades_an_exercise_they_answer() -> None:
    """A view's answers are about its dependencies' functions: a worker given them is replaced before it grades one
    of those, and one told to forget them is replaced all the same (its code could have copied them)."""
    from grader.curriculum import load as load_curriculum
    from grader.sandbox.protocol import VIEW_ALL
    from grader.sandbox.sealed import Held

    curriculum = load_curriculum()
    held = Held(curriculum.dependencies)
    assert "softmax" in curriculum.dependencies("attention") and "attention" not in curriculum.dependencies("masks")
    held.given("softmax", 0)  # asked, none: nothing held
    assert not any(held.about(view) for view in ("softmax", "attention", VIEW_ALL))
    held.given("attention", 120)
    assert held.about("softmax") and not held.about("attention") and not held.about("masks")
    assert not held.about(VIEW_ALL)  # a preload or a signature: no exercise's call
    held.sizes = {"attention": 0}  # told to forget: still about softmax
    assert held.about("softmax")
    held.reset()  # a new worker
    assert not held.about("softmax") and held.sizes == {}
    held.given(VIEW_ALL, 10)  # answers of the view of every exercise: about every one
    assert held.about("masks") and held.about("attention") and not held.about(VIEW_ALL)


def test_a_question_is_hashed_as_its_packed_frame_would_be() -> None:
    rng = np.random.default_rng(3)
    arrays = [rng.normal(size=(3, 4)), np.asfortranarray(rng.normal(size=(4, 5))), rng.normal(size=(6, 6))[::2, 1:],
              np.arange(4, dtype=np.int32), np.zeros((0, 2)), np.array(True)]
    header = {"op": "callback", "exercise": "attention", "function": "scaled_dot_product_attention",
              "payload": [[{"$a": 0}, {"$a": 1}], {}]}
    assert frames.question_keys(header, arrays) == frames.seal_keys(frames.pack(header, arrays))
    assert frames.question_keys(header, arrays[:-1]) != frames.seal_keys(frames.pack(header, arrays))


def test_each_views_answers_go_to_a_worker_once_and_within_an_eighth_of_its_memory(monkeypatch) -> None:
    from types import SimpleNamespace

    from grader.sandbox import proxy

    sizes = {"attention": 40, "training": 50, "negation": 30, "retrieval": 0}
    monkeypatch.setattr(proxy.SEALED, "request",
                        lambda view, most: (b"x" * sizes[view] if 0 < sizes[view] <= most else None))
    sent: list[bytes] = []
    allowed: list[int] = []  # the worker's memory limit above the student's: what it holds of the kit's
    fake = SimpleNamespace(limits=SimpleNamespace(memory_bytes=8 * 100), _sealed=proxy.Held(lambda view: ()),
                           fair=True, path="student", reference="reference",
                           _channel=SimpleNamespace(send=lambda data, deadline: sent.append(data)),
                           _group=SimpleNamespace(allow=allowed.append))
    for view in ("attention", "training", "retrieval"):
        proxy.IsolatedImplementation._send_sealed(fake, view, 0.0)
    assert [len(frame) for frame in sent] == [40, 50] and fake._sealed.sizes == {"attention": 40, "training": 50,
                                                                                    "retrieval": 0}
    proxy.IsolatedImplementation._send_sealed(fake, "negation", 0.0)  # 120 > 100: the worker forgets the others
    forget, frame = sent[2:]
    (header, _), _ = frames.unpack(forget)
    assert header == {"op": "forget_answers", "views": ["attention", "training"]} and len(frame) == 30
    assert fake._sealed.sizes == {"retrieval": 0, "negation": 30}  # the others are sent again when they come back
    assert allowed == [40, 90, 30]


GRADE_TWICE = r'''
import json, os, shutil, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
os.chdir(sys.argv[1])
from grader.curriculum import load
from grader.grading import kit_check, session
from grader.grading.records import Job, suite_files
from grader.sandbox import proxy
from grader.suite import graded_suite

names = list(load().selected_names("1"))
suite, _ = graded_suite(None, names)
options = {"files": tuple(f.path for f in suite), "suite": suite_files(suite), "part": "1"}
crossed = []
answer_key = proxy.answer_key
def counted(reference, view, frame):
    key = answer_key(reference, view, frame)
    crossed[-1] += key is not None
    return key
proxy.answer_key = counted

def graded(student, folder, **extra):
    crossed.append(0)
    result = session.grade_in_process(Job(student=student, folder=folder, **options, **extra))
    assert result.error is None, result.error
    return {"crossed": crossed[-1], "tests": [[r.nodeid, r.outcome, r.message] for r in result.records]}

out = {"check": graded(kit_check.REFERENCE_ENTRY, sys.argv[2], kit_check=True,  # a copy of the reference in force
                       answers=str(kit_check.answers_file()))}
out["answers"] = kit_check.answers_file().stat().st_size
for name in ("correct", "mistaken"):
    out[name] = graded(name, sys.argv[3 if name == "correct" else 4])
kit_check.answers_file().unlink()  # the same students, every question asked: what they got before
proxy._ANSWERS.clear()
for name in ("correct", "mistaken"):
    out[name + "-asked"] = graded(name, sys.argv[3 if name == "correct" else 4])
print(json.dumps(out))
'''


def test_students_opening_sealed_answers_get_the_grades_they_get_by_asking(tmp_path: Path) -> None:
    reference, correct = copy_reference(tmp_path / "reference"), copy_reference(tmp_path / "correct")
    mistaken = copy_reference(tmp_path / "mistaken")
    module = mistaken / "multihead.py"
    text = module.read_text(encoding="utf-8")
    assert "return np.swapaxes(x, -3, -2)" in text
    module.write_text(text.replace("return np.swapaxes(x, -3, -2)", "return np.swapaxes(x, -3, -2)[..., ::-1]"),
                      encoding="utf-8")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", GRADE_TWICE, str(ROOT), str(reference), str(correct), str(mistaken)],
                          capture_output=True, text=True, env=env, timeout=HANG_SECONDS, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    # The check answers its callbacks in its own worker (its folder is the reference): none crosses, all recorded.
    assert out["check"]["crossed"] == 0 and out["answers"] > 0, out["check"]["crossed"]
    # The correct student asks only what the check asked: every answer opened in its worker, none asked.
    assert out["correct"]["crossed"] == 0 and out["correct-asked"]["crossed"] > 50
    assert all(outcome == "passed" for _, outcome, _ in out["correct"]["tests"])
    # The mistaken one asks other questions too (its heads are wrong): those still cross, and are answered.
    assert 0 < out["mistaken"]["crossed"] < out["mistaken-asked"]["crossed"]
    for name in ("correct", "mistaken"):
        assert out[name]["tests"] == out[name + "-asked"]["tests"], name
    assert any(outcome == "failed" for _, outcome, _ in out["mistaken"]["tests"])


SPOILER = """
import gc as _gc
SPOILED = []
_honest_attention = scaled_dot_product_attention
def scaled_dot_product_attention(q, k, v, mask=None):  # zeroes the sealed answers its worker holds, then is right
    if not SPOILED:
        for _o in _gc.get_objects():
            if type(_o).__name__ == "Worker" and isinstance(getattr(_o, "sealed", None), dict):
                for _entries, _body in list(_o.sealed.values()):
                    _bytes = np.frombuffer(_body, np.uint8)
                    if _bytes.size and _bytes.flags.writeable:
                        _bytes[:] = 0
                        SPOILED.append(_bytes.size)
    return _honest_attention(q, k, v, mask=mask)
"""


def test_a_worker_that_overwrites_its_answers_changes_only_its_own(tmp_path: Path) -> None:
    """Students graded one after another by one grading process are sent the same answers: a student's code that
    finds its worker's copy and zeroes it spoils its own copy (its questions are then asked, and answered), never the
    next student's answers."""
    reference, correct = copy_reference(tmp_path / "reference"), copy_reference(tmp_path / "correct")
    hostile = copy_reference(tmp_path / "hostile", attention=SPOILER)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    first = 'for name in ("correct", "mistaken"):\n    out[name] = graded('
    script = GRADE_TWICE.replace(first, first.replace('"correct", "mistaken"', '"mistaken", "correct"'), 1)
    assert script != GRADE_TWICE
    done = subprocess.run([sys.executable, "-c", script, str(ROOT), str(reference), str(correct), str(hostile)],
                          capture_output=True, text=True, env=env, timeout=HANG_SECONDS, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["mistaken"]["crossed"] > 0  # its zeroed answers open to nothing: it asks instead...
    assert {outcome for _, outcome, _ in out["mistaken"]["tests"]} == {"passed"}  # ...and is answered, as asked
    assert out["correct"]["crossed"] == 0 and all(outcome == "passed" for _, outcome, _ in out["correct"]["tests"])
    assert out["correct"]["tests"] == out["correct-asked"]["tests"]


CHECK_OF_A_PART = r'''
import json, os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
os.chdir(sys.argv[1])
os.environ["ATTENTION_KIT_PART"] = "2"
from grader.curriculum import load
from grader.grading import kit_check, session
from grader.grading.records import Job, suite_files
from grader.sandbox import proxy
from grader.suite import graded_suite

suite, _ = graded_suite(None, list(load().selected_names()))
job = Job(student="a student", folder=sys.argv[2], files=tuple(f.path for f in suite), suite=suite_files(suite),
          part="2")
known, check, _ = kit_check.plan(suite, job, Path(sys.argv[2]), "a fingerprint")
assert known is None and check is not None, known
crossed = []
answer_key = proxy.answer_key
def counted(reference, view, frame):
    key = answer_key(reference, view, frame)
    crossed.append(key is not None)
    return key
proxy.answer_key = counted
result = session.grade_in_process(check)
assert result.error is None, result.error
print(json.dumps({"crossed": sum(crossed), "modules": sorted(p.name for p in Path(check.folder).glob("*.py")),
                  "files": sorted(Path(path).name for path in check.files),
                  "outcomes": sorted({r.outcome for r in result.records})}))
'''


def test_the_check_of_one_part_answers_the_callbacks_to_earlier_parts_itself(tmp_path: Path) -> None:
    """A selection's check holds the reference's modules its exercises build on, and grades only the selection.

    Without them, each of its callbacks to Part I crossed to the grading process and to a worker of the reference
    (a kit's first batch of Part III alone cost about 1.5 core-seconds more).
    """
    (tmp_path / "work").mkdir()
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", CHECK_OF_A_PART, str(ROOT), str(tmp_path / "work")],
                          capture_output=True, text=True, env=env, timeout=HANG_SECONDS, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["outcomes"] == ["passed"], out["outcomes"]
    assert out["crossed"] == 0, f"{out['crossed']} callbacks of the check crossed to the grading process"
    assert {"softmax.py", "attention.py", "backward.py", "training.py"} <= set(out["modules"]), out["modules"]
    assert all(name.startswith(("test_08", "test_09", "test_10", "test_11", "test_hidden_08", "test_hidden_09",
                                "test_hidden_10", "test_hidden_11")) for name in out["files"]), out["files"]


def test_an_error_of_the_moment_is_answered_but_never_kept_as_the_questions_answer() -> None:
    """A MemoryError or RecursionError of the reference is its worker's state, not its answer: a student who asks
    the same question later, with memory to spare, must not be told the reference ran out (``protocol``)."""
    from grader.sandbox import protocol

    class ArrayMemoryError(MemoryError):  # numpy raises a subclass of MemoryError of its own
        pass

    for error in (MemoryError("no memory"), ArrayMemoryError("no memory"), RecursionError("deep"),
                  KeyboardInterrupt(), SystemExit(3)):
        assert protocol.of_the_moment(error), error
    for error in (ValueError("x must be 2-D"), TypeError("k"), RuntimeError("broken reference"), ZeroDivisionError()):
        assert not protocol.of_the_moment(error), error


def test_a_cache_folder_keeps_the_answers_of_the_references_last_checked_only(tmp_path: Path) -> None:
    from grader.sandbox import sealed

    folder = tmp_path / "answers"
    folder.mkdir()
    older = []
    for number in range(6):  # six references checked long ago, oldest first
        path = folder / f"{number:040d}.frame"
        path.write_bytes(b"old answers")
        os.utime(path, (1_000_000 + number, 1_000_000 + number))
        older.append(path)
    unrelated = folder / "notes.txt"
    unrelated.write_text("the instructor's")
    today = folder / f"{'e' * 40}.frame"  # another batch's of today: kept, however many there are
    today.write_bytes(b"answers of today")
    older.insert(0, today)
    newest = folder / f"{'f' * 40}.frame"
    sealed.merge_into(newest, {"attention": {b"i" * frames.SEAL_INDEX: (b"sealed", 0.5)}})
    left = sorted(path.name for path in folder.glob("*.frame"))
    kept = [newest, today] + older[-(sealed.KEPT_FILES - 2):]  # the day's, then the last written of the others
    assert left == sorted(path.name for path in kept)
    assert unrelated.exists() and read(newest)["attention"] == {b"i" * frames.SEAL_INDEX: (b"sealed", 0.5)}


def test_the_answers_file_is_the_instructors_alone(tmp_path: Path) -> None:
    # The reference's answers, sealed or not, are never readable by another user of the machine (a hostile round
    # found the cache's answers 0644 in a 0755 folder, beside the kit's other cached files at 0600).
    folder = tmp_path / "answers"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)  # as an older kit left it
    table = Sealed()
    table.recording(True)
    table.record("attention", _callback(np.ones(3)), frames.pack({"status": "ok", "payload": 1.5}, []), 0.25)
    old_mask = os.umask(0o022)
    try:
        table.save(folder / "kit.frame")
    finally:
        os.umask(old_mask)
    assert stat.S_IMODE(os.stat(folder / "kit.frame").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
