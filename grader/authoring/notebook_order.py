"""The names of a per-exercise nbgrader course's assignments, and the order to release them in (instructors).

Used by ``grader.authoring.notebooks`` (``attention-kit notebooks``). The names come from
``grader.grading.notebook_reader``, which reads submissions of the course by them.
"""

from __future__ import annotations

from grader.curriculum import load as load_curriculum
from grader.grading.notebook_reader import assignment_name  # the course's names: one place, beside their reader


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
