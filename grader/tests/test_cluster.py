"""Grading past one machine: `grade --cluster` (a Dask LocalCluster on the loopback) and `grade --shard I/N`.

The same gradebook with and without the cluster, for every part; a worker killed half way changes nothing;
a student whose grading kills workers again is "not graded" and the batch goes on; an unreachable cluster or a
worker of another kit is refused in one line; shards merged equal the whole; resume works across engines.
Batches are small (3-4 students, one or two exercises): the machine's cores are shared.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from grader.cli import main as cli
from grader.curriculum import PART_ENV, ROOT
from grader.grading import cluster as engine_module
from grader.grading import cluster_worker, portable
from grader.grading.grade import grade_batch
from grader.grading.records import Result
from grader.grading.samples import break_syntax
from grader.mutants import apply, load_catalogue
from grader.tests.waiting import HANG_SECONDS, SETTLE_SECONDS

pytestmark = [pytest.mark.cluster, pytest.mark.xdist_group("cluster")]

distributed = pytest.importorskip("distributed", reason="the extra [cluster] (CI installs it with .[dev])")

# One exercise or two of each part, and the part's mutant; the cheapest that show the part's tests.
PARTS = {"1": ["softmax", "masks"], "2": ["backward"], "3": ["negation"]}
TIMES = {"execution_time", "timing", "duration"}  # wall times: the only fields allowed to differ


def quiet(lines: list[str] | None = None):
    return (lambda *args: lines.append(" ".join(map(str, args)))) if lines is not None else (lambda *args: None)


def copy_reference(target: Path) -> Path:
    shutil.copytree(ROOT / "solutions", target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def make_class(folder: Path, exercises: list[str], extra: tuple[str, ...] = ()) -> Path:
    """correct, a known mistake of one of ``exercises``, a syntax error (in the first exercise's module)."""
    folder.mkdir(parents=True)
    copy_reference(folder / "correct")
    for mutant in load_catalogue():
        if mutant.exercise in exercises:
            try:
                apply(mutant, folder / "mistake")
                break
            except ValueError:
                shutil.rmtree(folder / "mistake", ignore_errors=True)
    else:
        raise AssertionError(f"no mutant of the catalogue applies to {exercises}")
    break_syntax(copy_reference(folder / "syntax"), f"{exercises[0]}.py")
    for name in extra:
        copy_reference(folder / name)
    return folder


def without_times(value):
    if isinstance(value, dict):
        return {key: without_times(item) for key, item in value.items() if key not in TIMES}
    if isinstance(value, list):
        return [without_times(item) for item in value]
    return value


def gradebook(out: Path) -> dict[str, object]:
    """Everything a grading run wrote that is not a time: grades.csv, each results.json and feedback.md."""
    book: dict[str, object] = {"grades.csv": (out / "grades.csv").read_text(encoding="utf-8")}
    for folder in sorted(p for p in out.iterdir() if p.is_dir()):
        book[f"{folder.name}/results.json"] = without_times(json.loads((folder / "results.json").read_text()))
        book[f"{folder.name}/feedback.md"] = (folder / "feedback.md").read_text(encoding="utf-8")
    return book


def cluster_tasks(client) -> set[str]:
    """The keys of the students' tasks the cluster's scheduler has run (the first call starts recording them)."""
    return {str(record["key"]) for record in client.get_task_stream()
            if str(record["key"]).startswith("attention-kit-")}


@pytest.fixture(scope="module")
def dask_cluster():
    """Two worker processes, shared by this module's batches (each batch checks them again)."""
    cluster = engine_module.start_local(2)
    client = distributed.Client(cluster)
    yield cluster, client
    client.close()
    cluster.close()


@pytest.fixture(scope="module")
def part_one(tmp_path_factory):
    """Part I's class graded locally: the gradebook the cluster must reproduce."""
    root = tmp_path_factory.mktemp("part1")
    folder = make_class(root / "submissions", PARTS["1"], extra=("second",))
    assert grade_batch(folder, root / "local", exercises=PARTS["1"], jobs=2, echo=quiet(), hidden=None) == 0
    return folder, root / "local"


async def heartbeat(dask_worker) -> None:
    await dask_worker.heartbeat()


def test_local_n_is_a_quiet_cluster_heartbeats_every_few_seconds_and_no_memory_monitor(dask_cluster):
    """local:N's Dask processes wake up less than Dask's defaults would: they cost core-seconds beside grading."""
    cluster, client = dask_cluster
    # What the scheduler (in this process) answers a worker's heartbeat with: the pace the workers keep.
    assert distributed.scheduler.heartbeat_interval(len(cluster.workers)) >= engine_module.LOCAL_HEARTBEAT
    client.run(heartbeat)  # a heartbeat answered: the worker took its pace from the answer
    paces = client.run(lambda dask_worker: dask_worker.periodic_callbacks["heartbeat"].callback_time)
    assert paces and all(pace >= engine_module.LOCAL_HEARTBEAT * 1000 for pace in paces.values()), paces
    watched = client.run(lambda dask_worker: "memory_monitor" in dask_worker.periodic_callbacks)
    assert not any(watched.values()), watched
    assert not any("memory_monitor" in nanny.periodic_callbacks for nanny in cluster.workers.values())


@pytest.mark.parametrize("part", sorted(PARTS))
def test_a_batch_of_every_part_gets_the_same_gradebook_on_the_cluster(part, dask_cluster, tmp_path, monkeypatch):
    monkeypatch.setenv(PART_ENV, part)
    folder = make_class(tmp_path / "submissions", PARTS[part])
    options = {"exercises": PARTS[part], "echo": quiet(), "hidden": None}
    assert grade_batch(folder, tmp_path / "local", jobs=2, **options) == 0
    before = cluster_tasks(dask_cluster[1])
    assert grade_batch(folder, tmp_path / "cluster", cluster=dask_cluster[0].scheduler_address, **options) == 0
    # correct and mistake at least were graded there, not here (syntax runs nothing where its one exercise is
    # broken)
    assert len(cluster_tasks(dask_cluster[1]) - before) >= 2
    book = gradebook(tmp_path / "local")
    assert gradebook(tmp_path / "cluster") == book
    grades = book["grades.csv"]
    assert "correct" in grades and "mistake" in grades and "syntax" in grades


def test_local_n_starts_its_own_cluster_from_the_command_line(part_one, tmp_path, capsys):
    folder, local = part_one
    (tmp_path / "none").mkdir()  # no hidden tests, as the local batch
    arguments = ["grade", str(folder), "--out", str(tmp_path / "out"), "--cluster", "local:2",
                 "--hidden", str(tmp_path / "none")]
    for name in PARTS["1"]:
        arguments += ["--exercise", name]
    assert cli(arguments) == 0
    assert "Cluster: local:2, 2 Dask worker(s)" in capsys.readouterr().out
    assert gradebook(tmp_path / "out") == gradebook(local)


def _kill_a_busy_worker(client, killed: list[int], stop: threading.Event) -> None:
    """SIGKILL the first worker seen grading a student (its nanny starts a fresh one)."""
    pids = client.run(os.getpid)
    while not stop.is_set() and not killed:
        for worker, keys in client.processing().items():
            if any(str(key).startswith("attention-kit-") for key in keys):  # one thread: it is grading it
                os.kill(pids[worker], signal.SIGKILL)
                killed.append(pids[worker])
                return
        time.sleep(0.05)


def test_a_worker_killed_mid_batch_changes_nothing(part_one, dask_cluster, tmp_path):
    folder, local = part_one
    _, client = dask_cluster
    killed: list[int] = []
    stop = threading.Event()
    killer = threading.Thread(target=_kill_a_busy_worker, args=(client, killed, stop), daemon=True)
    killer.start()
    try:
        status = grade_batch(folder, tmp_path / "out", exercises=PARTS["1"], echo=quiet(), hidden=None,
                             cluster=dask_cluster[0].scheduler_address)
    finally:
        stop.set()
        killer.join()
    assert killed, "no worker was seen grading: the test killed nothing"
    assert status == 0
    assert gradebook(tmp_path / "out") == gradebook(local)  # no row lost, none twice, none half written
    assert not list((tmp_path / "out").rglob("*.tmp"))
    client.wait_for_workers(2, timeout=HANG_SECONDS)  # the nanny's fresh worker, for the next tests


def killing_task(job, files, fingerprint, stall):
    """The cluster's task, except that grading ``crasher`` kills the worker's process every time."""
    if job.student == "crasher":
        os.kill(os.getpid(), signal.SIGKILL)
    return cluster_worker.grade_on_worker(job, files, fingerprint, stall)


def test_a_student_that_kills_workers_again_is_not_graded_and_the_batch_goes_on(tmp_path, monkeypatch):
    folder = tmp_path / "submissions"  # two students: the test's cost is the workers' restarts
    for name in ("correct", "crasher"):
        copy_reference(folder / name)
    monkeypatch.setattr(cluster_worker, "grade_on_worker", killing_task)
    lines: list[str] = []
    status = grade_batch(folder, tmp_path / "out", exercises=["softmax"], echo=quiet(lines), hidden=None,
                         cluster="local:2")
    assert status == 1
    crasher = json.loads((tmp_path / "out" / "crasher" / "results.json").read_text())
    status_line = crasher["extra_data"]["status"]
    assert status_line.startswith("not graded: the Dask workers grading it died 2 times, twice over"), status_line
    assert all("score" not in test for test in crasher["tests"])  # no score, never a zero
    correct = json.loads((tmp_path / "out" / "correct" / "results.json").read_text())
    assert correct["extra_data"]["status"] == "ok" and correct["score"] == correct["extra_data"]["max_score"]


def scheduler_closing_task(job, files, fingerprint, stall):
    """The cluster's task, except that grading ``bob`` closes the cluster's scheduler (a scheduler lost half way)."""
    if job.student == "bob":
        from distributed import get_worker
        from distributed.utils import sync

        worker = get_worker()
        with contextlib.suppress(Exception):
            sync(worker.loop, worker.scheduler.terminate)
        time.sleep(SETTLE_SECONDS)  # the batch learns it from its client, never from this task
    return cluster_worker.grade_on_worker(job, files, fingerprint, stall)


def test_a_scheduler_lost_half_way_ends_the_batch_with_rows_not_graded(tmp_path, monkeypatch):
    # The batch's client lost its scheduler while bob was graded: it went on to send cy while reconnecting, Dask
    # kept that task without ever running or cancelling it, and the batch waited for it forever, with no gradebook
    # written (a scheduler killed by hand, `dask scheduler` and `dask worker` on one machine).
    folder = tmp_path / "submissions"
    for name in ("ada", "bob", "cy", "dan"):
        copy_reference(folder / name)
    monkeypatch.setattr(engine_module, "CONNECT_TIMEOUT", 3.0)  # the client's reconnection gives up after 3 s
    monkeypatch.setattr(cluster_worker, "grade_on_worker", scheduler_closing_task)
    status: list[int] = []
    batch = threading.Thread(daemon=True, target=lambda: status.append(grade_batch(
        folder, tmp_path / "out", exercises=["softmax"], echo=quiet(), hidden=None, cluster="local:1", jobs=1)))
    batch.start()
    batch.join(SETTLE_SECONDS)
    assert not batch.is_alive(), "the batch hung after losing its scheduler"
    assert status == [1]  # rows not graded: a rerun grades them
    rows = (tmp_path / "out" / "grades.csv").read_text(encoding="utf-8").splitlines()[1:]
    assert sorted(row.split(",")[0] for row in rows) == ["ada", "bob", "cy", "dan"]  # one row each
    for name in ("bob", "cy", "dan"):
        graded = json.loads((tmp_path / "out" / name / "results.json").read_text())
        assert graded["extra_data"]["status"].startswith("not graded: the Dask cluster did not grade this")
        assert all("score" not in test for test in graded["tests"])  # no score, never a zero


def refusing_task(job, files, fingerprint, stall):
    """The cluster's task, except that the first worker to get a student refuses it (as one that joined late with
    another kit does), once per student ($ATTENTION_KIT_TEST_TIMES holds the marks)."""
    mark = Path(os.environ["ATTENTION_KIT_TEST_TIMES"]) / job.student
    if not mark.exists():
        mark.write_text("refused once", encoding="utf-8")
        return Result(error=f"Dask worker tcp://127.0.0.1:1 {cluster_worker.REFUSED}its kit or course is not the "
                            "batch's (fingerprint 0123456789ab, the batch's ba9876543210)")
    return cluster_worker.grade_on_worker(job, files, fingerprint, stall)


def test_a_student_a_late_refused_worker_had_is_graded_elsewhere(tmp_path, monkeypatch):
    # A worker that joins after the batch's check with another kit refuses its first task and leaves: that
    # student's row said "not graded: Dask worker ... refused", a fault of the cluster costing a row.
    folder = tmp_path / "submissions"
    for name in ("ada", "bob"):
        copy_reference(folder / name)
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("ATTENTION_KIT_TEST_TIMES", str(marks))  # the local:2 cluster's workers inherit it
    monkeypatch.setattr(cluster_worker, "grade_on_worker", refusing_task)
    assert grade_batch(folder, tmp_path / "out", exercises=["softmax"], echo=quiet(), hidden=None,
                       cluster="local:2") == 0
    for name in ("ada", "bob"):
        graded = json.loads((tmp_path / "out" / name / "results.json").read_text())
        assert graded["extra_data"]["status"] == "ok" and graded["score"] == graded["extra_data"]["max_score"]
        assert (marks / name).exists()  # each was refused once


def timed_task(job, files, fingerprint, stall):
    """The cluster's task, noting when it graded whom in $ATTENTION_KIT_TEST_TIMES (a second's sleep first)."""
    start = time.time()
    time.sleep(1.0)
    result = cluster_worker.grade_on_worker(job, files, fingerprint, stall)
    folder = Path(os.environ["ATTENTION_KIT_TEST_TIMES"])
    (folder / f"{job.student}.json").write_text(json.dumps([start, time.time()]), encoding="utf-8")
    return result


def test_jobs_caps_the_students_graded_at_once_on_the_cluster(tmp_path, monkeypatch):
    folder = tmp_path / "submissions"
    for name in ("ada", "bob", "cy"):
        copy_reference(folder / name)
    times = tmp_path / "times"
    times.mkdir()
    monkeypatch.setenv("ATTENTION_KIT_TEST_TIMES", str(times))  # the local:2 cluster's workers inherit it
    monkeypatch.setattr(cluster_worker, "grade_on_worker", timed_task)
    lines: list[str] = []
    assert grade_batch(folder, tmp_path / "out", exercises=["softmax"], echo=quiet(lines), hidden=None,
                       cluster="local:2", jobs=1) == 0
    spans = sorted(json.loads(path.read_text()) for path in times.glob("*.json"))
    assert len(spans) >= 3  # the three students (and the kit's check, unless remembered), on two workers
    assert all(later[0] >= earlier[1] for earlier, later in zip(spans, spans[1:], strict=False)), spans
    assert any("at most 1 student(s) at once" in line for line in lines), lines


def test_two_batches_of_other_options_share_a_cluster_at_once(part_one, dask_cluster, tmp_path):
    # Each batch has its own plugin: a second one with other options (here --no-fair) no longer replaces the
    # first one's kit on the workers (whose students were then refused, not graded).
    folder, local = part_one
    address = dask_cluster[0].scheduler_address
    (tmp_path / "none").mkdir()  # no hidden tests, as the local batch
    common = ["--cluster", address, "--hidden", str(tmp_path / "none")]
    for name in PARTS["1"]:
        common += ["--exercise", name]
    before = cluster_tasks(dask_cluster[1])
    runs = [subprocess.Popen([sys.executable, "-m", "grader", "grade", str(folder), "--out", str(tmp_path / name),
                              *common, *options], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
            for name, options in (("fair", ()), ("unfair", ("--no-fair",)))]
    outputs = [run.communicate(timeout=HANG_SECONDS)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    assert all(f"Cluster: {address}" in output for output in outputs), outputs
    assert len(cluster_tasks(dask_cluster[1]) - before) >= 8  # both batches' four students were graded there
    assert gradebook(tmp_path / "fair") == gradebook(local)
    unfair = (tmp_path / "unfair" / "grades.csv").read_text(encoding="utf-8")
    assert "not graded" not in unfair and "refused" not in unfair, unfair


def test_an_unreachable_cluster_stops_the_batch_before_anything_is_graded(part_one, tmp_path, monkeypatch):
    monkeypatch.setattr(engine_module, "CONNECT_TIMEOUT", 2.0)
    lines: list[str] = []
    status = grade_batch(part_one[0], tmp_path / "out", exercises=["softmax"], echo=quiet(lines), hidden=None,
                         cluster="tcp://127.0.0.1:9")
    assert status == 2
    said = [line for line in lines if "error" in line]
    assert len(said) == 1 and "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in said[0]
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize("isolation", ["--container", "--accept-no-isolation"])
def test_a_cluster_refuses_to_grade_without_namespaces(isolation, part_one, tmp_path, capsys):
    # A hostile round: in --container mode on a cluster, a student's code has the network of a machine whose Dask
    # worker runs what the scheduler sends (and beside it, other submissions' folders).
    status = cli(["grade", str(part_one[0]), "--out", str(tmp_path / "out"), "--exercise", "softmax",
                  "--cluster", "tcp://127.0.0.1:9", isolation])
    said = capsys.readouterr().err
    assert status == 2 and f"--cluster grades only with bubblewrap's namespaces on every worker, not with " \
        f"{isolation}" in said, said
    assert not (tmp_path / "out").exists()


def test_a_worker_with_another_kit_is_refused_in_one_line(part_one, tmp_path, monkeypatch):
    # The batch's kit differs from the workers' (as after `git pull` on one machine only): the workers, other
    # processes, compute the real fingerprint.
    monkeypatch.setattr(engine_module, "kit_fingerprint", lambda template: "0" * 64)
    lines: list[str] = []
    status = grade_batch(part_one[0], tmp_path / "out", exercises=["softmax"], echo=quiet(lines), hidden=None,
                         cluster="local:1")
    assert status == 2
    refused = [line for line in lines if line.startswith("refused: Dask worker")]
    assert len(refused) == 1 and "its kit or course is not the batch's" in refused[0]
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_resume_works_across_local_and_cluster(part_one, dask_cluster, tmp_path):
    folder, local = part_one
    out = tmp_path / "out"
    shutil.copytree(local, out)
    for student in ("mistake", "second"):  # a batch stopped half way
        shutil.rmtree(out / student)
    lines: list[str] = []
    options = {"exercises": PARTS["1"], "hidden": None}
    before = cluster_tasks(dask_cluster[1])
    assert grade_batch(folder, out, cluster=dask_cluster[0].scheduler_address, echo=quiet(lines), **options) == 0
    assert len(cluster_tasks(dask_cluster[1]) - before) >= 2  # the two left were graded there, not here
    assert any("2 graded" in line and "2 unchanged" in line for line in lines), lines
    assert gradebook(out) == gradebook(local)
    lines.clear()  # and back: the cluster's results are kept by local grading
    assert grade_batch(folder, out, jobs=1, echo=quiet(lines), **options) == 0
    assert any("0 graded" in line and "4 unchanged" in line for line in lines), lines


def test_two_shards_merged_equal_the_whole(part_one, tmp_path, capsys):
    folder, local = part_one
    shards = []
    for index in (1, 2):
        shard = tmp_path / f"shard-{index}"
        grade_batch(folder, shard, exercises=PARTS["1"], jobs=1, echo=quiet(), hidden=None, shard=(index, 2))
        shards.append(shard)
    counts = [len([p for p in shard.iterdir() if p.is_dir()]) for shard in shards]
    assert sum(counts) == 4 and all(counts), counts  # every student in exactly one slice (this class: both used)
    merged = tmp_path / "merged"
    assert cli(["export", str(merged), "--merge", *map(str, shards)]) == 0
    book = gradebook(merged)
    assert book == gradebook(local)
    # A slice of another kit or course: refused, in one line.
    manifest = json.loads((shards[1] / "shard.json").read_text())
    (shards[1] / "shard.json").write_text(json.dumps({**manifest, "kit": "f" * 64, "keyless": "e" * 64}))
    capsys.readouterr()
    assert cli(["export", str(tmp_path / "again"), "--merge", *map(str, shards)]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "another kit or course" in error
    # A missing slice: refused (every student is one row).
    assert cli(["export", str(tmp_path / "half"), "--merge", str(shards[0])]) == 2
    assert "2/2 missing" in capsys.readouterr().err
    # A manifest that leaves a student of the class out (edited, or another run's): refused, naming them.
    (shards[1] / "shard.json").write_text(json.dumps({**manifest, "students": manifest["students"][1:]}))
    assert cli(["export", str(tmp_path / "short"), "--merge", *map(str, shards)]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "in no shard" in error and repr(manifest["students"][0]) in error, error
    assert not (tmp_path / "short" / "grades.csv").exists()


def test_a_merge_with_a_student_not_graded_writes_the_gradebook_and_exits_1(part_one, tmp_path, capsys):
    # A hostile round: every row "not graded" (the shards each exit 1), yet the merge exited 0.
    folder, _ = part_one
    shards = []
    for index in (1, 2):
        shards.append(tmp_path / f"shard-{index}")
        grade_batch(folder, shards[-1], exercises=PARTS["1"], jobs=1, echo=quiet(), hidden=None, shard=(index, 2))
    student = next(p for p in shards[0].iterdir() if (p / "results.json").is_file())
    data = json.loads((student / "results.json").read_text(encoding="utf-8"))
    data["extra_data"]["status"] = "not graded: the kit is broken: simulated"
    data["extra_data"]["score_not_graded"] = data.pop("score")
    (student / "results.json").write_text(json.dumps(data), encoding="utf-8")
    capsys.readouterr()
    assert cli(["export", str(tmp_path / "merged"), "--merge", *map(str, shards)]) == 1
    assert "1 of 4 students not graded" in capsys.readouterr().err
    assert (tmp_path / "merged" / "grades.csv").is_file()


def test_shards_graded_with_two_machines_keys_are_told_to_share_the_key(part_one, tmp_path, capsys, monkeypatch):
    # A hostile round: shards graded on two machines (two cache folders, two draw keys) were refused as "another
    # kit or course" with the same kit and course, and regrading on that machine gave the same refusal.
    folder, _ = part_one
    shards = [tmp_path / "shard-1", tmp_path / "shard-2"]
    grade_batch(folder, shards[0], exercises=PARTS["1"], jobs=1, echo=quiet(), hidden=None, shard=(1, 2))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "other-machine"))
    grade_batch(folder, shards[1], exercises=PARTS["1"], jobs=1, echo=quiet(), hidden=None, shard=(2, 2))
    capsys.readouterr()
    assert cli(["export", str(tmp_path / "merged"), "--merge", *map(str, shards)]) == 2
    error = capsys.readouterr().err
    assert "graded with another draw key" in error and "draw-key" in error and "another kit" not in error, error


def test_merged_shards_have_the_columns_of_the_part_they_graded(part_one, tmp_path, monkeypatch):
    """Shards of `grade --part 1` merged by a process with no part selected: part 1's columns, as one machine."""
    import csv

    from grader.curriculum import load

    folder, _ = part_one
    monkeypatch.setenv(PART_ENV, "1")
    shards = []
    for index in (1, 2):
        shards.append(tmp_path / f"shard-{index}")
        grade_batch(folder, shards[-1], exercises=PARTS["1"], jobs=1, echo=quiet(), hidden=None, shard=(index, 2))
    whole = tmp_path / "whole"
    grade_batch(folder, whole, exercises=PARTS["1"], jobs=1, echo=quiet(), hidden=None)
    monkeypatch.delenv(PART_ENV)
    assert cli(["export", str(tmp_path / "merged"), "--merge", *map(str, shards)]) == 0
    header = next(csv.reader((tmp_path / "merged" / "grades.csv").open(encoding="utf-8")))
    assert header == next(csv.reader((whole / "grades.csv").open(encoding="utf-8")))
    assert [name for name in header if name in load().names] == [e.name for e in load().exercises if e.part == 1]
    assert PART_ENV not in os.environ  # the merge gave the selection back


def test_shards_are_deterministic_slices_of_the_class():
    from grader.grading.shard import ShardError, parse_shard, slice_of

    students = [f"student-{n}" for n in range(200)]
    slices = [slice_of(student, 4) for student in students]
    # The same in every process (each machine of a Slurm array computes its own): Python's str hash differs per
    # process, so other processes with other hash seeds must agree with this one.
    code = ("import json, sys; from grader.grading.shard import slice_of; "
            "print(json.dumps([slice_of(s, 4) for s in json.loads(sys.argv[1])]))")
    for seed in ("1", "2"):
        elsewhere = subprocess.run([sys.executable, "-c", code, json.dumps(students)], cwd=ROOT, check=True,
                                   capture_output=True, text=True, env=os.environ | {"PYTHONHASHSEED": seed})
        assert json.loads(elsewhere.stdout) == slices, f"another process (PYTHONHASHSEED={seed}) slices otherwise"
    assert set(slices) == {1, 2, 3, 4} and max(map(slices.count, {1, 2, 3, 4})) < 80
    assert parse_shard("2/8") == (2, 8)
    for wrong in ("0/2", "3/2", "a/b", "2", "1/0"):
        with pytest.raises(ShardError, match="--shard"):
            parse_shard(wrong)


def test_entries_that_share_an_id_share_a_slice(tmp_path):
    # alice/ beside alice.zip: listed as two rows (alice-folder, alice.zip), both refused on one machine; in
    # slices of their own each would be graded alone (a hostile tester's, issue 37).
    from grader.grading.shard import select

    (tmp_path / "alice").mkdir()
    (tmp_path / "alice.zip").write_bytes(b"PK")
    entries = [("alice-folder", tmp_path / "alice"), ("alice.zip", tmp_path / "alice.zip")]
    for count in range(2, 9):
        chosen = [[student for student, _ in select(entries, index, count)] for index in range(1, count + 1)]
        assert sorted(map(len, chosen)) == [0] * (count - 1) + [2], (count, chosen)


def test_shards_graded_with_a_course_are_merged_with_it_or_refused(tmp_path, monkeypatch):
    # Merged without the course, the gradebook had the kit's columns and lost the course's own exercise and its
    # Canvas ids, with no word (a hostile tester's, issue 37).
    from grader import course
    from grader.curriculum import load
    from grader.grading.shard import ShardError, _same_course

    names = list(load().names)
    monkeypatch.delenv(course.COURSE_ENV, raising=False)
    _same_course([{"course": False, "exercises": names}])  # no course either way: merged
    with pytest.raises(ShardError, match=r"graded with a course folder: give export the same one \(--course DIR\)"):
        _same_course([{"course": True, "exercises": names}, {"course": True, "exercises": names}])
    with pytest.raises(ShardError, match="graded with the exercises softmax, centre"):
        _same_course([{"course": False, "exercises": ["softmax", "centre"]}])
    _same_course([{"shard": 1}])  # a manifest of an older kit: nothing to compare


def test_without_cluster_dask_is_not_imported(tmp_path):
    import subprocess
    import sys

    code = ("import sys; from grader.cli import build_parser; build_parser(); import grader.grading.grade; "
            "import grader.grading.export; print([m for m in sys.modules if m.split('.')[0] in "
            "('dask', 'distributed')])")
    shown = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "[]"


def test_portable_jobs_and_results_map_between_machines_with_different_checkouts(tmp_path):
    from grader.grading.records import Job, Result, SuiteFile, TestRecord

    batch = [("<kit>", Path("/srv/kit"))]
    worker = [("<kit>", Path("/home/w/kit"))]
    job = Job(student="s", folder="/tmp/x", files=("/srv/kit/tests/test_01_softmax.py",),
              suite=(SuiteFile("/srv/kit/tests/test_01_softmax.py", "softmax"),))
    there = portable.localized(portable.portable(job, batch), worker)
    assert there.files == ("/home/w/kit/tests/test_01_softmax.py",)
    assert there.suite[0].path == "/home/w/kit/tests/test_01_softmax.py"
    result = Result(records=(TestRecord(nodeid="/home/w/kit/tests/t.py::a", file="/home/w/kit/tests/t.py",
                                        exercise="softmax", message="printed /home/w/kit"),))
    back = portable.convert_result(portable.convert_result(result, lambda t: portable.portable_text(t, worker)),
                                   lambda t: portable.local_text(t, batch))
    assert back.records[0].file == "/srv/kit/tests/t.py" and back.records[0].nodeid == "/srv/kit/tests/t.py::a"
    assert back.records[0].message == "printed /home/w/kit"  # messages are the student's: never rewritten


def test_a_task_maps_its_paths_to_its_own_batchs_course(tmp_path, monkeypatch):
    # A worker shared by batches of two courses: the last task there left the other course active. The task's
    # "<course>/..." test files must be put under its own batch's course folder, not the one active before it.
    from grader import course
    from grader.grading import pool
    from grader.grading.records import Job, Result

    mine, other = tmp_path / "mine", tmp_path / "other"
    for folder in (mine, other):
        folder.mkdir()
        (folder / course.COURSE_FILE).write_text("[course]\n", encoding="utf-8")
    monkeypatch.setenv(course.COURSE_ENV, str(other))  # what the worker's previous task activated
    monkeypatch.delenv(PART_ENV, raising=False)
    template = Job(student="", folder="", files=(), suite=())
    plugin = cluster_worker.KitPlugin("f" * 64, template, str(mine), "", {})
    plugin.refused, plugin.scratch = None, str(tmp_path)

    class Worker:
        address = "tcp://worker"
        plugins = {cluster_worker.plugin_name("f" * 64): plugin}

    graded: list[Job] = []
    monkeypatch.setattr(cluster_worker, "get_worker", Worker)
    monkeypatch.setattr(pool, "run_jobs", lambda jobs, processes, stall: [(job, Result()) for job in jobs
                                                                          if not graded.append(job)])
    job = Job(student="s", folder="/batch/work/s", files=("<course>/tests/test_mine.py",), suite=())
    cluster_worker.grade_on_worker(job, (("softmax.py", b"x = 1\n"),), "f" * 64, 60.0)
    assert graded and graded[0].files == (str(mine.resolve() / "tests" / "test_mine.py"),), graded


def test_the_engine_is_closed_when_the_batch_stops_before_grading(tmp_path, monkeypatch):
    # Interrupted (or failing) while the submissions are prepared, the engine's stream never starts: its own
    # `finally` never runs, and a local:N cluster's scheduler and workers outlived the batch.
    from grader.grading import grade

    closed: list[bool] = []

    class Engine:
        def __call__(self, jobs, processes, stall):
            yield from ()

        def close(self):
            closed.append(True)

    def stopped(self, entries, work):
        raise KeyboardInterrupt
        yield

    monkeypatch.setattr(grade, "connect_cluster", lambda *args: Engine())
    monkeypatch.setattr(grade._Batch, "feed", stopped)
    copy_reference(tmp_path / "submissions" / "ada")
    with pytest.raises(KeyboardInterrupt):
        grade_batch(tmp_path / "submissions", tmp_path / "out", exercises=["softmax"], echo=quiet(), hidden=None,
                    cluster="tcp://scheduler:8786")
    assert closed, "the engine was left open"


def test_a_root_is_replaced_as_a_whole_path_component_only():
    # The kit at /srv/kit also turned /srv/kit-hidden/test_x.py into <kit>-hidden/test_x.py on its way between
    # machines, which the other side then read as a path under its own kit.
    from grader.grading.portable import local_text, portable_text

    here = [("<kit>", Path("/srv/kit"))]
    text = "/srv/kit/tests/t.py, /srv/kit-hidden/test_x.py, '/srv/kit': /srv/kit\n(/srv/kit) /srv/kitchen"
    assert portable_text(text, here) == ("<kit>/tests/t.py, /srv/kit-hidden/test_x.py, '<kit>': <kit>\n(<kit>) "
                                         "/srv/kitchen")
    assert local_text(portable_text(text, here), here) == text


def test_workers_of_other_machines_get_the_checks_sealed_answers(tmp_path, monkeypatch):
    # Two workers with caches of their own, as on two machines, and the batch's a third: the kit's check runs on
    # one worker and records fair grading's answers there; the batch takes them and gives them to the other.
    import dask
    from distributed import Nanny, Scheduler, SpecCluster

    from grader.sandbox import sealed

    caches = {name: tmp_path / f"cache-{name}" for name in ("batch", "a", "b")}
    engine_module._dask_config()
    workers = {name: {"cls": Nanny, "options": {"nthreads": 1, "memory_limit": 0,
                                                "env": {"XDG_CACHE_HOME": str(caches[name])}}} for name in ("a", "b")}
    with dask.config.set({"distributed.scheduler.allowed-failures": 3}):  # a scheduler of your own: Dask's default
        cluster = SpecCluster(workers=workers, silence_logs=40, scheduler={
            "cls": Scheduler, "options": {"dashboard_address": ":0", "host": "127.0.0.1"}})
    monkeypatch.setenv("XDG_CACHE_HOME", str(caches["batch"]))
    from grader.grading import kit_check

    for known in ("_KIT_CHECKS", "_USES", "_PENDING"):  # a check this process made for an earlier test: made again
        monkeypatch.setattr(kit_check, known, {})
    try:
        folder = make_class(tmp_path / "submissions", ["attention"])  # attention asks softmax of the reference
        assert grade_batch(folder, tmp_path / "out", exercises=["softmax", "attention"], echo=quiet(), hidden=None,
                           cluster=cluster.scheduler_address) == 0
        # The batch set its own scheduler's allowance of worker deaths (a student is graded again once).
        assert cluster.scheduler.allowed_failures == engine_module.ALLOWED_FAILURES
    finally:
        cluster.close()
    files = {name: sorted((cache / "attention-kit" / "answers").glob("*.frame")) for name, cache in caches.items()}
    assert all(len(found) == 1 for found in files.values()), files
    assert len({found[0].name for found in files.values()}) == 1, files
    tables = {name: sealed.read(found[0]) for name, found in files.items()}
    assert tables["batch"] and any(tables["batch"].values()), "the check recorded no answers"
    assert tables["a"] == tables["b"] == tables["batch"]


def test_answers_that_cannot_be_shared_are_said_and_cost_nothing_else(tmp_path, monkeypatch):
    # A scheduler that fails while the answers are shared: one line on the batch's terminal, and no exception.
    class Gone:
        def run(self, *args, **kwargs):
            raise OSError("the scheduler went away")

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    engine = engine_module.Engine.__new__(engine_module.Engine)
    lines: list[str] = []
    engine.client, engine.cluster, engine.fingerprint, engine.echo = Gone(), None, "0" * 64, lines.append
    engine.share_answers("tcp://127.0.0.1:1")
    assert len(lines) == 1 and "were not shared with the workers (OSError: the scheduler went away)" in lines[0]
