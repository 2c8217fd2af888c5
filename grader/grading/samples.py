"""Sample submissions, so an instructor's first ``attention-kit grade`` needs no data.

``make_samples(folder)`` writes a small class of made-up students, all built
from ``solutions/``:

- ``correct``: the reference, full marks;
- ``mistake-<mutant id>``: the reference with one known mistake from the
  catalogue (a checkout's ``grader/mutants/*.toml``, a course folder's ``mutants/``; up to
  four, from different exercises; none where there is no catalogue);
- ``syntax-error``: a module that does not parse (shows the static check);
- ``missing-module``: a module left out, submitted as a zip of a nested
  folder (shows zip extraction and nesting).
"""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

from grader.curriculum import ROOT, load, reference_dir
from grader.mutants import CatalogueError, Mutant, apply, load_catalogue

REFERENCE = reference_dir() or ROOT / "solutions"  # the instructor's own copy: the course folder's or the checkout's


def mutants_in_turn() -> list[Mutant]:
    """The catalogue of the graded exercises, reordered so consecutive mutants come from different exercises.

    None without a catalogue. Only the exercises the course grades: a mistake in one it gives (served from the
    reference) or leaves out would score full marks and show nothing.
    """
    try:
        catalogue = load_catalogue()
    except CatalogueError:  # a course folder made before the catalogue was copied: samples without mistakes
        catalogue = []
    graded = set(load().selected_names())
    by_exercise: dict[str, list[Mutant]] = {}
    for mutant in catalogue:
        if mutant.exercise in graded:
            by_exercise.setdefault(mutant.exercise, []).append(mutant)
    longest = max((len(m) for m in by_exercise.values()), default=0)
    return [mutants[i] for i in range(longest) for mutants in by_exercise.values() if i < len(mutants)]


def plant_mutants(folder: Path, count: int, prefix: str = "mistake-") -> list[Path]:
    """Write up to ``count`` mutant submissions into ``folder``, from as many exercises as possible.

    A catalogue entry that no longer matches the reference (``apply`` raises
    ValueError) is skipped: a stale mutant must not stop a demonstration.
    """
    made: list[Path] = []
    for mutant in mutants_in_turn():
        if len(made) == count:
            break
        target = folder / f"{prefix}{mutant.id}"
        try:
            made.append(apply(mutant, target, reference=REFERENCE))
        except ValueError:
            shutil.rmtree(target, ignore_errors=True)
    return made


def _copy_reference(target: Path) -> Path:
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(REFERENCE, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def break_syntax(folder: Path, module: str = "multihead.py") -> int:
    """Put a typo (an unclosed bracket) just before the first function of ``module``; returns its line."""
    path = folder / module
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    line = next(i for i, text in enumerate(lines) if text.startswith("def "))
    lines.insert(line, "def split_heads(x, n_heads:\n")
    path.write_text("".join(lines), encoding="utf-8")
    return line + 1


def zip_folder(folder: Path, archive: Path, prefix: str = "") -> Path:
    """Zip the ``.py`` files of ``folder``, under ``prefix/`` inside the archive."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
        for path in sorted(folder.glob("*.py")):
            bundle.write(path, f"{prefix}/{path.name}" if prefix else path.name)
    return archive


def make_samples(folder: Path, mutants: int = 4) -> list[Path]:
    """Write the sample submissions into ``folder``; returns their paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    made = [_copy_reference(folder / "correct")]
    made += plant_mutants(folder, mutants)
    # The syntax error and the missing module are in exercises the course grades (any mix, any number of them).
    graded = load().selection()
    names = [exercise.name for exercise in graded]
    broken = _copy_reference(folder / "syntax-error")
    break_syntax(broken, "multihead.py" if "multihead" in names else graded[0].module_file)
    made.append(broken)
    # A zip whose modules sit one folder down, as many students hand in their work.
    staging = _copy_reference(folder / ".missing-module")
    every = load().exercises
    left_out = (every[-3] if len(every) >= 3 and every[-3].name in names else graded[-1]).module_file
    (staging / left_out).unlink()
    made.append(zip_folder(staging, folder / "missing-module.zip", prefix="exercises"))
    shutil.rmtree(staging)
    return made
