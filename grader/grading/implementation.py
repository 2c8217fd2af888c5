"""The implementation seam: the one place the grading side reaches into ``grader.sandbox.proxy``.

Run by: each grading process (``grader.grading.pool``'s worker main, the
session and its recorder). The implementation the graded suite calls is an
isolated worker process (``IsolatedImplementation``); the grading process
only checks its results, and the student's modules never load in it.
Everything this side asks of the sandbox goes through the functions here.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from grader import course
from grader.curriculum import ROOT, reference_dir
from grader.grading.records import CALL_BUDGET, MEMORY_MIB, STUDENT_BUDGET, Job


def make_implementation(path: Path, fair: bool, policy: str = "require", budget: float = STUDENT_BUDGET,
                        call_budget: float = CALL_BUDGET, memory: int = MEMORY_MIB) -> Any:
    """The implementation that runs a student's code: an isolated worker process (``grader.sandbox.proxy``)."""
    from grader.sandbox.proxy import IsolatedImplementation

    return IsolatedImplementation.warm(path, **_implementation_options(fair, policy, budget, call_budget, memory))


def _implementation_options(fair: bool, policy: str, budget: float, call_budget: float = CALL_BUDGET,
                            memory: int = MEMORY_MIB) -> dict[str, Any]:
    from grader.sandbox.limits import course_limits

    limits = course_limits(budget, call_budget, memory, course.limits().cpu_seconds)
    return {"fair": fair, "reference": reference_dir() or ROOT / "solutions", "policy": policy, "limits": limits}


def implementation_for(job: Job, path: Path | None = None) -> Any:
    """The implementation of ``job``'s student (or of the folder ``path``), with the job's options."""
    return make_implementation(Path(job.folder) if path is None else path, job.fair, job.policy, job.budget,
                               job.call_budget, job.memory)


def keep_spare(job: Job) -> None:
    """Start the next student's worker now (a grading process mostly grades students with the same options)."""
    if os.environ.get("ATTENTION_KIT_NO_SPARE"):
        return
    from grader.sandbox.proxy import IsolatedImplementation

    with contextlib.suppress(Exception):  # without a spare the next student's worker starts as usual
        IsolatedImplementation.keep_spare(**_implementation_options(job.fair, job.policy, job.budget,
                                                                    job.call_budget, job.memory))


def close_spares() -> None:
    """End this process's spare workers (first thing when it stops: their scratch folder must not outlive it)."""
    from grader.sandbox.proxy import IsolatedImplementation

    IsolatedImplementation.close_spares()


def use_scratch(folder: str) -> None:
    """Make the workers of this process keep their scratch folders in ``folder`` (the batch removes it)."""
    from grader.sandbox.proxy import SCRATCH_ENV

    os.environ[SCRATCH_ENV] = folder

