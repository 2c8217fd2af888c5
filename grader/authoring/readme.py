"""Keep the generated parts of README.md in step with the manifest.

The README's table of exercises sits between the markers
``<!-- exercises:begin -->`` and ``<!-- exercises:end -->``; it is written
from ``grader/curriculum.toml`` so the order and points are never typed twice.
A block between ``<!-- include:docs/NAME.md -->`` and ``<!-- end include -->``
is a copy of that document (the sections the release builder also ships).

Usage::

    python -m grader.authoring.readme           # rewrite the table in README.md
    python -m grader.authoring.readme --check   # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import re
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


INCLUDE = re.compile(r"(<!-- include:(?P<path>[\w./-]+) -->\n)(?P<body>.*?)(<!-- end include -->)", re.S)


def render(text: str) -> str:
    """``text`` with the table and the included documents brought up to date."""
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    text = text[:start] + "\n" + exercise_table() + "\n" + text[end:]

    def include(match: re.Match[str]) -> str:
        body = (ROOT / match["path"]).read_text(encoding="utf-8").rstrip("\n") + "\n"
        return match.group(1) + body + match.group(4)

    return INCLUDE.sub(include, text)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m grader.authoring.readme", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that README.md is current")
    args = parser.parse_args(argv)
    text = README.read_text(encoding="utf-8")
    if args.check:
        if render(text) != text:
            print("README.md's exercise table is out of date: run `python -m grader.authoring.readme`")
            return 1
        return 0
    README.write_text(render(text), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
