"""Grading a class: submissions in, gradebook and reports out (``grade``, ``gradescope``).

``submissions`` finds and unpacks each entry (folders, zips, notebooks, read by
``notebook_reader``; links are never followed: ``links``) and checks it
without running it (``static_checks``); ``grade`` is the command and the batch, which runs the
graded and hidden suites on each one through the sandbox (``grader.sandbox``).
The batch's parts, one module per job and process: ``records`` (the typed
records between them: a job, a test record, a result), ``fingerprint`` (what
decides a regrade), ``kit_check`` (the reference graded beside the students),
``reference_use`` (what the reference sends in each test: the channel's limits of the students' tests),
``pool`` (the long-lived grading processes), and, inside a grading process,
``session`` (the reused pytest session), ``recorder`` (its recording plugin
and failure rendering), ``secrets`` (no hidden line reaches a student),
``speedups`` (speed-ups of private pytest code that change no grade) and
``implementation`` (the one seam to ``grader.sandbox.proxy``). ``report``
scores and writes ``grades.csv``, ``results.json`` and ``feedback.md``;
``gradescope`` builds the Gradescope bundle and is its runner; ``export``
writes the LMS gradebooks (a roster, Canvas's import CSV, the long CSV);
``samples`` makes the bundled sample class;
past one machine, ``cluster`` grades the batch on a Dask cluster (``cluster_worker`` is what runs on each worker,
``portable`` the jobs and results as they cross between machines) and ``shard`` grades a slice and merges slices;
``similarity`` compares the students' modules with each other and with the reference (copydetect, as text);
``nbgrader_cells`` and ``nbgrader_autograde`` are the steps nbgrader's autograde uses in the courses
``attention-kit notebooks`` builds (the second grades the answer cells in the sandbox instead of a kernel).

Called by: instructors (``attention-kit grade``, ``attention-kit gradescope``)
and the Gradescope bundle. What it may not do: import or run student code in
its own process; only ``grader.sandbox`` starts and talks to student code.
"""
