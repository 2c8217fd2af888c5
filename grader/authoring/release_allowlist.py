"""What may go into the student release, and the check that nothing else does.

What ships is decided by an allow-list (``STUDENT_FILES``, ``OPTIONAL_FILES``,
``STUDENT_DOCS`` and the manifest's test files), never by leaving things out.
Every shipped Python file's imports are then followed (:func:`check_imports`):
a shipped file that imports a kit module which is not on the allow-list stops
the build, so a new helper cannot be forgotten and an instructor module cannot
slip in. ``INSTRUCTOR_ONLY`` is a last check on the plan and on the finished
folder, and :func:`check_reference_lines` one on every text the plan holds: no
line of the reference ships, whatever file it hides in. A :class:`Plan` is the
list of files one release holds.

Called by ``grader.authoring.release`` (which builds the plan and writes it)
and ``grader.authoring.release_contents``. Imports only the standard library.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grader.curriculum import kit_path

# Always shipped (paths relative to the kit's root).
STUDENT_FILES = (
    "conftest.py",
    "grader/__init__.py",
    "grader/__main__.py",
    "grader/call_limits.py",  # tests/kit.py's call and diagnosis budgets, the grader's too (standard library only)
    "grader/cli.py",
    "grader/course.py",
    "grader/curriculum.py",
    "grader/curriculum.toml",
    "grader/quiet.py",
    "grader/suite.py",
    "grader/scoring.py",
    "grader/term.py",  # course.py reads [late] and [extensions] with it (standard library only)
    "LICENSE",
    "tests/__init__.py",
    "tests/by_code.py",
    "tests/decoded.py",
    "tests/conventions.py",
    "tests/crash.py",
    "tests/effort.py",
    "tests/failures.py",
    "tests/feedback.py",
    "tests/first_run.py",
    "tests/kept_state.py",
    "tests/api_signatures.py",
    "tests/kept_values.py",
    "tests/kinds.py",
    "tests/kit.py",
    "tests/moves.py",
    "tests/one_thread.py",
    "tests/own_models.py",
    "tests/plugin.py",
    "tests/probes.py",
    "tests/reach.py",
    "tests/relations.py",
    "tests/selection.py",
    "tests/steps.py",
    "tests/unseen.py",
)
# Shipped when present: the student commands, the diagnosis of known mistakes and the test data.
OPTIONAL_FILES = (
    "grader/student/__init__.py",
    "grader/student/status.py",
    "grader/student/results_cache.py",
    "grader/student/hints.py",
    "grader/student/watch.py",
    "grader/student/demo.py",
    "grader/student/demo_explain.py",
    "grader/student/measured_demo.py",
    "grader/student/demo_negation.py",
    "grader/student/demo_retrieval.py",
    "grader/student/demo_tokenization.py",
    "grader/student/demo_distance.py",
    "grader/student/picture.py",
    "grader/student/testing.py",
    "grader/student/notebook.py",
    "grader/student/classroom.py",
    "tests/diagnosis.py",
    "tests/data/golden.npz",
    "tests/data/fingerprints.npz",
)
# Student documentation, shipped when present (and folded into the README).
STUDENT_DOCS = ("docs/student-loop.md", "docs/common-mistakes.md", "docs/reading.md")
# Extras of pyproject.toml that make sense without the reference.
STUDENT_EXTRAS = ("cli", "plot")
# Never in a release, whatever imports them (checked on the finished folder).
INSTRUCTOR_ONLY = (
    "solutions",
    "benchmarks",
    "grader/hidden_tests",
    "grader/mutants",
    "grader/tests",
    "grader/release_files",
    # Whole rooms: grading a class, the sandbox, authoring (see grader/__init__.py).
    "grader/grading",
    "grader/sandbox",
    "grader/authoring",
)
# A line of the reference this long or longer, that the stubs do not hold, never ships (see check_reference_lines).
REFERENCE_LINE_LENGTH = 25
# The top-level entries a release consists of (what --force may replace).
RELEASE_ENTRIES = (
    "exercises", "tests", "grader", "docs", "conftest.py", "pyproject.toml", "README.md", ".gitignore", "LICENSE",
    ".github/workflows/classroom.yml",
)


@dataclass
class Plan:
    """What a release holds: files copied from the kit and files written for it."""

    copies: dict[str, Path] = field(default_factory=dict)  # release path -> kit file
    texts: dict[str, str] = field(default_factory=dict)  # release path -> content
    notes: list[str] = field(default_factory=list)

    def paths(self) -> set[str]:
        """Every release path of the plan."""
        return set(self.copies) | set(self.texts)


class ReleaseError(Exception):
    """The release cannot be built as asked; the message says why."""


def source_tree(root: Path | None) -> Callable[[str], Path]:
    """Where the kit's file ``grader/cli.py``, ``tests/kit.py`` ... lies: in ``root``, or in this kit."""
    if root is None:
        return lambda path: kit_path(path)
    return lambda path: Path(root) / path


def instructor_only(path: str) -> bool:
    """Whether the release path ``path`` is, or lies inside, one of :data:`INSTRUCTOR_ONLY`."""
    return any(path == banned or path.startswith(banned + "/") for banned in INSTRUCTOR_ONLY)


def linked_files(markdown: Path, root: Path) -> list[str]:
    """Kit files that a Markdown document links to by a relative path (images, other docs)."""
    found = []
    for target in re.findall(r"\]\(([^)\s#]+)", markdown.read_text(encoding="utf-8")):
        if "://" in target:
            continue
        # "/docs/x.png" is from the repository's root: the release folds docs/student-loop.md into its README.
        rooted = target.startswith("/")
        candidates = (root / target.lstrip("/"),) if rooted else (root / target, markdown.parent / target)
        for candidate in candidates:
            if candidate.is_file() and candidate.resolve().is_relative_to(root.resolve()):
                found.append(candidate.resolve().relative_to(root.resolve()).as_posix())
                break
    return found


def _kit_imports(source: str) -> list[tuple[str, bool]]:
    """The ``grader``/``tests`` modules a source imports, each with whether it is imported at top level."""
    tree = ast.parse(source)
    top_level = set(map(id, tree.body))
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            if name.split(".")[0] in ("grader", "tests"):
                found.append((name, id(node) in top_level))
    return found


def _module_file(name: str, root: Path | None) -> str | None:
    """The kit file that defines module ``name`` (None for a name that is not a module)."""
    parts = name.split(".")
    source = source_tree(root)
    for candidate in ("/".join(parts) + ".py", "/".join(parts) + "/__init__.py"):
        if source(candidate).is_file():
            return candidate
    return None


def check_imports(plan: Plan, root: Path | None = None) -> None:
    """Refuse a release whose shipped code imports a kit module that does not ship.

    A module imported inside a function (e.g. an instructor-only path of a
    shared helper) only gives a note when it is instructor-only; at top level
    it stops the build, as does any import of a module on neither list.
    """
    shipped = plan.paths()
    problems = []
    for path in sorted(shipped):
        if not path.endswith(".py") or path not in plan.copies:
            continue
        for name, top_level in _kit_imports(plan.copies[path].read_text(encoding="utf-8")):
            module = _module_file(name, root)
            if module is None or module in shipped:
                continue
            if instructor_only(module) and not top_level:
                plan.notes.append(f"{path} imports {name} inside a function; it is instructor-only and not shipped")
            elif instructor_only(module):
                problems.append(f"{path} imports {name} ({module}), which is instructor-only")
            else:
                problems.append(f"{path} imports {name} ({module}), which is not on the release allow-list "
                                "(add it to STUDENT_FILES or OPTIONAL_FILES in grader/authoring/release_allowlist.py)")
    if problems:
        raise ReleaseError("; ".join(problems))


def reference_lines(sources: dict[str, str], stubs: list[str]) -> dict[str, str]:
    """The lines of the reference modules ``sources`` (file name -> text) that may not ship, with where they are.

    A stripped line of :data:`REFERENCE_LINE_LENGTH` characters or more that none of ``stubs`` (the
    texts of the stub modules students get) holds: a line of what a student must write.
    """
    given = "\n".join(stubs)
    found: dict[str, str] = {}
    for name, source in sorted(sources.items()):
        for number, line in enumerate(source.splitlines(), 1):
            text = line.strip()
            if len(text) >= REFERENCE_LINE_LENGTH and text not in given:
                found.setdefault(text, f"{name}:{number}")
    return found


def check_reference_lines(plan: Plan, sources: dict[str, str], stubs: list[str]) -> None:
    """Refuse a release a text file of which holds a line of the reference (:func:`reference_lines`).

    ``sources`` are the kit's reference modules (file name -> text) and ``stubs``
    the texts of every stub module of the kit (a course's release ships some of
    them; what any stub says gives nothing away). A test's own implementation, a
    message or a document that repeats a line of the reference gives the answer
    away; the error names the file, the line and the line of the reference.
    """
    texts = dict(plan.texts)
    for path, source in plan.copies.items():
        try:
            texts[path] = source.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary data (npz, png): grader/tests/test_release.py reads their strings
    lines = reference_lines(sources, stubs)
    problems = []
    for path, text in sorted(texts.items()):
        for line in (line for line in lines if line in text):
            number = next(n for n, row in enumerate(text.splitlines(), 1) if line in row)
            problems.append(f"{path}:{number} holds line {lines[line]} of the reference ({line!r})")
    if problems:
        raise ReleaseError(f"{len(problems)} line(s) of the reference in the release: " + "; ".join(problems[:10]))
