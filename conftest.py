"""Load the graded suite's plugin (``--impl DIR``, the ``impl`` fixture).

It lives at the top so that ``--impl`` works from the project root whether or not
``tests`` is named. Write ``pytest tests --impl DIR`` or ``pytest --impl=DIR``: in
``pytest -m NAME --impl DIR`` pytest takes DIR for a test path before it knows the
option, looks for its configuration beside DIR, never loads this file and says
``unrecognized arguments: --impl`` (docs/grading.md).
"""

pytest_plugins = ("tests.plugin",)
