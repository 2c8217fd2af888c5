"""A per-exercise nbgrader course says which assignment to release after which (``grader.authoring.notebook_order``).

03-attention's given cell defines a working softmax: released beside 01-softmax, it handed out that answer.
"""

from __future__ import annotations

from grader.authoring.notebook_order import release_order
from grader.curriculum import PART_ENV, load


def test_an_assignment_whose_given_cell_holds_an_assigned_answer_is_released_after_it(monkeypatch):
    monkeypatch.delenv(PART_ENV, raising=False)
    curriculum = load()
    lines = release_order()
    assert "release 03-attention only after the deadline of 01-softmax: its given cell holds their working code" \
        in lines
    named = {line.split()[1] for line in lines}
    for exercise in curriculum.selection():
        assigned = [d for d in curriculum.dependencies(exercise.name)
                    if d in {e.name for e in curriculum.selection()}]
        assert (f"{exercise.number:02d}-{exercise.name}" in named) == bool(assigned), exercise.name


def test_a_course_of_part_3_alone_waits_only_for_its_own_assignments(monkeypatch):
    monkeypatch.setenv(PART_ENV, "3")
    lines = release_order()
    part3 = {f"{e.number:02d}-{e.name}" for e in load().selection()}
    assert all(name in part3 for line in lines for name in line.split(": ")[0].replace(",", "").split()
               if name[:2].isdigit())
