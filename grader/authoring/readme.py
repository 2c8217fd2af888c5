"""Keep the generated parts of README.md in step with the manifest.

The README's table of exercises sits between the markers
``<!-- exercises:begin -->`` and ``<!-- exercises:end -->``; it is written
from ``grader/curriculum.toml`` so the order and points are never typed twice.
A block between ``<!-- include:docs/NAME.md -->`` and ``<!-- end include -->``
is a copy of that document (the sections the release builder also ships).
The benchmark table between ``<!-- benchmarks:begin -->`` and
``<!-- benchmarks:end -->``, and each ``<!-- benchmark:NAME -->`` ...
``<!-- end benchmark -->`` line in README.md or docs/, are written from the
figures the benchmark scripts recorded (``benchmarks/results/NAME.json``,
``--record``), with the date and the machine: no figure is typed by hand.
The terminal examples are written by ``grader.authoring.examples``.

Usage::

    python -m grader.authoring.readme           # rewrite the table in README.md
    python -m grader.authoring.readme --check   # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

from grader.curriculum import ROOT, load

README = ROOT / "README.md"
BEGIN, END = "<!-- exercises:begin -->", "<!-- exercises:end -->"
BENCHMARKS = ROOT / "benchmarks"
TABLE = re.compile(r"(<!-- benchmarks:begin -->\n)(.*?)(<!-- benchmarks:end -->)", re.S)
FIGURE = re.compile(r"(<!-- benchmark:(?P<name>[\w-]+) -->)(.*?)(<!-- end benchmark -->)", re.S)
# Documents under docs/ whose benchmark figures are generated too (the README includes some of them).
DOCS_WITH_FIGURES = ("docs/jupyter.md", "docs/cluster.md")


def measured(name: str) -> str:
    """One benchmark's recorded figures, with when and where; or how to record them."""
    path = BENCHMARKS / "results" / f"{name}.json"
    if not path.is_file():
        script, _, variant = name.partition("-")  # a variant: benchmarks/results/<script>-<variant>.json
        return f"not recorded yet (`python benchmarks/{script}.py{' ...' if variant else ''} --record`)"
    data = json.loads(path.read_text(encoding="utf-8"))
    machine = data.get("machine", {})
    load = f", load {machine['load_average']}" if "load_average" in machine else ""
    return (f"{data['summary']} (measured {data['date']} on {machine.get('cores', '?')} cores, "
            f"{machine.get('cpu', '?')}, Python {machine.get('python', '?')}, numpy {machine.get('numpy', '?')}"
            f"{load})")


def benchmark_table() -> str:
    """The Markdown table of the benchmark scripts: what each measures (its docstring) and its figures."""
    rows = ["| script | what it measures | recorded figures |", "|---|---|---|"]
    for script in sorted(BENCHMARKS.glob("[!_]*.py")):
        docstring = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
        what = re.sub(r"``(.+?)``", r"`\1`", docstring.strip().splitlines()[0] if docstring.strip() else "")
        rows.append(f"| `python benchmarks/{script.name}` | {what} | {measured(script.stem)} |")
    return "\n".join(rows)


def render_figures(text: str) -> str:
    """``text`` with its benchmark table and figures brought up to date."""
    text = TABLE.sub(lambda m: m.group(1) + benchmark_table() + "\n" + m.group(3), text)
    return FIGURE.sub(lambda m: m.group(1) + measured(m["name"]) + m.group(4), text)


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
    text = render_figures(text[:start] + "\n" + exercise_table() + "\n" + text[end:])

    def include(match: re.Match[str]) -> str:
        body = render_figures((ROOT / match["path"]).read_text(encoding="utf-8")).rstrip("\n") + "\n"
        return match.group(1) + body + match.group(4)

    return INCLUDE.sub(include, text)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m grader.authoring.readme", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that README.md is current")
    args = parser.parse_args(argv)
    text = README.read_text(encoding="utf-8")
    docs = {Path(ROOT / path): (ROOT / path).read_text(encoding="utf-8") for path in DOCS_WITH_FIGURES
            if (ROOT / path).is_file()}
    if args.check:
        stale = [path.name for path, body in docs.items() if render_figures(body) != body]
        if render(text) != text or stale:
            print("README.md's generated parts are out of date"
                  f"{' (and ' + ', '.join(stale) + ')' if stale else ''}: run `python -m grader.authoring.readme`")
            return 1
        return 0
    for path, body in docs.items():
        path.write_text(render_figures(body), encoding="utf-8")
    README.write_text(render(text), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
