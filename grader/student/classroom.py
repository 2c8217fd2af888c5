"""``python -m grader.student.classroom EXERCISE``: one exercise's score for GitHub Classroom.

The release's workflow (``.github/workflows/classroom.yml``) runs this once per
exercise. It runs the exercise's graded tests as ``attention-kit status`` does
and scores them by the kit's one rule (``grader.scoring``): the exercise's
points are split between its tests (as equally as whole sixteenths of a point
allow), so one failing test of a 20-point exercise with 22 tests costs about
20/22 points, not 20. The result goes to the step
output ``result`` in the runner format that ``autograding-grading-reporter``
reads (base64 of ``{"version": 1, "status", "max_score", "tests": [...]}``; the
reporter adds up the tests' ``score`` and the runners' ``max_score``).

Exit status 0 whenever the tests ran (the reporter marks failures); 2 when
they could not run.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from grader import scoring
from grader.curriculum import load as load_curriculum

if TYPE_CHECKING:
    from grader.student.status import ExerciseResult


def runner_result(exercise: str, impl: str = "exercises") -> dict[str, Any]:
    """The reporter's result for ``exercise``: one entry per graded test, each worth its share."""
    from grader.student.status import run_suite

    return _runner_format(run_suite(impl, [exercise])[exercise])


def _runner_format(result: ExerciseResult) -> dict[str, Any]:
    """``result`` in the reporter's runner format (the shares are exact: their float sum is the maximum)."""
    exercise = result.exercise.name
    points = result.exercise.points
    shares = scoring.shares(points, result.total)
    tests = [{
        "name": test.name,
        "status": "pass" if test.passed else "fail",
        "score": share if test.passed else 0.0,
        "message": "" if test.passed else test.message[:2000],
        "test_code": f"attention-kit test -m {exercise} -k {test.name}",
        "filename": result.exercise.test_file,
        "line_no": 0,
        "execution_time": 0,
    } for test, share in zip(result.tests, shares, strict=True)]
    if result.error or not tests:
        tests = [{"name": f"{exercise}: collecting the tests", "status": "error", "score": 0,
                  "message": result.error or "no tests ran", "test_code": "", "filename": result.exercise.test_file,
                  "line_no": 0, "execution_time": 0}]
    status = "pass" if all(test["status"] == "pass" for test in tests) else "fail"
    return {"version": 1, "status": status, "max_score": points, "tests": tests}


def main(argv: list[str] | None = None) -> int:
    """Write the result of one exercise to $GITHUB_OUTPUT (or print it) and say the score."""
    parser = argparse.ArgumentParser(prog="python -m grader.student.classroom", description=__doc__.splitlines()[0])
    parser.add_argument("exercise", choices=load_curriculum().names)
    parser.add_argument("--impl", default="exercises", metavar="DIR")
    args = parser.parse_args(argv)
    from grader.curriculum import make_importable

    make_importable()
    from grader.student.status import run_suite

    try:
        ran = run_suite(args.impl, [args.exercise])[args.exercise]
        result = _runner_format(ran)
    except (ValueError, RuntimeError) as error:
        print(f"classroom: {error}", file=sys.stderr)
        return 2
    score = sum(test["score"] for test in result["tests"])
    passed = sum(test["status"] == "pass" for test in result["tests"])
    print(f"{args.exercise}: {passed}/{len(result['tests'])} tests, {scoring.number(score)}/"
          f"{scoring.number(result['max_score'])} points (points in proportion to the passing tests)")
    if ran.import_problem:  # every test failed for this one reason: say it, not only "0/15 tests"
        detail = next(iter(ran.tests[0].message.splitlines()), "") or ran.import_problem
        detail = detail.removeprefix(f"importing {ran.exercise.module_file} raised ")  # said by "does not import"
        print(f"{ran.exercise.module_file} does not import: {detail}")
    elif ran.error:
        print(f"{ran.exercise.test_file} could not be collected: {ran.error.splitlines()[0]}")
    hidden = load_curriculum().exercise(args.exercise).hidden_points
    if hidden:
        print(f"Your instructor's grade may add up to {scoring.number(hidden)} points of hidden tests of this "
              "exercise.")
    encoded = base64.b64encode(json.dumps(result).encode()).decode()
    output = os.environ.get("GITHUB_OUTPUT")
    if output:
        with open(output, "a", encoding="utf-8") as stream:
            stream.write(f"result={encoded}\n")
    else:
        print(f"result={encoded}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
