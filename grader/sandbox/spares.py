"""Warm workers: a worker started before its student comes, adopted by the next one (the grading process).

Run by: the grading process, as part of ``grader.sandbox.proxy.IsolatedImplementation``
(this mixin's methods start and adopt the facade's workers). Where workers are
forked by a fork server, a fork takes milliseconds and no spare is kept.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path
from typing import Any

from grader.sandbox import limits as confine
from grader.sandbox.process import scratch_parent, shared_fork_server
from tests.kit import ImplementationError

# The spare worker of this process (see Spares.warm): (its options, the implementation).
_SPARES: list[tuple[str, Any]] = []


class Spares:
    """The warm-worker methods of the isolated implementation (one spare per process)."""

    _worker: Any
    _adopted: bool
    path: Path

    @classmethod
    def warm(cls, path: Path | str, **options: Any) -> Any:
        """An implementation of ``path`` whose worker is already up, if one was kept (see ``keep_spare``).

        A spare is a worker started for no one: it has imported numpy and
        answered its init message, and has never seen a student's module (it
        imports lazily). Adopting it copies ``path``'s modules into its own
        scratch folder (which its sandbox shows live), so the student's first
        call does not wait for a start-up. Otherwise a fresh one is started.
        """
        key = repr(sorted(options.items()))
        while _SPARES:
            spare_key, spare = _SPARES.pop()
            if spare_key == key and spare._worker.alive() and not spare._adopted:
                spare._adopt(Path(path))
                return spare
            spare.close()
        return cls(path, **options)

    @staticmethod
    def close_spares() -> None:
        """Stop the spare worker of this process, if any (and remove its scratch folder)."""
        while _SPARES:
            with contextlib.suppress(Exception):
                _SPARES.pop()[1].close()

    @classmethod
    def keep_spare(cls, **options: Any) -> None:
        """Start a worker now for the next ``warm`` call with the same ``options`` (one spare per process).

        Where workers are forked (``Plan.forks``), a fork takes milliseconds: only the fork server is started
        (if it is not running), and no spare is kept.
        """
        while _SPARES:
            _SPARES.pop()[1].close()
        the_plan = confine.choose(options.get("policy", "require"))
        if the_plan.forks:
            shared_fork_server(the_plan)
            return
        empty = Path(tempfile.mkdtemp(prefix="attention-kit-spare-", dir=scratch_parent()))
        try:
            spare = cls(empty, **options)
        finally:
            shutil.rmtree(empty, ignore_errors=True)
        _SPARES.append((repr(sorted(options.items())), spare))

    def _adopt(self, path: Path) -> None:
        self.path = path.resolve()
        if not self.path.is_dir():
            self.close()
            raise ImplementationError(f"--impl {path}: no such folder")
        self._adopted = True
        self._worker.adopt(self.path)
