"""What students run: ``status``, ``hint``, ``watch``, ``demo``, ``test``, ``check`` cells, Classroom steps.

``check`` is the notebooks' test cell (``notebook``); ``classroom`` scores one
exercise for GitHub Classroom's workflow.

Called by: the ``attention-kit`` command in a student's copy of the kit, and
the test cells of the notebooks the course builder writes. These commands run
the graded suite in the student's own process, on the student's own code, as
the student: they give feedback and grade nothing. They ship in the student
release; nothing here may import the grading, sandbox or authoring rooms.
"""
