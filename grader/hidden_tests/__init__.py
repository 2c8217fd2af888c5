"""Hidden tests: graded tests that only instructors hold (never released to students).

They check what the public suite leaves out: larger and odd sizes (one token,
one key, ``d_head = 1``, long sequences), float32 everywhere, extreme values,
four-dimensional batch axes, non-contiguous and transposed views, masks that
broadcast over several batch axes, fractional rotary positions, many ALiBi
heads. They use the public ``impl`` fixture and feedback helpers, so a
student sees a failing hidden test by its name and message only.

Each file declares, at module level::

    EXERCISE = "softmax"   # the manifest exercise its tests grade

and the manifest's ``hidden_points`` for that exercise are split equally
between the file's tests (a file may override them with ``POINTS = n``).

``tests/plugin.py`` reads ``EXERCISE`` to mark the tests and give them the
right ``impl``. Run them with ``pytest grader/hidden_tests --impl solutions``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

HIDDEN_DIR = Path(__file__).parent


@dataclass(frozen=True)
class HiddenFile:
    """One hidden test file and what it is worth."""

    path: Path
    exercise: str
    points: float
    tests: tuple[str, ...]

    @property
    def points_per_test(self) -> float:
        """The file's points divided by its tests (nominal: grading splits them in sixteenths, grader/scoring.py)."""
        return self.points / len(self.tests) if self.tests else 0.0


def _constant(tree: ast.Module, name: str) -> object:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise ValueError(f"no module-level {name} = ...")


def catalogue(directory: Path = HIDDEN_DIR) -> list[HiddenFile]:
    """Every hidden test file with its exercise, points and test names.

    Read from the source text, so that listing the hidden tests (for the
    grader's points) needs neither numpy nor pytest.
    """
    files = []
    for path in sorted(Path(directory).glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        try:
            exercise = _constant(tree, "EXERCISE")
        except ValueError as error:
            raise ValueError(f"{path.name}: {error}") from None
        try:
            points = _constant(tree, "POINTS")
        except ValueError:
            from grader.curriculum import load

            points = load().exercise(str(exercise)).hidden_points
        tests = tuple(
            node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test")
        )
        files.append(HiddenFile(path, str(exercise), float(points), tests))
    return files
