"""The names of a per-exercise nbgrader course's assignments, and the order to release them in (instructors).

Used by ``grader.authoring.notebooks`` (``attention-kit notebooks``). Imports only the kit's base modules.
"""

from __future__ import annotations

from grader.curriculum import Exercise
from grader.curriculum import load as load_curriculum


def assignment_name(exercise: Exercise) -> str:
    """``01-softmax``: the exercise's number and name."""
    return f"{exercise.number:02d}-{exercise.name}"


def release_order() -> list[str]:
    """A line per per-exercise assignment whose given cell holds working code of another assignment of the course.

    That code is the other assignment's answer (03-attention's given cell defines softmax): released before
    that assignment's deadline, a student could copy it there. The course's own selection decides.
    """
    curriculum = load_curriculum()
    selected = {exercise.name for exercise in curriculum.selection()}
    lines = []
    for exercise in curriculum.selection():
        assigned = [curriculum.exercise(name) for name in curriculum.dependencies(exercise.name) if name in selected]
        if assigned:
            lines.append(f"release {assignment_name(exercise)} only after the deadline of "
                         + ", ".join(assignment_name(e) for e in assigned)
                         + ": its given cell holds their working code")
    return lines
