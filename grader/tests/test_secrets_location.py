"""A student's own traceback line that happens to equal a reference line keeps its place, not its text.

Found on the final code: a submission whose softmax.py line 78 read `exponentials = np.exp(x - largest)` (a
line of the reference too) got the feedback "student traceback (most recent call last): [a line of the grader's
hidden code]" and then "revisit: ... what does the line above assume": no file, no line number to look at.
"""

from __future__ import annotations

from grader.grading.secrets import Secrets


def test_a_traceback_line_showing_a_secret_keeps_its_file_and_line_number() -> None:
    secrets = Secrets.of(())
    code = "exponentials = np.exp(x - largest)"
    assert code in secrets.lines  # a line of the reference that the public files do not hold: else this checks nothing
    text = (f"observed: ValueError: operands could not be broadcast together\n"
            f"            student traceback (most recent call last):\n"
            f"              softmax.py line 78, in softmax: {code}\n"
            f"  note: {code}")
    scrubbed = secrets.scrub(text).splitlines()
    assert scrubbed[:2] == text.splitlines()[:2]
    assert scrubbed[2].startswith("              softmax.py line 78, in softmax") and code not in scrubbed[2], scrubbed
    assert code not in scrubbed[3] and "softmax.py" not in scrubbed[3], scrubbed  # any other line: all of it
