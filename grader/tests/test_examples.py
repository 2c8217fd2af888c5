"""The terminal examples of README.md and docs/ are what the kit prints today (grader.authoring.examples)."""

from __future__ import annotations

import re

import pytest

from grader.authoring import examples
from grader.curriculum import ROOT

# One xdist worker runs this file: every documented command rerun once (a module fixture) is then built once,
# not once per worker.
pytestmark = pytest.mark.xdist_group("test_examples")


@pytest.fixture(scope="module")
def bodies() -> dict[str, str]:
    return examples.produce()  # real runs, in a freshly built student release


def test_every_example_block_is_current(bodies):
    stale = examples.stale(bodies)
    assert not stale, f"stale terminal examples in {stale}: run `python -m grader.authoring.examples`"


def test_every_example_is_shown_and_every_block_is_an_example():
    shown = set()
    for document in examples.DOCUMENTS:
        shown |= {match["name"] for match in examples.BLOCK.finditer((ROOT / document).read_text(encoding="utf-8"))}
    assert shown == {example.name for example in examples.EXAMPLES}


def test_the_examples_show_what_the_issue_asked_for(bodies):
    status = bodies["status"]
    assert "Diagnosis: your projections.py" in status  # the diagnosis of the planted known mistake, as it shows
    assert status.index("Diagnosis:") < status.index("FAILURE:")
    assert re.search(r"Progress: \S+ \d+/\d+ tests, [\d.]+/\d+ points", status)
    assert "FAILURE: each row" in bodies["failure"] and " in 0." not in bodies["failure"]  # no timings
    assert "Hint 1 of 3, a question" in bodies["hint"]
    assert bodies["typo"].count("\n") == 4  # the fences, the command and one line


def test_a_stale_block_is_noticed():
    text = "<!-- example:hint -->\n```console\n$ attention-kit hint softmax\nHint 1 of 4:\n```\n<!-- end example -->"
    assert examples.render(text, {"hint": "new\n"}) != text
    with pytest.raises(examples.ExampleError, match="no example named"):
        examples.render("<!-- example:nope -->\n<!-- end example -->", {"hint": ""})


def test_the_demos_number_in_the_prose_is_the_demos():
    from grader.student import demo

    text = (ROOT / "docs" / "student-loop.md").read_text(encoding="utf-8")
    match = re.search(r'"it" puts (0\.\d+) of its\s+weight on "the"', text)
    assert match, "the sentence about the weight of 'it' on 'the' moved: update this test"
    weights = demo.compute(ROOT / "solutions").weights
    it, the = demo.TOKENS.index("it"), demo.TOKENS.index("the")
    assert f"{weights[it, the]:.2f}" == match.group(1)


def test_benchmark_figures_come_from_the_recorded_results(tmp_path, monkeypatch):
    import json

    from grader.authoring import readme

    assert readme.main(["--check"]) == 0, "run `python -m grader.authoring.readme`"
    monkeypatch.setattr(readme, "BENCHMARKS", tmp_path)
    (tmp_path / "suite_time.py").write_text('"""Time the suite."""\n', encoding="utf-8")
    assert "not recorded yet (`python benchmarks/suite_time.py --record`)" in readme.benchmark_table()
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "suite_time.json").write_text(json.dumps({
        "summary": "1.23 s median", "date": "2030-01-02",
        "machine": {"cores": 3, "cpu": "Test CPU", "python": "3.99", "numpy": "9.9", "load_average": 0.5}}))
    row = readme.benchmark_table().splitlines()[-1]
    figures = "1.23 s median (measured 2030-01-02 on 3 cores, Test CPU, Python 3.99, numpy 9.9, load 0.5)"
    assert row == f"| `python benchmarks/suite_time.py` | Time the suite. | {figures} |"
    text = "figures: <!-- benchmark:suite_time -->typed by hand<!-- end benchmark -->."
    assert readme.render_figures(text) == f"figures: <!-- benchmark:suite_time -->{figures}<!-- end benchmark -->."


def test_one_figure_comes_from_the_recorded_results(tmp_path, monkeypatch):
    import json

    from grader.authoring import readme

    monkeypatch.setattr(readme, "BENCHMARKS", tmp_path)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "status_time.json").write_text(json.dumps({
        "summary": "s", "date": "2030-01-02", "machine": {}, "figures": {"cached_s": 0.35, "runs": 3}}))
    text = "back at once (<!-- figure:status_time.cached_s -->about a second<!-- end figure --> s)"
    assert readme.render_figures(text) == "back at once (<!-- figure:status_time.cached_s -->0.35<!-- end figure --> s)"
    assert "-->3<!--" in readme.render_figures("<!-- figure:status_time.runs -->x<!-- end figure -->")
    with pytest.raises(KeyError, match="no figure 'wall_s'"):
        readme.render_figures("<!-- figure:status_time.wall_s --><!-- end figure -->")
    with pytest.raises(KeyError, match="suite_time.json does not exist"):
        readme.render_figures("<!-- figure:suite_time.median_s --><!-- end figure -->")


def test_the_explain_demos_numbers_in_the_prose_are_its_example_s():
    """The paragraph after `demo --explain`'s example quotes its numbers: they are the (generated) example's."""
    text = (ROOT / "docs" / "student-loop.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- example:demo-explain -->\n(.*?)<!-- end example -->", text, re.S)
    assert block, "docs/student-loop.md lost the demo-explain example"
    trained, built = block[1].split("a head built by hand", 1)

    def row(part: str, token: str) -> list[float]:
        found = re.search(rf"^\s+{token}\s+(\S+)\s+(\S+)\s+(\S+)$", part, re.M)
        assert found, f"no row for {token!r} in the example"
        return [float(value) for value in found.groups()]

    prose = " ".join(text[block.end():].split())
    said = re.search(r'credits "it" itself \((\S+)\).*?"it" gives (\S+) of its weight to "the".*?and (\S+) to "vessel"',
                     prose)
    assert said, "the paragraph after the demo-explain example moved: update this test"
    assert float(said[1]) == pytest.approx(row(trained, "it")[2], rel=0.02)
    # The prose rounds the example's 3 decimals to 2.
    assert float(said[2]) == pytest.approx(row(built, "the")[0], abs=0.0051)
    assert float(said[3]) == pytest.approx(row(built, "vessel")[0], abs=0.0051)


@pytest.mark.parametrize("timing", ["in 0.81s", "in 12.34s", "in 75.32s (0:01:15)", "in 3601.00s (1:00:01)"])
def test_a_summary_line_reads_the_same_whatever_the_run_took(timing):
    # pytest centres its summary, timing included: a busy machine's longer time made a shorter line of "=".
    from _pytest._io.terminalwriter import TerminalWriter

    def pytest_line(title: str) -> str:
        import io

        out = io.StringIO()
        writer = TerminalWriter(out)
        writer.fullwidth = examples.WIDTH
        writer.sep("=", title)
        return out.getvalue()

    assert examples._untimed(pytest_line(f"12 failed, 3 passed {timing}")) == pytest_line("12 failed, 3 passed")
    assert examples._untimed("=== FAILURES ===\n") == "=== FAILURES ===\n"  # no timing: left as it is
