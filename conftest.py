"""Load the graded suite's plugin (``--impl DIR``, the ``impl`` fixture).

It lives at the top so that ``pytest --impl DIR`` works from the project root
with or without naming ``tests``.
"""

pytest_plugins = ("tests.plugin",)
