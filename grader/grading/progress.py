"""The batch's progress display: rich's bar on a terminal, plain lines otherwise (the batch's process)."""

from __future__ import annotations

import contextlib
import sys
from typing import Any


def progress_display(total: int) -> Any:
    """A progress display: rich's bar on a terminal, plain lines otherwise."""
    if sys.stdout.isatty():
        with contextlib.suppress(ImportError):
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            progress = Progress(TextColumn("grading"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                                TextColumn("{task.description}"))
            task = progress.add_task("", total=total)

            class Bar:
                def __enter__(self) -> Bar:
                    progress.start()
                    return self

                def __exit__(self, *exc: object) -> None:
                    progress.stop()

                def advance(self, line: str) -> None:
                    progress.update(task, advance=1, description=line)

            return Bar()

    class Lines:
        done = 0

        def __enter__(self) -> Lines:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def advance(self, line: str) -> None:
            self.done += 1
            print(f"[{self.done}/{total}] {line}", flush=True)

    return Lines()
