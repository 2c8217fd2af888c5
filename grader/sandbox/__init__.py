"""The sandbox: the only code that starts, confines and talks to student code.

``limits`` decides how a worker is confined (bubblewrap namespaces, an
unprivileged user, resource limits) and says so; ``worker`` is the script that
runs inside the sandbox and imports the student's modules; ``proxy`` is its
grading-side half, which serves the student's functions to the graded suite
over a plain-data channel (a JSON header and raw numeric bytes, never pickles);
``plugin`` lets pytest use it (``-p grader.sandbox.plugin --isolated``).

Called by: the grader (``grader.grading``) and the project's isolation tests.
What it may not do: nothing else in the kit starts or talks to student code,
and nothing crosses the channel but the operations the worker's protocol lists.
"""
