"""Measure the feedback on mistakes the suite was not tuned to (benchmarks/heldout/*.toml).

Each held-out mistake is planted in a copy of ``solutions/`` and the tests of its ``run`` exercise run
against it in-process, as ``pytest -m <exercise>`` does for a student (the student's own earlier
modules, no isolation). The first failure is what the student reads first. Printed:

* caught: at least one test fails;
* diagnosed right / wrong / partial / none: the first failure's ``Diagnosis:`` names known mistakes;
  right = every named one is the mistake's true idea (or looks the same on every input) and together
  they are all of it; partial = true but not all of it; wrong = names a mistake it is not. For a mistake
  in a function the exercise calls (``blame``), right = the first line names that function, and any
  diagnosis about the calling exercise counts as wrong;
* first message with a revisit line, and with a link to its section of the reading (``docs/reading.md#``);
* family diagnoses: the first failure's ``Diagnosis (a family of mistakes: <kind>)`` (tests/diagnosis.py,
  explain_family; tests/relations.py), ``Diagnosis (the output that differs)`` or ``Diagnosis (the step whose
  output first differs)`` (tests/steps.py). Counted apart from the catalogue's verdicts and listed with the
  mistake's note, for a reviewer to judge (the held-out files name catalogued ideas only); such a first
  failure is never "wrong" by the catalogue's rule, since it names no catalogued mistake.

The figures are printed for every mistake and for each part of the kit (the part of the ``run``
exercise, from grader/curriculum.toml).

Usage: ``python benchmarks/heldout_mistakes.py [--jobs N] [--only SUBSTRING] [--part N] [--show] [--status]``
(``--status``: the first failure as ``attention-kit status`` shows it).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.heldout import HeldOut, load, plant  # noqa: E402

BLAME = re.compile(r"^First fix (\w+)\(\)")
FAMILY = re.compile(r"^(?:First fix .*\n)?Diagnosis \((?:a family of mistakes: ([^)]+)|(the output that differs)"
                    r"|(the step whose output first differs))\)", re.MULTILINE)
READING = "docs/reading.md#"


@dataclass
class Outcome:
    id: str
    caught: bool
    verdict: str  # right, wrong, partial, none
    revisit: bool
    first: str
    named: tuple[str, ...] = ()
    error: str = ""
    note: str = ""
    family: str = ""  # the kind a family diagnosis named ("" when none)
    reading: bool = False  # the first message links the reading


def first_failure(output: str) -> str:
    if "= FAILURES =" not in output:
        return ""
    after = output.split("= FAILURES =", 1)[1].splitlines()
    start = next((i for i, line in enumerate(after) if line.startswith("_")), None)
    if start is None:
        return ""
    body = []
    for line in after[start + 1:]:
        if line.startswith("____") or line.startswith("===="):
            break
        body.append(line)
    return "\n".join(body).strip()


def named_mistakes(text: str) -> tuple[str, ...]:
    from tests.diagnosis import load_fingerprints

    by_description = {mistake.description: mistake.id for mistake in load_fingerprints()}
    head = text.split("\n\n", 1)[0] if text.startswith("Diagnosis:") else ""
    return tuple(by_description.get(d, f"?{d[:40]}") for d in re.findall(r'"(.+?)"\n', head + "\n"))


def judge(mistake: HeldOut, text: str) -> tuple[str, tuple[str, ...]]:
    named = named_mistakes(text)
    blamed = BLAME.match(text)
    if mistake.blame:
        if blamed and blamed.group(1) == mistake.blame:
            return "right", named
        if named or blamed:
            return "wrong", named
        return "none", named
    if blamed:  # blames another function where the mistake is in the function under test
        return "wrong", named
    if not named:
        return "none", named
    true, alike = set(mistake.idea), set(mistake.idea) | set(mistake.also)
    if not set(named) <= alike:
        return "wrong", named
    covered = {m for m in true if m in named} | ({m for m in true} if set(named) & set(mistake.also) else set())
    return ("right" if covered >= true or set(named) >= true else "partial"), named


def _with_family(outcome: Outcome) -> Outcome:
    """``outcome`` with the family its first message names, and whether that message links the reading."""
    found = FAMILY.search(outcome.first.split("\n\n", 1)[0] if outcome.first else "")
    outcome.family = next((group for group in found.groups() if group), "") if found else ""
    outcome.reading = READING in outcome.first
    return outcome


def run_one_in_status(mistake: HeldOut) -> Outcome:
    """The same, as ``attention-kit status`` shows it: the first failure of the exercise."""
    from grader.student import status

    with tempfile.TemporaryDirectory(prefix="attention-kit-heldout-") as workdir:
        target = plant(mistake, Path(workdir) / mistake.id)
        first = status.run_suite(target, [mistake.run])[mistake.run].first_failure
    if first is None:
        return Outcome(mistake.id, False, "none", False, "", note="passes in status (see the pytest run)")
    text = first.message
    verdict, named = judge(mistake, text)
    return Outcome(mistake.id, True, verdict, "revisit:" in text, text, named, reading=READING in text)


def run_one(mistake: HeldOut) -> Outcome:
    from grader.curriculum import load as load_curriculum
    from grader.mutants.report import run_tests

    with tempfile.TemporaryDirectory(prefix="attention-kit-heldout-") as workdir:
        try:
            target = plant(mistake, Path(workdir) / mistake.id)
        except ValueError as error:
            return Outcome(mistake.id, False, "none", False, "", error=str(error))
        test_file = ROOT / load_curriculum().exercise(mistake.run).test_file
        run = run_tests(test_file, target, tb="short")
    if run.exit_code not in (0, 1):
        return Outcome(mistake.id, False, "none", False, "", error=run.output[-500:])
    caught = run.exit_code == 1
    if not caught and mistake.blame:  # the calling exercise is right: the blamed function's own tests must fail
        from grader.curriculum import load as load_curriculum
        own = load_curriculum().exercise_of_function(mistake.blame)
        with tempfile.TemporaryDirectory(prefix="attention-kit-heldout-") as workdir:
            target = plant(mistake, Path(workdir) / mistake.id)
            again = run_tests(ROOT / own.test_file, target, tb="short")
        text = first_failure(again.output)
        return Outcome(mistake.id, again.exit_code == 1, "none", "revisit:" in text, text, (),
                       note=f"{mistake.run} tests pass (its code is right); caught by {own.name}'s",
                       reading=READING in text)
    text = first_failure(run.output) if caught else ""
    verdict, named = judge(mistake, text) if caught else ("none", ())
    return Outcome(mistake.id, caught, verdict, "revisit:" in text, text, named, reading=READING in text)


def figures(outcomes: list[Outcome], by_id: dict[str, HeldOut]) -> dict[str, int]:
    """The counts of a set of outcomes: caught, each verdict, revisit lines, reading links."""
    caught = [o for o in outcomes if o.caught]
    count = {v: sum(o.verdict == v for o in caught) for v in ("right", "wrong", "partial", "none")}
    return {"mistakes": len(outcomes), "caught": len(caught), **count,
            "known_or_blame": sum(bool(by_id[o.id].idea or by_id[o.id].blame) for o in caught),
            "revisit": sum(o.revisit for o in caught), "reading": sum(o.reading for o in caught),
            "family": sum(bool(o.family) for o in caught)}


def print_figures(f: dict[str, int], title: str) -> None:
    print(f"{title}: {f['mistakes']}")
    print(f"caught: {f['caught']}/{f['mistakes']}")
    print(f"diagnosed right: {f['right']}  (of {f['known_or_blame']} that are a known mistake or need a blame)")
    print(f"diagnosed wrong: {f['wrong']}")
    print(f"diagnosed partly (true but incomplete): {f['partial']}")
    print(f"no diagnosis: {f['none']}")
    print(f"first message with a revisit line: {f['revisit']}/{f['caught']}")
    print(f"first message with a link to its section of docs/reading.md: {f['reading']}/{f['caught']}")
    print(f"family diagnoses: {f['family']}")


def _status_worker(mistake: HeldOut) -> Outcome:
    return _with_family(run_one_in_status(mistake))


def _pytest_worker(mistake: HeldOut) -> Outcome:
    return _with_family(run_one(mistake))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", default="", help="only the mistakes whose id contains this")
    parser.add_argument("--part", type=int, default=0, help="only the mistakes of this part's exercises")
    parser.add_argument("--show", action="store_true", help="print every first failure")
    parser.add_argument("--status", action="store_true", help="judge the first failure attention-kit status shows")
    parser.add_argument("--record", action="store_true", help="write the figures to benchmarks/results/")
    parser.add_argument("--folder", default="", help="read the mistakes from this folder's *.toml (a new blind set)")
    args = parser.parse_args(argv)
    from grader.curriculum import load as load_curriculum

    curriculum = load_curriculum()
    every = load(Path(args.folder)) if args.folder else load()
    part_of = {m.id: curriculum.exercise(m.run).part for m in every}
    mistakes = [m for m in every if args.only in m.id and args.part in (0, part_of[m.id])]
    worker = _status_worker if args.status else _pytest_worker
    if args.jobs > 1:
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(args.jobs, mp_context=context) as pool:
            outcomes = list(pool.map(worker, mistakes))
    else:
        outcomes = [worker(m) for m in mistakes]
    by_id = {m.id: m for m in mistakes}
    total = figures(outcomes, by_id)
    print_figures(total, "held-out mistakes")
    parts = sorted({part_of[o.id] for o in outcomes})
    by_part = {str(part): figures([o for o in outcomes if part_of[o.id] == part], by_id) for part in parts}
    if len(parts) > 1:
        for part in parts:
            print()
            print_figures(by_part[str(part)], f"Part {part}")
        print()
    families = [o for o in outcomes if o.caught and o.family]
    unseen = [o for o in outcomes if o.caught and not by_id[o.id].idea and not by_id[o.id].blame]
    print(f"family diagnoses: {len(families)} ({sum(not by_id[o.id].idea for o in families)} of mistakes whose idea "
          f"is not catalogued; {sum(bool(o.family) for o in unseen)} of the {len(unseen)} caught ones that are "
          "neither catalogued nor a blame)")
    from tests.steps import names_a_convention

    told = [o for o in unseen if not o.family and names_a_convention(o.first)]
    print(f"  and {len(told)} more of those {len(unseen)} whose first message names a convention or a question of "
          f"precision instead (a family is not shown over it): {', '.join(o.id for o in told)}")
    for o in families:
        print(f"  family {o.family!r} for {o.id} [{o.verdict}]: {by_id[o.id].note}")
    for o in outcomes:
        flag = ("ERROR " + o.error[:200]) if o.error else ("UNCAUGHT" if not o.caught else
                                                            ("WRONG " + ", ".join(o.named)) if o.verdict == "wrong"
                                                            else "" if o.revisit else "NO REVISIT")
        if flag or o.note:
            print(f"  {o.id}: {flag} {o.note}".rstrip())
    if args.show:
        for o in outcomes:
            print(f"\n===== {o.id} [{o.verdict}]\n{o.first[:1500]}")
    if args.record and not args.only and not args.part:
        from _record import record

        record(__file__, f"{total['caught']} of {total['mistakes']} caught, {total['right']} of "
               f"{total['known_or_blame']} diagnosed right, {total['wrong']} wrong, {total['revisit']} first "
               f"messages with a revisit line, {total['reading']} with a reading link, "
               f"{total['family']} family diagnoses ({sum(bool(o.family) for o in unseen)} of the {len(unseen)} "
               "mistakes neither catalogued nor a blame)"
               + (" (as status shows them)" if args.status else ""),
               {**total, "status": args.status, "by_part": by_part})
    return 0


if __name__ == "__main__":
    sys.exit(main())
