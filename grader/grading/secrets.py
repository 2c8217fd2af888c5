"""Keeping the grader's secrets out of what students read: the lines of the reference, given code and hidden tests.

Run by: each grading process, on every failure text its recorder keeps
(``grader.grading.recorder``), before the text leaves the process.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

from grader.curriculum import ROOT, reference_dir

# A frame of a student traceback (grader/sandbox/codec.py ``exception_info``): where, then the line's text.
LOCATED = re.compile(r"(?P<where>\s*[\w.-]+\.py line \d+, in [\w<>.]+): ")


class Secrets:
    """The source lines of ``solutions/``, of the kit's given code and of the hidden tests: none reaches a student.

    ``scrub`` replaces any line of a failure text that shows one of them
    (a traceback's source line, an assertion's expression). Lines that are
    also in the public files (the visible tests, the stubs) are no secret.
    """

    _made: dict[tuple[str, ...], Secrets] = {}  # per hidden files, given folder and reference

    def __init__(self, hidden_files: tuple[str, ...]) -> None:
        def lines(paths: Any) -> set[str]:
            found: set[str] = set()
            for path in paths:
                with contextlib.suppress(OSError, UnicodeDecodeError):
                    found |= {line.strip() for line in Path(path).read_text(encoding="utf-8").splitlines()}
            return found

        import numpy

        from grader.sandbox import given

        # The kit's given implementations are working answers too: under fair grading they run in the student's
        # own worker (grader.sandbox.given_views), so student code can read them there and print or raise them.
        where = given.folder()
        secret = lines([*(reference_dir() or ROOT / "solutions").glob("*.py"), *hidden_files,
                        *(where.glob("*.py") if where is not None else ())])
        public = lines([*(ROOT / "tests").rglob("*.py"), *(ROOT / "exercises").glob("*.py")])
        # numpy's own source (a traceback through numpy shows its lines) is public: never scrubbed.
        numpy_dir = Path(numpy.__file__).parent
        public |= lines(p for p in numpy_dir.rglob("*.py") if "tests" not in p.relative_to(numpy_dir).parts)
        self.lines = {line for line in secret - public if len(line) >= 8}
        self._seen: dict[str, bool] = {}

    @classmethod
    def of(cls, hidden_files: tuple[str, ...]) -> Secrets:
        """The secrets of a suite with these hidden files (made once per process)."""
        from grader.sandbox import given

        key = (*hidden_files, str(given.folder()), str(reference_dir()))  # a course's own given code and reference
        if key not in cls._made:
            cls._made[key] = cls(hidden_files)
        return cls._made[key]

    def scrub(self, text: str) -> str:
        """``text`` with every line that shows a secret replaced by a placeholder.

        A traceback line of the student's code (``softmax.py line 78, in softmax: CODE``) keeps its place: a
        student may write a line the reference holds too, and must still learn where their code failed.
        """
        if not self.lines:
            return text
        return "\n".join(self._scrubbed(line) if self.shows_secret(line) else line for line in text.splitlines())

    def _scrubbed(self, line: str) -> str:
        """The placeholder for ``line``, which shows a secret: its file and line number kept if it has them."""
        located = LOCATED.match(line)
        if located and not self.shows_secret(located["where"]):
            return f"{located['where']} (the text of this line is not shown; see your file)"
        return "    [a line of the grader's hidden code]"

    def shows_secret(self, line: str) -> bool:
        """Whether ``line`` shows a secret line (is one, or holds a long one).

        Remembered per line: a grading process scrubs the same lines (the tests' own messages, a
        diagnosis) for student after student.
        """
        known = self._seen.get(line)
        if known is None:
            bare = line.strip().removeprefix(">").removeprefix("E").strip()
            known = bare in self.lines or line.strip() in self.lines or self._holds_long_line(line)
            if len(self._seen) >= 50_000:
                self._seen.clear()
            self._seen[line] = known
        return known

    LONG = 24  # a secret line this long is recognised inside another line

    def long_lines(self) -> list[str]:
        """The secret lines long enough to be recognised inside another line (a quoted line, a message)."""
        if not hasattr(self, "_long"):
            self._long = [line for line in self.lines if len(line) >= self.LONG and not line.startswith(("#", '"""'))]
        return self._long

    def _holds_long_line(self, line: str) -> bool:
        """``any(secret in line for secret in self.long_lines())``, looking up only the secrets that could be there.

        A long line inside ``line`` starts at some position with its first ``LONG`` characters: the
        secrets are indexed by those, and only the candidates found at a position are searched for.
        """
        if not hasattr(self, "_by_start"):
            self._by_start: dict[str, list[str]] = {}
            for secret in self.long_lines():
                self._by_start.setdefault(secret[:self.LONG], []).append(secret)
        starts, width = self._by_start, self.LONG
        for at in range(len(line) - width + 1):
            candidates = starts.get(line[at:at + width])
            if candidates is not None and any(secret in line for secret in candidates):
                return True
        return False
