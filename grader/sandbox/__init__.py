"""The sandbox: the only code that starts, confines and talks to student code.

``limits`` decides how a worker is confined (bubblewrap namespaces, an
unprivileged user, resource limits) and says so. Each module is run by one
process:

- in the sandbox: ``worker`` (the student's worker, a script that imports the
  student's modules) and ``forkserver`` (the fork server, root with two
  capabilities, never student code);
- on both sides: ``frames`` (the wire format: a JSON header and raw numeric
  bytes, never pickles), ``codec`` (values as plain data), ``protocol``
  (what may cross) and ``calls`` (which of the student's API functions a call
  ran, for the blame and the gates; also imported by ``tests/reach.py``), the
  only modules the sandbox holds besides the worker;
- in the grading process: ``proxy`` (``IsolatedImplementation``, the facade
  that serves the student's functions to the graded suite) and what it
  composes: ``process`` (the worker's process), ``channel`` (frames over its
  pipes; ``channel_use``: what a test may send over them, a multiple of the
  reference's own use), ``budget`` (the submission's CPU time, per exercise), ``callbacks``
  (fair grading's reference, answered by a worker of the reference's own),
  ``spares`` (a worker started before its student comes), ``server`` (the
  fork server's client), ``load`` (a worker's CPU time and waits, read from
  outside it), ``cgroup`` (a worker's control group: its memory bounded,
  its CPU time counted by the kernel), ``measuring`` (a call's peak memory
  and CPU time, read from the kernel), ``errors`` (what the grading side
  tells apart: the student's crash, the grader's own failure);
  ``plugin`` lets pytest use it (``-p grader.sandbox.plugin --isolated``).

Called by: the grader (``grader.grading``) and the project's isolation tests.
What it may not do: nothing else in the kit starts or talks to student code,
and nothing crosses the channel but the operations the worker's protocol lists.
"""
