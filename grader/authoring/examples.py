"""The terminal examples of README.md and docs/, produced by running the kit as a student would.

Every deterministic example a student reads (``status`` midway, a failure, a
diagnosis, ``hint``, ``demo``, a mistyped name) sits in a Markdown file
between ``<!-- example:NAME -->`` and ``<!-- end example -->``. This module
builds the student release into a scratch folder, plants the example's
situation in its ``exercises/`` (the reference for the exercises already done,
a planted mistake in the one in progress, the stubs for the rest), runs the
command there in a fresh process, exactly as a student types it, and writes
what it printed into the block. Nothing is typed by hand, so an example cannot
drift from what the kit does: the project's tests fail when one is stale.

Usage::

    python -m grader.authoring.examples           # rewrite the examples (then the other generated parts)
    python -m grader.authoring.examples --check   # exit 1 naming the stale examples

The output is deterministic: seeded inputs, no timings (pytest's "in 0.81s"
is removed), relative paths only, no colour (``NO_COLOR``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from grader.curriculum import ROOT, load

# How long a command whose output an example shows may run before it is called hung: a backstop only (its output
# never depends on time; on a busy machine at a low priority a command of a few CPU-s takes minutes).
HANG_SECONDS = 1200

# The Markdown files whose example blocks are generated: the README and every guide in docs/.
DOCUMENTS = ("README.md", *sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "docs").glob("*.md")))
BLOCK = re.compile(r"(?P<open><!-- example:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(?P<close><!-- end example -->)", re.S)


@dataclass(frozen=True)
class Plant:
    """A mistake planted in the reference module of one exercise: ``replace`` becomes ``with_``."""

    exercise: str
    replace: str
    with_: str
    catalogue: str = ""  # the id of the catalogued mistake this is, if any (it must then match)


@dataclass(frozen=True)
class Example:
    """One terminal example: the situation, the command a student types, and how much of the output shows."""

    name: str
    command: tuple[str, ...]  # as typed: ("attention-kit", "status") or ("pytest", "-m", "softmax", "-x")
    done: tuple[str, ...] = ()  # exercises replaced by the reference
    plant: Plant | None = None  # a mistake in the reference of one more exercise
    excerpt: str = ""  # "first failure": pytest's first failure (from its FAILURES section) and its last line
    files: dict[str, str] = field(default_factory=dict)  # extra output files to copy back: produced -> kit path
    save: Plant | None = None  # a mistake saved (in a module of ``done``) while the command runs, then Ctrl-C
    start: str = ""  # show the output from the first line starting so (what comes before varies from run to run)


EXAMPLES = (
    Example(
        "status", ("attention-kit", "status"), done=("softmax",),
        plant=Plant("projections", "out = out + bias", "out = out", catalogue="projections-linear-bias-ignored"),
    ),
    Example(
        "failure", ("pytest", "-m", "softmax"),
        # Part of the line only: the kit's package holds no whole line of the reference (grader/tests/test_install.py).
        plant=Plant("softmax", "np.sum(exponentials, axis=axis, keepdims=True)", "np.sum(exponentials)"),
        excerpt="first failure",
    ),
    Example("hint", ("attention-kit", "hint", "softmax")),
    Example("typo", ("pytest", "-m", "softmx")),
    Example(
        "watch-regression", ("attention-kit", "watch"),
        done=("softmax", "projections", "attention", "masks", "positional", "multihead"),
        save=Plant("masks", "np.tril(", "np.triu(", catalogue="masks-causal-triu"),
    ),
    Example("demo", ("attention-kit", "demo"), done=("softmax", "projections", "attention"),
            files={"attention-demo.png": "docs/demo-heatmap.png"}),
    Example("demo-explain", ("attention-kit", "demo", "--explain"),
            done=("softmax", "projections", "attention", "masks", "positional", "multihead", "layer", "backward",
                  "training", "explain"),
            files={"attention-explain.png": "docs/demo-explain.png"}),
    *(Example(f"demo-{name}", ("attention-kit", "demo", "--measure", name),
              done=(*load().dependencies(name), name, *extra), start=start,
              files={f"attention-{name}.png": f"docs/demo-{name}.png"})
      for name, extra, start in (("negation", (), ""), ("distance", (), ""), ("retrieval", (), ""),
                                 # its table holds CPU times and peak memory: the words' cuts are shown
                                 ("tokenization", ("softmax", "attention"), "'vessel'"))),
)


class ExampleError(RuntimeError):
    """An example could not be produced (its situation does not apply, or the command failed to run)."""


def build_release(folder: Path) -> Path:
    """The student release, as ``attention-kit release --no-git`` writes it, in ``folder``."""
    from grader.authoring.release import plan_release, write_release

    out = folder / "attention-kit"
    write_release(plan_release(), out)
    return out


def plant(release: Path, example: Example) -> None:
    """Put ``example``'s situation into ``release/exercises``: reference modules, one planted mistake."""
    exercises = release / "exercises"
    stubs = {path.name: path.read_bytes() for path in exercises.glob("*.py")}
    for name in stubs:  # start from the stubs every time
        (exercises / name).write_bytes(stubs[name])
    for name in (ROOT / "solutions").glob("_*.py"):  # the reference's helpers (input checks)
        if name.name != "__init__.py":
            shutil.copy(name, exercises / name.name)
    for exercise in example.done:
        shutil.copy(ROOT / "solutions" / load().exercise(exercise).module_file, exercises)
    if example.plant is not None:
        module = load().exercise(example.plant.exercise).module_file
        source = (ROOT / "solutions" / module).read_text(encoding="utf-8")
        if source.count(example.plant.replace) != 1:
            raise ExampleError(f"example {example.name}: {example.plant.replace!r} is not once in solutions/{module}")
        (exercises / module).write_text(source.replace(example.plant.replace, example.plant.with_), encoding="utf-8")


def _environment(release: Path) -> dict[str, str]:
    keep = {key: value for key, value in os.environ.items()
            if key not in ("PYTHONPATH", "FORCE_COLOR", "PY_COLORS") and not key.startswith("PYTEST_")}
    return keep | {"NO_COLOR": "1", "COLUMNS": str(WIDTH), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0",
                   "PYTHONPATH": str(release),
                   "ATTENTION_KIT_CACHE": str(release.parent / "cache")}  # status's kept results: in the scratch


def run(release: Path, example: Example) -> str:
    """Run ``example``'s command in ``release`` and return what a student sees (stdout and stderr)."""
    program, *arguments = example.command
    if program == "attention-kit":
        argv = [sys.executable, "-m", "grader", *arguments]
    elif program == "pytest":
        argv = [sys.executable, "-m", "pytest", *arguments, "-p", "no:cacheprovider"]
    else:
        raise ExampleError(f"example {example.name}: unknown program {program!r}")
    if example.save is not None:
        printed = _run_and_save(argv, release, example)
    else:
        done = subprocess.run(argv, cwd=release, env=_environment(release), capture_output=True, text=True,
                              timeout=HANG_SECONDS)
        printed = done.stdout + done.stderr
    if "Traceback (most recent call last)" in printed:
        raise ExampleError(f"example {example.name}: `{' '.join(example.command)}` crashed:\n{printed}")
    return printed


def _run_and_save(argv: list[str], release: Path, example: Example) -> str:
    """Start a watching command, save ``example.save`` once it watches, and stop it with Ctrl-C when it is done.

    No wall-clock rule decides what is shown (the examples are produced on busy machines too): the round after
    the save has begun when its ``changed:`` line comes, and it is over when ``watch`` sleeps again between its
    polls (:func:`_until_asleep`). Ctrl-C then stops it, and the ``^C`` a terminal echoes goes where it would,
    before ``watch``'s last line. Waits are backstops against a hang only.
    """
    import signal
    import threading

    assert example.save is not None
    # Ctrl-C must reach it as a terminal's would: a process started in the background (a CI job, pytest-xdist's
    # workers) may ignore SIGINT, and a child inherits that; Python then never raises KeyboardInterrupt.
    process = subprocess.Popen(argv, cwd=release, env=_environment(release), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert process.stdout is not None
    backstop = threading.Timer(HANG_SECONDS, process.kill)  # a hang ends the output (EOF) and the process
    backstop.start()
    printed: list[str] = []
    saved = False
    try:
        for line in process.stdout:
            printed.append(line)
            if line.startswith("Watching ") and not saved:
                module = release / "exercises" / load().exercise(example.save.exercise).module_file
                text = module.read_text(encoding="utf-8")
                if text.count(example.save.replace) != 1:
                    raise ExampleError(f"example {example.name}: {example.save.replace!r} is not once in "
                                       f"{module.name}")
                module.write_text(text.replace(example.save.replace, example.save.with_), encoding="utf-8")
                saved = True
            elif saved and line.startswith("changed:") and module.name in line:
                break  # the round of the saved module (not of a file the first round left in the folder)
        _until_asleep(process.pid)  # the round printed whole: watch is back in its sleep between polls
        process.send_signal(signal.SIGINT)
        rest = process.stdout.read()  # to its end: what is buffered already, then the last lines
        process.wait()
    finally:
        backstop.cancel()
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
    text = "".join(printed) + rest
    if not saved or "changed:" not in text:
        raise ExampleError(f"example {example.name}: `{' '.join(example.command)}` never showed the saved "
                           f"change:\n{text}")
    head, stop, tail = text.rpartition("\nStopped watching.")
    return head + "^C\n" + stop + tail if stop else text + "^C\n"


TIMING = re.compile(r" in \d+(\.\d+)?s( \(\d+:\d+:\d+\))?")
SEPARATOR = re.compile(r"(?P<fill>=+) (?P<title>.+?) =+(?P<end>\n?)")
WIDTH = 100  # the terminal's columns in _environment (COLUMNS): pytest's separator lines are this wide


def _untimed(line: str) -> str:
    """``line`` without pytest's timing ("in 0.81s", "in 75.3s (0:01:15)"); its summary line laid out again.

    pytest centres the summary between ``=`` for the terminal's width, timing included: the padding would still
    tell how long the run took (a busy machine's longer time, a shorter line of ``=``). Laid out again as
    pytest lays out a title (``TerminalWriter.sep``), the line is the same whatever the time.
    """
    untimed = TIMING.sub("", line)
    separator = SEPARATOR.fullmatch(untimed)
    if untimed == line or separator is None:
        return untimed
    title = separator["title"]
    fill = "=" * max((WIDTH - len(title) - 2) // 2, 1)
    laid_out = f"{fill} {title} {fill}"
    return laid_out + ("=" if len(laid_out) + 1 <= WIDTH else "") + separator["end"]


def _until_asleep(pid: int) -> None:
    """Return once process ``pid`` sleeps in ``time.sleep`` (its kernel wait channel, ``/proc/PID/wchan``).

    The round's lines reach the pipe as ``print`` writes them, so their first line says nothing of the last;
    the sleep that follows the round does. Where the kernel does not show the wait channel, 2 s of waiting
    stand in for it.
    """
    import time

    channel = Path(f"/proc/{pid}/wchan")
    for _ in range(int(HANG_SECONDS / 0.02)):
        try:
            where = channel.read_text(encoding="ascii").strip()
        except OSError:  # ended, or no /proc: nothing to wait for
            return
        if where in ("", "0"):  # not shown by this kernel
            time.sleep(2.0)
            return
        if "nanosleep" in where:
            return
        time.sleep(0.02)


def tidy(text: str, example: Example, release: Path) -> str:
    """The output as it goes into the docs: no timings, no scratch paths, no trailing spaces."""
    text = text.replace(str(release), ".")
    text = "".join(_untimed(line) for line in text.splitlines(keepends=True))
    text = re.sub(r"^--- \d\d:\d\d:\d\d ", "--- 10:00:00 ", text, flags=re.M)  # watch's clock: one fixed time
    if example.start:
        lines = text.strip("\n").splitlines()
        first = next((i for i, line in enumerate(lines) if line.startswith(example.start)), None)
        if first is None:
            raise ExampleError(f"example {example.name}: no line starts with {example.start!r}:\n{text}")
        text = "\n".join(["[... the lines before vary from run to run (times, memory) ...]", *lines[first:]])
    if example.excerpt == "first failure":
        lines = text.strip().splitlines()
        heads = [i for i, line in enumerate(lines) if re.fullmatch(r"_+ \S+ _+", line)]
        start = next((i for i, line in enumerate(lines) if re.fullmatch(r"=+ FAILURES =+", line)), None)
        if start is None or not heads:
            raise ExampleError(f"example {example.name}: no failure in the output:\n{text}")
        end = heads[1] if len(heads) > 1 else len(lines) - 1
        text = "\n".join([*lines[start:end], "[... the other failures, then the summary ...]", lines[-1]])
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines()) + "\n"


def produce(examples: tuple[Example, ...] = EXAMPLES, keep_files: bool = False) -> dict[str, str]:
    """Name -> the Markdown body of each example (a console block: the command, then its output).

    ``keep_files`` copies the files an example produces (the demo's heatmap) into the kit.
    """
    results = {}
    with tempfile.TemporaryDirectory(prefix="attention-kit-examples-") as scratch:
        release = build_release(Path(scratch))
        for example in examples:
            plant(release, example)
            output = tidy(run(release, example), example, release)
            for planted in (example.plant, example.save):
                if planted is not None and planted.catalogue:
                    if f"Diagnosis: your {load().exercise(planted.exercise).module_file}" not in output:
                        raise ExampleError(f"example {example.name}: the planted {planted.catalogue} "
                                           f"was not diagnosed:\n{output}")
            shown = "$ " + " ".join(example.command)
            results[example.name] = f"```console\n{shown}\n{output}```\n"
            if keep_files:
                for produced, target in example.files.items():
                    if (release / produced).is_file():
                        shutil.copyfile(release / produced, ROOT / target)
    return results


def render(text: str, bodies: dict[str, str], where: str = "") -> str:
    """``text`` with every example block replaced by its body.

    Raises
    ------
    ExampleError
        If a block names an example that does not exist.
    """
    def fill(match: re.Match[str]) -> str:
        if match["name"] not in bodies:
            raise ExampleError(f"{where}: no example named {match['name']!r} (known: {', '.join(bodies)})")
        return match["open"] + bodies[match["name"]] + match["close"]

    return BLOCK.sub(fill, text)


def stale(bodies: dict[str, str]) -> list[str]:
    """The documents whose example blocks differ from ``bodies``."""
    found = []
    for document in DOCUMENTS:
        path = ROOT / document
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            if render(text, bodies, document) != text:
                found.append(document)
    return found


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m grader.authoring.examples", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that every example is current")
    args = parser.parse_args(argv)
    bodies = produce(keep_files=not args.check)
    if args.check:
        documents = stale(bodies)
        if documents:
            print(f"stale terminal examples in {', '.join(documents)}: run `python -m grader.authoring.examples`")
            return 1
        return 0
    for document in DOCUMENTS:
        path = ROOT / document
        if path.is_file():
            path.write_text(render(path.read_text(encoding="utf-8"), bodies, document), encoding="utf-8")
    from grader.authoring import readme

    return readme.main([])


if __name__ == "__main__":
    sys.exit(main())
