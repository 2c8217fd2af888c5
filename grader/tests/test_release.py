"""The student release: what it holds, what it must never hold, and that it works on its own."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from grader.authoring import release, release_allowlist
from grader.curriculum import PART_ENV, ROOT, load
from grader.tests.reference_lines import find_leaks, folder_texts, reference_lines
from grader.tests.waiting import HANG_SECONDS


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A release built by the command line, as an instructor would."""
    out = tmp_path_factory.mktemp("release") / "student-repo"
    result = subprocess.run([sys.executable, "-m", "grader", "release", str(out)], cwd=ROOT,
                            capture_output=True, text=True, timeout=HANG_SECONDS)
    assert result.returncode == 0, result.stderr
    (out.parent / "stdout.txt").write_text(result.stdout, encoding="utf-8")
    return out


def released_files(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.is_file() and ".git" not in path.relative_to(folder).parts)


def test_is_a_git_repository_with_one_commit_and_says_what_next(released: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=released, capture_output=True, text=True, check=True).stdout

    assert git("log", "--format=%an <%ae>|%s").splitlines() == [
        f"{release.RELEASE_AUTHOR[0]} <{release.RELEASE_AUTHOR[1]}>|{release.RELEASE_MESSAGE}"]
    assert git("rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    assert git("status", "--porcelain") == ""  # everything written is committed, nothing is ignored by mistake
    committed = set(git("ls-files").splitlines())
    assert committed == release.plan_release().paths()
    printed = (released.parent / "stdout.txt").read_text(encoding="utf-8")
    assert "GitHub Classroom" in printed and "git push" in printed and "Template repository" in printed


def test_the_next_steps_say_the_classroom_score_is_the_students_to_fake() -> None:
    # A hostile round: the release's next steps sent the instructor to Classroom's autograding "with its points"
    # and never said what docs/courses.md does: the score is computed by code in the student's own repository
    # (a conftest.py or an edited tests/ gets full marks), so it is advisory and the grade is `attention-kit grade`.
    for existing in (False, True):
        printed = release.next_steps(Path("out"), committed=False, existing=existing)
        assert "advisory" in printed and "conftest.py" in printed and "attention-kit grade" in printed


def test_no_git_writes_the_folder_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    out = tmp_path / "plain"
    assert release.run(argparse.Namespace(out_dir=out, force=False, list=False, no_git=True)) == 0
    assert (out / "exercises" / "softmax.py").is_file() and not (out / ".git").exists()
    assert "git init" in capsys.readouterr().out  # the next steps start with making it a repository


def test_list_needs_no_out_dir_and_a_build_still_does(capsys: pytest.CaptureFixture[str]) -> None:
    # CONTRIBUTING.md's step 6 runs `attention-kit release --list` (print the files, write nothing): it was
    # refused with "the following arguments are required: OUT_DIR", a folder it never writes to.
    from grader.cli import main

    assert main(["release", "--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed == sorted(release.plan_release().paths()) and "exercises/softmax.py" in listed
    assert main(["release"]) == 2  # without --list the folder is still required, in one line
    assert "OUT_DIR" in capsys.readouterr().err


def test_holds_the_student_repository(released: Path) -> None:
    curriculum = load()
    for exercise in curriculum.exercises:
        assert (released / "exercises" / exercise.module_file).is_file()
        assert (released / exercise.test_file).is_file()
    for path in ("conftest.py", "README.md", "pyproject.toml", ".gitignore", ".github/workflows/classroom.yml",
                 "grader/curriculum.toml", "grader/curriculum.py", "grader/cli.py", "tests/plugin.py",
                 "tests/data/golden.npz"):
        assert (released / path).is_file(), path


def test_never_holds_instructor_material(released: Path) -> None:
    for path in ("solutions", "grader/hidden_tests", "grader/mutants", "grader/tests", "benchmarks",
                 "grader/grading/grade.py", "grader/authoring/release.py", "grader/authoring/release_allowlist.py",
                 "grader/grading/gradescope.py",
                 "grader/authoring/golden.py", "grader/authoring/sync.py", "grader/sandbox/proxy.py",
                 "grader/sandbox/worker.py", "grader/sandbox/limits.py", "grader/authoring/fingerprints.py"):
        assert not (released / path).exists(), path
    names = {path.name for path in released_files(released)}
    assert not any(name.startswith("test_hidden") for name in names)
    assert not any(name.endswith(".toml") and name != "pyproject.toml" and name != "curriculum.toml" for name in names)
    # Only files the allow-list names (or generated ones) are shipped.
    planned = release.plan_release().paths()
    shipped = {path.relative_to(released).as_posix() for path in released_files(released)}
    assert shipped == planned


def _normalise(line: str) -> str:
    code = line.split("  # ", 1)[0]  # an inline comment is not code
    return " ".join(code.split())


def reference_bodies() -> dict[str, list[str]]:
    """For every public function of solutions/: its body lines after the docstring, normalised, non-empty."""
    bodies = {}
    for path in sorted((ROOT / "solutions").glob("*.py")):
        if path.name.startswith("_"):
            continue
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                body = node.body[1:] if isinstance(node.body[0], ast.Expr) else node.body
                text = [_normalise(line) for line in lines[body[0].lineno - 1:node.end_lineno]]
                bodies[f"{path.name}:{node.name}"] = [line for line in text if line]
    return bodies


def test_no_line_of_the_reference_appears_anywhere(released: Path) -> None:
    """Every line of every file (strings and data included) against every reference line, as the packages are."""
    lines = reference_lines()
    assert len(lines) > 300  # the check has something to find
    leaks = find_leaks(folder_texts(released), lines)
    assert not leaks, "\n".join(leaks)


def test_a_shipped_file_repeating_a_reference_line_stops_the_build(tmp_path: Path) -> None:
    kit = tmp_path / "kit"
    shutil.copytree(ROOT, kit, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", "build",
                                                              "benchmarks", ".pytest_cache", ".ruff_cache"))
    lines = reference_lines()
    line, where = next((line, where) for line, where in lines.items() if where.startswith("solutions/attention.py"))
    helper = kit / "tests" / "kit.py"
    helper.write_text(helper.read_text(encoding="utf-8") + f"\n\ndef _mine(q, k):\n    {line}\n", encoding="utf-8")
    number = len(helper.read_text(encoding="utf-8").splitlines())
    with pytest.raises(release_allowlist.ReleaseError) as refused:
        release.plan_release(kit)
    message = str(refused.value)
    assert f"tests/kit.py:{number} holds line {where.removeprefix('solutions/')} of the reference" in message
    assert release.plan_release(ROOT).paths()  # the kit's own files pass the same check


def test_no_two_consecutive_body_lines_of_the_reference_appear(released: Path) -> None:
    """Short lines too: two consecutive lines of a reference body (each maybe under 25 characters) never ship."""
    bodies = reference_bodies()
    assert len(bodies) >= 20  # every exercise's functions were found
    released_text = {}
    for path in released_files(released):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary data (npz, png): the line check above reads their strings
        released_text[path.relative_to(released).as_posix()] = [_normalise(line) for line in text.splitlines()]
    leaks = []
    for name, body in bodies.items():
        pairs = {(a, b) for a, b in zip(body, body[1:], strict=False)}
        for path, lines in released_text.items():
            found = pairs & set(zip(lines, lines[1:], strict=False))
            leaks += [f"{name} lines {pair!r} in {path}" for pair in found]
    assert not leaks, "\n".join(leaks)


def test_stubs_match_the_reference_signatures(released: Path) -> None:
    for exercise in load().exercises:
        stub = ast.parse((released / "exercises" / exercise.module_file).read_text(encoding="utf-8"))
        defined = [node.name for node in stub.body if isinstance(node, ast.FunctionDef)]
        assert defined == list(exercise.functions) or set(exercise.functions) <= set(defined)
        for node in stub.body:
            if isinstance(node, ast.FunctionDef):
                assert isinstance(node.body[-1], ast.Raise), f"{exercise.name}.{node.name} is not a stub"


def test_workflow_grades_every_exercise_with_manifest_points(released: Path) -> None:
    text = (released / ".github/workflows/classroom.yml").read_text(encoding="utf-8")
    curriculum = load()
    ids = re.findall(r"^\s+id: (\w+)$", text, flags=re.MULTILINE)
    assert ids == list(curriculum.names)
    scores = [float(s) for s in re.findall(r"\(([\d.]+) points\)\"$", text, flags=re.MULTILINE)]
    assert scores == [exercise.points for exercise in curriculum.exercises]
    for name in curriculum.names:
        assert f"run: python -m grader.student.classroom {name}\n" in text
        assert f"{name.upper()}_RESULTS: \"${{{{ steps.{name}.outputs.result }}}}\"" in text
    assert f"runners: {','.join(curriculum.names)}" in text
    assert "classroom-resources/autograding-grading-reporter@v1" in text
    assert "@@" not in text
    # Every exercise step and the reporter run whatever happened before (a failure, a timeout), each with a timeout.
    steps = text.split("      - name: ")
    graded = [step for step in steps if "grader.student.classroom" in step or "grading-reporter" in step]
    assert len(graded) == len(curriculum.names) + 1
    assert all("        if: always()\n" in step for step in graded)
    assert all("        timeout-minutes: " in step for step in graded if "grader.student.classroom" in step)


def test_pyproject_and_readme(released: Path) -> None:
    data = tomllib.loads((released / "pyproject.toml").read_text(encoding="utf-8"))
    kit = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert data["project"]["dependencies"] == kit["project"]["dependencies"]
    assert set(data["project"]["optional-dependencies"]) <= set(release_allowlist.STUDENT_EXTRAS)
    packages = data["tool"]["setuptools"]["packages"]
    assert "grader._kit.tests" in packages and "grader.student" in packages
    for banned in ("solutions", "hidden_tests", "mutants", "grading", "sandbox", "authoring", "release_files"):
        assert not any(banned in package for package in packages), (banned, packages)
        assert not any(banned in key for key in data["tool"]["setuptools"]["package-dir"]), banned
    assert data["tool"]["pytest"]["ini_options"] == kit["tool"]["pytest"]["ini_options"]
    readme = (released / "README.md").read_text(encoding="utf-8")
    positions = [readme.index(f"`exercises/{e.module_file}`") for e in load().exercises]
    assert positions == sorted(positions)
    assert "pytest -m softmax" in readme and "pip install -e ." in readme


def test_refuses_to_overwrite_a_folder_and_force_keeps_foreign_files(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    (out / ".git").mkdir(parents=True)
    (out / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (out / "exercises").mkdir()
    (out / "exercises" / "stale.py").write_text("old\n")
    plan = release.plan_release()
    with pytest.raises(release_allowlist.ReleaseError, match="not empty"):
        release.write_release(plan, out)
    release.write_release(plan, out, force=True)
    assert (out / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert not (out / "exercises" / "stale.py").exists()
    assert (out / "exercises" / "softmax.py").is_file()


@pytest.mark.parametrize("held", ["solutions", "grader/hidden_tests", "course.toml"])
def test_force_refuses_a_folder_that_is_no_release_before_changing_anything(tmp_path: Path, held: str) -> None:
    # A hostile round: --force into a copy of the kit removed its hidden tests, grading code and docs, rewrote its
    # README, and only then refused (instructor-only paths); into a course folder, it broke every later grade.
    out = tmp_path / "kit-copy"
    (out / held).parent.mkdir(parents=True, exist_ok=True)
    (out / held).mkdir() if held != "course.toml" else (out / held).write_text("[course]\n")
    (out / "README.md").write_text("mine\n")
    (out / "tests").mkdir()
    (out / "tests" / "test_mine.py").write_text("x = 1\n")
    with pytest.raises(release_allowlist.ReleaseError, match=f"not a release .*{held}.*nothing was changed"):
        release.write_release(release.plan_release(), out, force=True)
    assert (out / "README.md").read_text() == "mine\n" and (out / "tests" / "test_mine.py").is_file()


def test_a_shipped_module_importing_an_unlisted_one_stops_the_build(tmp_path: Path) -> None:
    plan = release_allowlist.Plan()
    helper = tmp_path / "tests" / "helper.py"
    helper.parent.mkdir()
    helper.write_text("from grader.grading.grade import run\n")
    (tmp_path / "grader" / "grading").mkdir(parents=True)
    (tmp_path / "grader" / "grading" / "grade.py").write_text("def run(): pass\n")
    plan.copies["tests/helper.py"] = helper
    with pytest.raises(release_allowlist.ReleaseError, match="instructor-only"):
        release_allowlist.check_imports(plan, tmp_path)


def test_classroom_step_scores_by_the_one_rule(tmp_path: Path) -> None:
    """One failing test costs its share of the exercise, as in status and grade, not the whole exercise."""
    import base64
    import json
    import shutil

    from grader.student import classroom

    impl = tmp_path / "impl"
    shutil.copytree(ROOT / "solutions", impl, ignore=shutil.ignore_patterns("__pycache__"))
    masks = impl / "masks.py"
    masks.write_text(masks.read_text(encoding="utf-8").replace("np.tril(", "np.triu(", 1), encoding="utf-8")
    output = tmp_path / "github_output"
    env = dict(os.environ, GITHUB_OUTPUT=str(output))
    done = subprocess.run([sys.executable, "-m", "grader.student.classroom", "masks", "--impl", str(impl)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=HANG_SECONDS)
    assert done.returncode == 0, done.stderr
    result = json.loads(base64.b64decode(output.read_text().strip().removeprefix("result=")))
    exercise = load().exercise("masks")
    assert result["version"] == 1 and result["max_score"] == exercise.points and result["status"] == "fail"
    passed = [t for t in result["tests"] if t["status"] == "pass"]
    failed = [t for t in result["tests"] if t["status"] == "fail"]
    assert passed and failed
    share = exercise.points / len(result["tests"])  # whole sixteenths of a point, within one of the equal share
    assert all(abs(t["score"] - share) < 1 / 16 and (t["score"] * 16).is_integer() for t in passed)
    assert all(t["score"] == 0 for t in failed)
    from grader.student.status import run_suite

    assert sum(t["score"] for t in result["tests"]) == pytest.approx(run_suite(impl, ["masks"]).points, abs=1e-3)
    assert classroom.runner_result("softmax", str(impl))["status"] == "pass"


def test_a_looping_classroom_exercise_costs_only_its_own_points_and_returns(tmp_path: Path) -> None:
    """A ``while True`` in causal_mask: the Classroom command stops each call past its CPU budget and returns."""
    import base64
    import json
    import shutil

    impl = tmp_path / "impl"
    shutil.copytree(ROOT / "solutions", impl, ignore=shutil.ignore_patterns("__pycache__"))
    masks = impl / "masks.py"
    masks.write_text(masks.read_text(encoding="utf-8") + "\n\ndef causal_mask(n):\n    while True:\n        pass\n",
                     encoding="utf-8")
    output = tmp_path / "github_output"
    done = subprocess.run([sys.executable, "-m", "grader.student.classroom", "masks", "--impl", str(impl)], cwd=ROOT,
                          env=dict(os.environ, GITHUB_OUTPUT=str(output)), capture_output=True, text=True,
                          timeout=HANG_SECONDS)  # a backstop far above the budgets: it returns by itself
    assert done.returncode == 0, done.stderr
    result = json.loads(base64.b64decode(output.read_text().strip().removeprefix("result=")))
    failed = [t for t in result["tests"] if t["status"] == "fail"]
    assert failed and any("did not finish within 5 s: an infinite loop?" in t["message"] for t in failed)
    assert any("was not run: your code already ran out of time 2 times" in t["message"] for t in failed)
    assert any(t["status"] == "pass" for t in result["tests"])  # the tests that never call it still pass
    from grader.student import classroom

    assert classroom.runner_result("softmax", str(impl))["status"] == "pass"  # the next exercise: its full points


def test_classroom_and_grade_give_the_same_public_points(tmp_path: Path) -> None:
    """The same code: Classroom's points for an exercise equal grade's points for its public tests."""
    import base64
    import json
    import shutil

    student = tmp_path / "class" / "bo"
    shutil.copytree(ROOT / "solutions", student, ignore=shutil.ignore_patterns("__pycache__"))
    masks = student / "masks.py"
    masks.write_text(masks.read_text(encoding="utf-8").replace("np.tril(", "np.triu(", 1), encoding="utf-8")
    graded = subprocess.run([sys.executable, "-m", "grader", "grade", str(student.parent), "--out", str(tmp_path / "g"),
                             "--exercise", "masks", "--jobs", "1"], cwd=ROOT, capture_output=True, text=True,
                            timeout=HANG_SECONDS)
    assert graded.returncode == 0, graded.stdout[-2000:] + graded.stderr[-2000:]
    results = json.loads((tmp_path / "g" / "bo" / "results.json").read_text())
    public = sum(t["score"] for t in results["tests"] if "hidden" not in t["tags"])
    output = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "grader.student.classroom", "masks", "--impl", str(student)],
                          cwd=ROOT, env=dict(os.environ, GITHUB_OUTPUT=str(output)), capture_output=True, text=True,
                          timeout=HANG_SECONDS)
    assert done.returncode == 0, done.stderr
    runner = json.loads(base64.b64decode(output.read_text().strip().removeprefix("result=")))
    assert 0 < public < load().exercise("masks").points
    assert sum(t["score"] for t in runner["tests"]) == pytest.approx(public, abs=0.01)


@pytest.mark.parametrize("part", load().parts)
def test_a_release_of_each_part_builds_with_only_its_own_test_files(part: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # A graded test file that imported another exercise's test file (its own forward passes, say) would stop the
    # release of a part that does not ship that file: shared test code lives in modules of tests/ of their own.
    monkeypatch.setenv(PART_ENV, part)
    plan = release.plan_release()
    shipped = {path for path in plan.copies if path.startswith("tests/test_")}
    given = {load().exercise(name).test_file for name in load().given_names(part)}
    assert shipped == {exercise.test_file for exercise in load().selection(part)} | given
    for exercise in load().exercises:
        text = (ROOT / exercise.test_file).read_text(encoding="utf-8")
        assert not re.search(r"^\s*(from|import) tests\.test_", text, flags=re.MULTILINE), \
            f"{exercise.test_file} imports another graded test file"
    # The README's `pytest -m NAME -k WORD` selects some of the first exercise's tests (a Part III release said
    # `-k stable`, which no test of exercise 12 has).
    readme = plan.texts["README.md"]
    first = load().selection(part)[0]
    word = re.search(rf"^pytest -m {first.name} -k (\w+) ", readme, flags=re.MULTILINE).group(1)
    assert re.search(rf"^def test_\w*{word}", (ROOT / first.test_file).read_text(encoding="utf-8"), re.MULTILINE)
    # It names the demos of this course, every one of them, and no other (a Part III README described
    # `demo --explain`, which needs exercise 10, and named none of Part III's measurements).
    kept = set(load().assigned_or_given(part))
    demos = {"--trained": {"training"}, "--explain": {"training", "explain"},
             **{f"--measure {name}": {name} for name in ("negation", "distance", "retrieval", "tokenization")}}
    for flag, needs in demos.items():
        assert (f"attention-kit demo {flag}`" in readme) == (needs <= kept), (part, flag)
    opening = readme.split("\n\n")[1]  # said "from softmax to a full Transformer layer" in a Part III release
    last = load().selection(part)[-1]
    assert f"from exercise {first.number}, {first.name}, to exercise {last.number}, {last.name}." in opening


def test_every_link_of_the_student_readme_lands_in_the_release(released: Path) -> None:
    # The loop's pictures are linked from the root (/docs/demo-heatmap.png) since the release folds
    # docs/student-loop.md into its README; they were left out, so the README showed broken images.
    for document in ("README.md", "docs/student-loop.md", "docs/reading.md"):
        text = (released / document).read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s#]+)", text):
            if "://" in target:
                continue
            base = released if target.startswith("/") else (released / document).parent
            assert (base / target.lstrip("/")).is_file(), (document, target)


def test_a_release_of_part_of_the_kit_says_its_loop_examples_are_the_whole_kits(monkeypatch) -> None:
    # The status, hint and watch examples are runs of the whole kit (15 exercises, softmax first): a Part III
    # student read them as their own course's.
    from grader.authoring.release_contents import student_readme

    loop = (ROOT / "docs" / "student-loop.md").read_text(encoding="utf-8")
    load.cache_clear()
    whole = student_readme(load(), {"docs/student-loop.md": loop})
    monkeypatch.setenv(PART_ENV, "3")
    load.cache_clear()
    part_three = student_readme(load(), {"docs/student-loop.md": loop})
    load.cache_clear()
    note = "The examples below were made with the whole kit (all 15 of its exercises)"
    assert note in part_three and note not in whole
