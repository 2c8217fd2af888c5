"""Keep the generated parts of README.md in step with the manifest.

The README's table of exercises sits between the markers
``<!-- exercises:begin -->`` and ``<!-- exercises:end -->``; it is written
from ``grader/curriculum.toml`` so the order and points are never typed twice.

Usage::

    python -m grader.readme           # rewrite the table in README.md
    python -m grader.readme --check   # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import sys

from grader.curriculum import ROOT, load

README = ROOT / "README.md"
BEGIN, END = "<!-- exercises:begin -->", "<!-- exercises:end -->"


def exercise_table() -> str:
    """The Markdown table of exercises, in curriculum order."""
    rows = ["| # | exercise | you write | points | run its tests |", "|---|---|---|---|---|"]
    for exercise in load().exercises:
        functions = ", ".join(f"`{name}`" for name in exercise.functions)
        rows.append(
            f"| {exercise.number} | {exercise.title} | `exercises/{exercise.module_file}`: {functions} "
            f"| {exercise.points:g} | `pytest -m {exercise.name}` |"
        )
    return "\n".join(rows)


def render(text: str) -> str:
    """``text`` with the block between the markers replaced by the current table."""
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:start] + "\n" + exercise_table() + "\n" + text[end:]


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m grader.readme", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that README.md is current")
    args = parser.parse_args(argv)
    text = README.read_text(encoding="utf-8")
    if args.check:
        if render(text) != text:
            print("README.md's exercise table is out of date: run `python -m grader.readme`")
            return 1
        return 0
    README.write_text(render(text), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
