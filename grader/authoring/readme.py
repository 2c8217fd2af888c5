"""Keep the generated parts of README.md and docs/ in step with the manifest and the benchmarks.

The README's table of exercises sits between the markers
``<!-- exercises:begin -->`` and ``<!-- exercises:end -->``; it is written
from ``grader/curriculum.toml`` so the order and points are never typed twice.
The benchmark table between ``<!-- benchmarks:begin -->`` and
``<!-- benchmarks:end -->`` (docs/benchmarks.md), each ``<!-- benchmark:NAME -->``
... ``<!-- end benchmark -->`` (a script's recorded summary, with the date and
the machine) and each ``<!-- figure:NAME.FIELD -->`` ... ``<!-- end figure -->``
(one recorded figure, e.g. ``status_time.unchanged_s``), in README.md,
CONTRIBUTING.md or any docs/*.md, are written from the figures the benchmark scripts recorded
(``benchmarks/results/NAME.json``, ``--record``): no timing is typed by hand.
The terminal examples are written by ``grader.authoring.examples``.

Usage::

    python -m grader.authoring.readme           # rewrite the generated parts
    python -m grader.authoring.readme --check   # exit 1 if any is out of date
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
ONE_FIGURE = re.compile(r"(<!-- figure:(?P<name>[\w-]+)\.(?P<field>\w+) -->)(.*?)(<!-- end figure -->)", re.S)


def documents() -> list[Path]:
    """The Markdown files whose generated parts this module writes: README.md, CONTRIBUTING.md, every docs/*.md."""
    return [README, *[path for path in (ROOT / "CONTRIBUTING.md",) if path.is_file()],
            *sorted((ROOT / "docs").glob("*.md"))]


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


def one_figure(name: str, field: str) -> str:
    """One recorded figure of a benchmark (``figures[field]`` of its results), as the docs print it.

    Raises
    ------
    KeyError
        If the benchmark recorded no such figure (a marker that names it is a typo or outlived the figure).
    """
    path = BENCHMARKS / "results" / f"{name}.json"
    if not path.is_file():
        raise KeyError(f"<!-- figure:{name}.{field} -->: benchmarks/results/{name}.json does not exist "
                       f"(run `python benchmarks/{name.partition('-')[0]}.py --record`)")
    figures = json.loads(path.read_text(encoding="utf-8")).get("figures", {})
    if field not in figures:
        raise KeyError(f"<!-- figure:{name}.{field} -->: benchmarks/results/{name}.json has no figure {field!r} "
                       f"(it has {', '.join(sorted(figures))})")
    value = figures[field]
    return f"{value:g}" if isinstance(value, float) else str(value)


def render_figures(text: str) -> str:
    """``text`` with its benchmark table and figures brought up to date."""
    text = TABLE.sub(lambda m: m.group(1) + benchmark_table() + "\n" + m.group(3), text)
    text = ONE_FIGURE.sub(lambda m: m.group(1) + one_figure(m["name"], m["field"]) + m.group(5), text)
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


def render(text: str) -> str:
    """README.md's ``text`` with the exercise table and the benchmark figures brought up to date."""
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return render_figures(text[:start] + "\n" + exercise_table() + "\n" + text[end:])


def rendered(path: Path) -> str:
    """What ``path`` (README.md or a docs/*.md) should hold."""
    text = path.read_text(encoding="utf-8")
    return render(text) if path == README else render_figures(text)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m grader.authoring.readme", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that the generated parts are current")
    args = parser.parse_args(argv)
    try:
        wanted = {path: rendered(path) for path in documents()}
    except KeyError as error:
        print(f"error: {error.args[0]}", file=sys.stderr)
        return 1
    stale = [path for path, text in wanted.items() if path.read_text(encoding="utf-8") != text]
    if args.check:
        if stale:
            names = ", ".join(path.relative_to(ROOT).as_posix() for path in stale)
            print(f"generated parts out of date in {names}: run `python -m grader.authoring.readme`")
            return 1
        return 0
    for path in stale:
        path.write_text(wanted[path], encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
