"""The README is a front door to guides in docs/, every link of the docs lands, and no timing is typed by hand."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grader.curriculum import ROOT
from grader.tests.waiting import HANG_SECONDS

README = ROOT / "README.md"
DOCUMENTS = [README, ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
# The guides the README links to, one a line of its "Guides" section.
GUIDES = ("docs/reading.md", "docs/student-loop.md", "docs/common-mistakes.md", "docs/courses.md", "docs/release.md",
          "docs/grading.md", "docs/term.md", "docs/cluster.md", "docs/own-exercise.md", "docs/jupyter.md",
          "CONTRIBUTING.md", "docs/maintaining.md", "docs/benchmarks.md")
# Guides written on other branches of this session (issues 35-37): linked already, present once merged.
PENDING: set[str] = set()
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def prose(text: str) -> str:
    """``text`` without its code blocks and its generated parts (examples, benchmark figures)."""
    text = re.sub(r"<!-- (example|checked):[\w-]+ -->.*?<!-- end (example|checked) -->", "", text, flags=re.S)
    text = re.sub(r"<!-- benchmarks:begin -->.*?<!-- benchmarks:end -->", "", text, flags=re.S)
    text = re.sub(r"<!-- benchmark:[\w-]+ -->.*?<!-- end benchmark -->", "", text, flags=re.S)
    text = re.sub(r"<!-- figure:[\w.-]+ -->.*?<!-- end figure -->", "", text, flags=re.S)
    return FENCE.sub("", text)


def section(text: str, heading: str) -> str:
    """The body of the section that starts with the line ``heading``, up to the next heading of its level or above."""
    level = len(heading) - len(heading.lstrip("#"))
    body = text.split(f"\n{heading}\n", 1)[1]
    end = re.search(rf"^#{{1,{level}}} ", body, re.M)
    return body[:end.start()] if end else body


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file: its headings as GitHub slugs them, and its ``<a id="...">`` lines."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    slugs = set()
    for heading in re.findall(r"^#+ (.+)$", text, re.M):
        slugs.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return slugs | set(re.findall(r'<a id="([^"]+)"', text))


def test_the_readme_is_a_front_door():
    text = README.read_text(encoding="utf-8")
    lines = text.count("\n")
    assert lines <= 250, f"README.md has {lines} lines: move the guide that grew to docs/ and link it"
    headings = re.findall(r"^##? .+$", text, re.M)
    assert headings[1:] == ["## For students", "## For instructors", "## Guides"], headings
    instructors = section(text, "## For instructors")
    for heading in ("### Set up (once)", "### First command: grade the sample class", "### The test command CI runs"):
        assert f"\n{heading}\n" in instructors, f"README, 'For instructors', lost its section {heading!r}"


def test_the_readme_links_every_guide():
    guides = section(README.read_text(encoding="utf-8"), "## Guides")
    linked = [target for target in LINK.findall(guides)]
    assert sorted(linked) == sorted(GUIDES), "the README's guide list changed: update GUIDES here, or the list"
    for guide in GUIDES:
        assert (ROOT / guide).is_file() or guide in PENDING, f"the README links {guide}, which does not exist"


def test_every_link_of_the_docs_lands_on_a_file_and_an_anchor():
    broken = []
    for document in DOCUMENTS:
        for target in LINK.findall(prose(document.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            # A link from the file's own folder; one starting with "/" from the kit's root (docs/student-loop.md is
            # also folded into the release's README, at the root: its links must land from both places).
            where = ROOT / path[1:] if path.startswith("/") else (document.parent / path if path else document)
            name = f"{document.relative_to(ROOT).as_posix()}: ({target})"
            if not where.exists():
                if where.resolve().relative_to(ROOT.resolve()).as_posix() not in PENDING:
                    broken.append(f"{name}: no such file")
            elif anchor and where.suffix == ".md" and anchor not in anchors(where):
                broken.append(f"{name}: no such section")
            elif document.name == "student-loop.md" and path and not path.startswith("/"):
                broken.append(f"{name}: write it from the kit's root (/docs/...), the release's README folds it in")
    assert not broken, "\n".join(broken)


# A number of seconds that is a setting, not a measurement: budgets, limits, timeouts, intervals.
SETTING = re.compile(r"budget|limit|default|timeout|interval|did not finish|time left|CPU seconds|every \d", re.I)
TIMING = re.compile(r"\b\d[\d,.]*\s*(ms|us|µs|s|sec|seconds?|core-s|CPU-s|minutes?|min|hours?)\b"
                    r"|\b(a few|several|some) (milli)?seconds\b"
                    r"|\b(about|under|within|less than) a (second|minute)\b", re.I)

# An estimate is a timing even beside a setting's words: "takes about 20 CPU seconds (a minute on a loaded machine)".
ESTIMATE = re.compile(r"\b(about|around|roughly|takes|took)\s+\d[\d,.]*\s*(CPU[ -])?(s|seconds?|minutes?)\b"
                      r"|\ba minute on\b", re.I)


def test_every_timing_the_docs_state_comes_from_a_benchmark():
    """A timing in the docs is written by the generator from a benchmark's record (<!-- benchmark: --> or
    <!-- figure: -->), never typed: a typed one goes stale (issue 35: "takes about a second", measured 2.8 s)."""
    typed = []
    for document in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        for paragraph in re.split(r"\n\s*\n", prose(document.read_text(encoding="utf-8"))):
            for sentence in re.split(r"(?<=[.;:])\s+(?=[A-Z(`*])", " ".join(paragraph.split())):
                if TIMING.search(sentence) and not SETTING.search(sentence) or ESTIMATE.search(sentence):
                    typed.append(f"{document.relative_to(ROOT).as_posix()}: {sentence}")
    assert not typed, ("timings typed by hand (measure them with a script of benchmarks/, --record, and write them "
                       "with <!-- figure:NAME.FIELD --> or <!-- benchmark:NAME -->):\n" + "\n".join(typed))


def test_a_typed_timing_is_found():
    sentence = "`attention-kit status` takes about a second on a finished tree."
    assert TIMING.search(sentence) and not SETTING.search(sentence)
    assert TIMING.search("status takes 2.8 s") and TIMING.search("a few seconds; on a tree")
    assert not TIMING.search(prose("took <!-- figure:status_time.finished_s -->2.8<!-- end figure --> s"))
    assert SETTING.search("`--call-budget`, default 5 s")
    assert ESTIMATE.search("Each shape takes about 20 CPU seconds (a minute on a loaded two-core machine).")
    assert not ESTIMATE.search("Each call has the grader's budget (5 CPU seconds)")


def test_the_instructors_first_command_grades_the_samples(tmp_path: Path):
    """The README's first instructor command, `attention-kit grade` with no submissions, grades the sample class.

    One exercise only (``--exercise softmax``), to keep the test short: the samples, the batch and the gradebook
    are the command's own.
    """
    readme = README.read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.+?)\n```", section(readme, "### First command: grade the sample class"), re.S)
    assert block and block.group(1).strip() == "attention-kit grade", "the README's first instructor command changed"
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-m", "grader", "grade", "--exercise", "softmax", "--jobs", "1"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=HANG_SECONDS)
    if done.returncode == 2 and "isolation" in done.stdout + done.stderr:
        pytest.fail(f"no isolation on this machine (bubblewrap): the grader refuses, as it should\n{done.stderr}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "grading the bundled sample submissions" in done.stdout
    gradebook = tmp_path / "attention-kit-grades"  # the README: "writes the gradebook to attention-kit-grades/"
    with (gradebook / "grades.csv").open(encoding="utf-8", newline="") as stream:
        rows = {row["student"]: row for row in csv.DictReader(stream)}
    assert {"correct", "syntax-error", "missing-module"} <= set(rows), sorted(rows)
    assert 1 <= len([name for name in rows if name.startswith("mistake-")]) <= 4, sorted(rows)
    assert float(rows["correct"]["score"]) == float(rows["correct"]["max_score"]) > 0, rows["correct"]
    for student in rows:
        assert (gradebook / student / "results.json").is_file() and (gradebook / student / "feedback.md").is_file()


def documented_commands() -> list[tuple[str, str]]:
    """(document, command line) for every ``attention-kit ...`` line in a code block of the README and docs/."""
    found = []
    for document in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        for block in FENCE.findall(document.read_text(encoding="utf-8")):
            for line in block.replace("\\\n", " ").splitlines()[1:-1]:
                line = re.sub(r"^\$ |^cd \S+ && ", "", line.strip())
                if line.startswith("attention-kit "):
                    found.append((document.relative_to(ROOT).as_posix(), line.split("  #")[0].split(" # ")[0]))
    return found


def test_every_documented_command_parses():
    """Each ``attention-kit`` command a guide shows is one the kit has, with options it takes (as written)."""
    import contextlib
    import io
    import shlex

    from grader import cli

    commands = documented_commands()
    assert len(commands) > 20, commands  # the check has something to check
    wrong = []
    for document, line in commands:
        words = shlex.split(line)[1:]
        try:
            with contextlib.redirect_stderr(io.StringIO()) as said:
                _, extra = cli.build_parser().parse_known_args(words)
        except SystemExit:
            wrong.append(f"{document}: `{line}`: {said.getvalue().strip().splitlines()[-1]}")
            continue
        if extra and words[0] != "test":  # `attention-kit test` hands the other options to pytest
            wrong.append(f"{document}: `{line}`: unknown {extra}")
    assert not wrong, "\n".join(wrong)
