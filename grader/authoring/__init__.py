"""Authoring and maintenance: what instructors and maintainers build from the reference.

``sync`` writes the stubs in ``exercises/`` from ``solutions/``; ``golden`` and
``fingerprints`` the expected values and the known mistakes' outputs in
``tests/data/``; ``readme`` the generated parts of README.md and docs/ (the exercise
table, benchmark figures); ``examples`` their terminal examples, from real runs of
the kit's commands on planted mistakes; ``release`` the
student repository (what may ship in ``release_allowlist``, the files written
for it in ``release_contents``); ``notebooks`` the nbgrader course;
``new_exercise`` a new exercise's files, from ``templates/`` (CONTRIBUTING.md).

Called by: maintainers (``python -m grader.authoring.sync`` ...) and instructors
(``attention-kit release``, ``attention-kit notebooks``). It runs only the
kit's own code (the reference and its catalogue), never a student's.
"""
