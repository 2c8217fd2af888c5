"""How long a test waits for a command it started before calling it hung.

The commands the tests run end by themselves: the grader's budgets count CPU
time, never wall time. So a wait in a test is a backstop against a hang only,
never a speed check (speed targets are in ``benchmarks/``). It is long enough
for a machine busy with other work that runs the tests at a low priority
(``nice 10`` beside one busy process per core gives them about a tenth of a
CPU): a command that costs 30 CPU-s takes five minutes there.
"""

from __future__ import annotations

HANG_SECONDS = 3600.0
# How long a test polls for a state the machine reaches by itself (a killed process reaped, a child started): the
# poll ends as soon as the state holds, so only a failure waits this long.
SETTLE_SECONDS = 600.0
