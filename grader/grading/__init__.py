"""Grading a class: submissions in, gradebook and reports out (``grade``, ``gradescope``).

``submissions`` finds and unpacks each entry (folders, zips, notebooks, read by
``notebook_reader``), ``grade`` runs the graded and hidden suites on each one
through the sandbox (``grader.sandbox``), ``report`` scores and writes
``grades.csv``, ``results.json`` and ``feedback.md``; ``gradescope`` builds the
Gradescope bundle and is its runner; ``export`` writes the LMS gradebooks (a
roster, Canvas's import CSV, the long CSV); ``samples`` makes the bundled sample class;
``similarity`` compares the students' modules with each other and with the reference (copydetect, as text).
``nbgrader_cells`` is the step nbgrader's autograde uses in the courses ``attention-kit notebooks`` builds.

Called by: instructors (``attention-kit grade``, ``attention-kit gradescope``)
and the Gradescope bundle. What it may not do: import or run student code in
its own process; only ``grader.sandbox`` starts and talks to student code.
"""
