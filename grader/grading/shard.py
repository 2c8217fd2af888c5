"""``grade --shard I/N`` and ``export OUT --merge SHARD...``: a class graded in slices, without an engine.

Run by: the batch's process (``grader.grading.grade``: :func:`parse`,
:func:`select`, :func:`write_manifest`) and ``attention-kit export``
(:func:`merge`).

A Slurm job array, a Kubernetes indexed job or a CI matrix runs
``attention-kit grade SUBMISSIONS --shard I/N --out OUT-I`` once per index
I = 1..N, each on its own machine. The slices are deterministic: a student is
in slice ``1 + sha256(student id) mod N``, whatever the machine, the order of
the folder or the other students (two entries that share an id share a slice,
so both are refused as on one machine). Each shard writes ``OUT-I/shard.json``:
its index, the whole class in order, its students, and the fingerprint of its
kit and course (``grader.grading.portable.kit_fingerprint``, the same on every
machine holding them). ``attention-kit export OUT --merge OUT-1 ... OUT-N``
copies every shard's students into OUT and writes one gradebook, in the
class's order: the same ``grades.csv`` as one machine grading the whole class.
It refuses, with one line, shards of different kits, courses or classes, a
missing or repeated shard, and a student without results.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any

MANIFEST = "shard.json"


class ShardError(ValueError):
    """A shard option or a set of shards that cannot be used; the message is one line."""


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` as ``(I, N)``, 1 <= I <= N.

    Raises
    ------
    ShardError
        If ``text`` is not two whole numbers ``I/N`` with 1 <= I <= N.
    """
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit()) or not 1 <= int(index) <= int(count):
        raise ShardError(f"--shard {text}: give I/N, the I-th of N slices, with 1 <= I <= N (e.g. --shard 2/8)")
    return int(index), int(count)


def slice_of(student: str, count: int) -> int:
    """The slice (1..count) a student is in: from their id alone."""
    return 1 + int.from_bytes(hashlib.sha256(student.encode("utf-8", "surrogateescape")).digest()[:8]) % count


def select(entries: list[tuple[str, Path]], index: int, count: int) -> list[tuple[str, Path]]:
    """The entries of slice ``index`` of ``count``, in their order.

    An entry's slice comes from the id its name gives (``alice`` for ``alice/`` and ``alice.zip``), not from
    the row it is listed under (``alice-folder``, ``alice.zip`` when both are handed in): entries that share an
    id share a slice, where both are refused, as on one machine.
    """
    from grader.grading.submissions import student_id

    return [(student, entry) for student, entry in entries if slice_of(student_id(entry), count) == index]


def shard_entries(entries: list[tuple[str, Path]], shard: tuple[int, int] | None, out: Path, template: Any,
                  echo: Any) -> list[tuple[str, Path]]:
    """The entries ``grade --shard I/N`` grades (all without ``shard``); writes ``out/shard.json`` first."""
    if shard is None:
        return entries
    from grader.grading.portable import kit_fingerprint
    from grader.grading.submissions import student_id

    chosen = select(entries, *shard)
    write_manifest(out, *shard, [student for student, _ in entries], [student for student, _ in chosen],
                   kit_fingerprint(template), {student: student_id(entry) for student, entry in entries},
                   keyless=kit_fingerprint(dataclasses.replace(template, draw_key="")))
    echo(f"Shard {shard[0]}/{shard[1]}: {len(chosen)} of the {len(entries)} submission(s)")
    return chosen


def write_manifest(out: Path, index: int, count: int, everyone: list[str], students: list[str],
                   kit: str, ids: dict[str, str] | None = None, keyless: str = "") -> None:
    """Write ``out/shard.json``: which slice this is, of which class, graded with which kit and course.

    ``ids``: each listed student's id as the entry's name gives it, which decides the slice (:func:`select`).
    ``keyless``: the kit's fingerprint without the machine's draw key (``grader.grading.draw_key``), so that a
    merge can tell shards of another kit from shards graded with another key (a machine's own cache folder).
    """
    from grader import course
    from grader.curriculum import PART_ENV
    from grader.curriculum import load as load_curriculum
    from grader.grading.report import atomic_write

    # The part graded (--part, or the course's): the merged gradebook has that part's columns, wherever merged;
    # and the course's exercises (its own beside the kit's): export merges with the same course, or refuses.
    atomic_write(out / MANIFEST, json.dumps({"shard": index, "of": count, "kit": kit, "keyless": keyless,
                                            "class": everyone, "students": students,
                                            "part": os.environ.get(PART_ENV, ""),
                                            "ids": ids or {}, "course": course.active_folder() is not None,
                                            "exercises": list(load_curriculum().names)}, indent=1) + "\n")


def _manifest(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise ShardError(f"--merge {folder}: no readable {MANIFEST} (give the --out folders of "
                         "`attention-kit grade --shard I/N`)") from None
    if not isinstance(data, dict) or not {"shard", "of", "kit", "class", "students"} <= set(data):
        raise ShardError(f"--merge {folder}: {MANIFEST} is not a shard's manifest")
    return data


def _same_course(manifests: list[dict]) -> None:
    """Refuse to merge shards graded with a course folder but merged without it (other columns, Canvas ids lost)."""
    from grader import course
    from grader.curriculum import load as load_curriculum

    if any(data.get("course") for data in manifests) and course.active_folder() is None:
        raise ShardError("--merge: the shards were graded with a course folder: give export the same one "
                         "(--course DIR)")
    exercises = manifests[0].get("exercises")
    if isinstance(exercises, list) and exercises != list(load_curriculum().names):
        raise ShardError(f"--merge: the shards were graded with the exercises {', '.join(map(str, exercises))}, "
                         f"this course has {', '.join(load_curriculum().names)}: give export the course folder "
                         "they were graded with (--course DIR)")


def merge(out: Path, shards: list[Path]) -> list[Any]:
    """Copy every shard's students into ``out`` and write its ``grades.csv``; the typed rows of the class, in order.

    Raises
    ------
    ShardError
        If the shards are of different kits, courses or classes, one is missing or repeated, a student has no
        results, or ``out`` is one of the shards.
    """
    from grader.curriculum import PART_ENV, select_part
    from grader.grading.formats.grades_csv import gradebook_csv
    from grader.grading.report import atomic_write, read_row
    from grader.grading.rows import ResultsFileError

    manifests = [_manifest(folder) for folder in shards]
    first = manifests[0]
    for folder, data in zip(shards, manifests, strict=True):
        if data["kit"] != first["kit"] and data.get("keyless") and data.get("keyless") == first.get("keyless"):
            raise ShardError(f"--merge {folder}: graded with another draw key than {shards[0]} (the same kit and "
                             "course; each machine keeps its own key of the inputs drawn for each submission, in "
                             "its cache folder: ~/.cache/attention-kit/draw-key): copy one machine's file to the "
                             "others (mode 600) and regrade their shards (docs/cluster.md)")
        if data["kit"] != first["kit"]:
            raise ShardError(f"--merge {folder}: graded with another kit or course than {shards[0]} (fingerprint "
                             f"{str(data['kit'])[:12]}, not {str(first['kit'])[:12]}): regrade it with the same ones")
        if data["of"] != first["of"] or data["class"] != first["class"]:
            raise ShardError(f"--merge {folder}: a slice of another class than {shards[0]} (other submissions, or "
                             "another N): shard the same SUBMISSIONS with the same N")
        if out.resolve() == folder.resolve():
            raise ShardError(f"--merge {folder}: merge into a folder of its own, not into a shard")
    _same_course(manifests)
    indices = [data["shard"] for data in manifests]
    repeated = sorted({i for i in indices if indices.count(i) > 1})
    missing = [i for i in range(1, first["of"] + 1) if i not in indices]
    count = first["of"]
    if repeated:
        raise ShardError(f"--merge: shard(s) {', '.join(map(str, repeated))} given twice")
    if missing:
        raise ShardError(f"--merge: shard(s) {', '.join(f'{i}/{count}' for i in missing)} missing: every "
                         "student is one row, so every shard is needed")
    # Every student of the class in exactly the slice their id puts them in (a manifest is a file: it may be
    # edited, or come from another --shard run of the same N): else a student would have no row, or two.
    seen: dict[str, int] = {}
    ids = first.get("ids") if isinstance(first.get("ids"), dict) else {}

    def slice_of_listed(student: str) -> int:
        return slice_of(str(ids.get(student, student)), count)

    for data in manifests:
        for student in data["students"]:
            if student in seen or student not in first["class"] or slice_of_listed(student) != data["shard"]:
                raise ShardError(f"--merge: shard {data['shard']}/{count} lists {student!r}, which is not in that "
                                 "slice of the class: rerun that shard")
            seen[student] = data["shard"]
    absent = [student for student in first["class"] if student not in seen]
    if absent:
        names = ", ".join(map(repr, absent[:5]))
        raise ShardError(f"--merge: {len(absent)} student(s) of the class in no shard ({names}): rerun shard "
                         f"{slice_of_listed(absent[0])}/{count}")
    strays = sorted(p.name for p in out.iterdir() if p.is_dir() and p.name not in first["class"]) \
        if out.is_dir() else []
    if strays:
        raise ShardError(f"{out}: holds folders of students not in the shards' class ({', '.join(strays[:5])}): "
                         "merge into a new folder")
    rows: dict[str, tuple[Path, Any]] = {}  # student -> (their shard, their StudentRow)
    for folder, data in zip(shards, manifests, strict=True):
        for student in data["students"]:
            try:
                results = read_row(folder, student)
            except ResultsFileError as error:
                raise ShardError(f"--merge {folder}: {error}: rerun that shard "
                                 f"(--shard {data['shard']}/{data['of']})") from None
            if results is None:
                raise ShardError(f"--merge {folder}: {student!r} has no complete results: rerun that shard "
                                 f"(--shard {data['shard']}/{data['of']})")
            rows[student] = folder, results
    for student, (folder, _) in rows.items():
        for name in ("feedback.md", "results.json"):  # results.json last: its presence marks the student done
            atomic_write(out / student / name, (folder / student / name).read_text(encoding="utf-8"))
    merged = [rows[student][1] for student in first["class"] if student in rows]
    parts = {str(data.get("part") or "") for data in manifests}
    if len(parts) > 1:
        raise ShardError(f"--merge: the shards graded different parts ({', '.join(sorted(parts))}): regrade them "
                         "with the same --part")
    # The columns of the part the shards graded, not of this process's selection (given back after).
    before = os.environ.get(PART_ENV)
    try:
        select_part(parts.pop() or None)
        atomic_write(out / "grades.csv", gradebook_csv(merged))  # the class's order, as one machine writes it
    finally:
        if before is None:
            os.environ.pop(PART_ENV, None)
        else:
            os.environ[PART_ENV] = before
    return merged
