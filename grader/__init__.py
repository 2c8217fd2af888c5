"""The tools of the self-attention exercise kit, in rooms by who uses them.

Each room imports only the rooms above it in this list (never a room below it):

- the base: ``curriculum`` (the manifest ``curriculum.toml``, where the kit's
  data tree is, the course's part), ``course`` (an instructor's course folder,
  ``course.toml``, the overlay ``curriculum`` applies), ``suite`` (which test files are graded),
  ``scoring`` (the one rule that turns passing tests into points), ``quiet``
  (pytest in-process, quietly), ``cli`` (the ``attention-kit`` command, which
  only dispatches);
- ``mutants``: the catalogue of known mistakes (``mutants/*.toml``, in a checkout and a course
  folder only: it quotes the reference, so no package holds it), its docs and report;
- ``sandbox``: the only code that starts, confines and talks to student code;
- ``student``: what students run (status, hint, watch, demo, the notebooks' check cells);
- ``grading``: grading a class (submissions in, gradebook and reports out, Gradescope);
- ``authoring``: what maintainers and instructors build (stubs, golden values,
  fingerprints, README, the student release, the nbgrader course).

Rooms are imported lazily by the command line, so ``attention-kit hint`` does
not pay for what ``attention-kit grade`` needs, and the test suite's import of
``grader.curriculum`` stays cheap.
"""
