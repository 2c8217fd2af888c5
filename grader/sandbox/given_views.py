"""Which of the kit's given implementations a student's worker holds, and which request carries them.

Run by the grading process (``grader.sandbox.proxy``). Under fair grading a view (the exercise under test) runs
the kit's given code of the exercises it builds on that the graded selection does not assign
(``grader.sandbox.given.servable``: an assigned one is answered by the reference's worker), in the student's own
worker. That code is a working
implementation of those exercises: a worker that holds the given ``softmax`` (as a dependency of ``attention``)
must never grade ``softmax`` itself. Before, every given module sat readable in the sandbox
(``/.attention-kit-sandbox/given/``) and stayed in the worker's memory across views: a stub ``softmax`` that
read the file, or took the module another view had loaded from ``sys.modules``, scored full marks.

Now the given sources travel only with the first request of a view (its ``given`` field: the view's
dependencies that have given code), and a request for a view whose given code the worker already holds goes to
a fresh worker. Public tests run in curriculum order (each view builds only on earlier ones), so this costs a
worker start where the hidden tests go back to an earlier exercise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from grader.sandbox import given


class GivenViews:
    """The given code sent to the current worker, per view.

    Parameters
    ----------
    usable : iterable of str
        The exercises whose given code may run in the student's worker (``grader.sandbox.given.servable``).
    dependencies : mapping
        Exercise -> the exercises it builds on (the transitive closure, as the worker's init message has it).
    """

    def __init__(self, usable: Iterable[str], dependencies: Mapping[str, Iterable[str]]) -> None:
        self.usable = frozenset(usable)
        self.dependencies = {name: list(owners) for name, owners in dependencies.items()}
        self.held: set[str] = set()  # exercises whose given code the current worker has received
        self.sent: set[str] = set()  # views whose given code the current worker has received
        self._sources: dict[str, str] = {}

    def reset(self) -> None:
        """A new worker: it holds nothing."""
        self.held.clear()
        self.sent.clear()

    def must_restart(self, view: str) -> bool:
        """Whether the current worker holds given code of ``view`` itself (then it must not grade it)."""
        return view in self.held

    def attach(self, header: dict) -> None:
        """Give the request of a view new to this worker the sources of its given dependencies (``given``)."""
        view = header.get("view")
        if not isinstance(view, str) or view in self.sent:
            return
        owners = [name for name in self.dependencies.get(view, []) if name in self.usable and name != view]
        header["given"] = {name: self.source(name) for name in owners}
        self.held.update(owners)
        self.sent.add(view)

    def source(self, exercise: str) -> str:
        """The given implementation of ``exercise`` (read once, from the folder in force: ``given.folder``)."""
        if exercise not in self._sources:
            where = given.folder()
            if where is None:  # usable() found one: only a folder removed while grading gets here
                raise FileNotFoundError(f"no given implementation of {exercise}: its folder is gone")
            self._sources[exercise] = (where / f"{exercise}.py").read_text(encoding="utf-8")
        return self._sources[exercise]
