"""The demos print the reading's figures with the reading's digits, so a student can compare them (issue 35, 4).

Where the reading quotes a figure of a demo's own run (the same seed, "as
``attention-kit demo --measure NAME`` prints it"), the demo run with the
reference prints that very string. Where the reading states a figure of the
kit's benchmarks that the demo measures once (recall against distance, the
measured margin), the demo prints as many decimals as the reading does.
"""

from __future__ import annotations

import re

import pytest

from grader.curriculum import ROOT
from grader.student import demo_distance, demo_negation, demo_retrieval, demo_tokenization

# One xdist worker runs this file: the demos run once (a module fixture) is then built once,
# not once per worker.
pytestmark = pytest.mark.xdist_group("test_demo_digits")

READING = (ROOT / "docs" / "reading.md").read_text(encoding="utf-8")
SOLUTIONS = ROOT / "solutions"


def section(anchor: str) -> str:
    """The text of the reading's section ``anchor`` (up to the next anchor)."""
    start = READING.index(f'<a id="{anchor}"></a>')
    end = READING.find('<a id="', start + 1)
    return READING[start:end if end > 0 else len(READING)]


def quoted(anchor: str, pattern: str) -> tuple[str, ...]:
    """The groups of ``pattern`` in the section (whitespace runs match any whitespace)."""
    match = re.search(pattern, section(anchor))
    assert match, f"the reading's section {anchor} no longer says {pattern!r}: update this test with it"
    return match.groups()


def decimals(number: str) -> int:
    return len(number.split(".")[1]) if "." in number else 0


@pytest.fixture(scope="module")
def printed() -> dict[str, str]:
    """What each measured demo prints with the reference (the figures the reading quotes)."""
    lines = {}
    for name, module in (("negation", demo_negation), ("retrieval", demo_retrieval),
                         ("tokenization", demo_tokenization), ("distance", demo_distance)):
        result = module.MEASUREMENT.compute(SOLUTIONS, "reference solution")
        lines[name] = "\n".join(module.MEASUREMENT.summary_lines(result))
    return lines


def test_negation_prints_the_readings_figures(printed: dict[str, str]) -> None:
    text = printed["negation"]
    for model in ("bag of words (mean + ReLU layer)", "attention, no positions", "attention with positions"):
        accuracy, both = quoted("meaning", re.escape(model) + r"\s+(\d\.\d+)\s+(\d\.\d+)")
        assert f"accuracy {accuracy}, both members right in {both} of the pairs" in text, (model, text)
    own, other = quoted("meaning", r"attention: (\d\.\d+) on its own slot, (\d\.\d+) on the other")
    assert f"{own} on its own slot, {other} on the other event's" in text, text
    (on_not,) = quoted("meaning", r"puts (\d\.\d+) of its weight on \"not\"")
    (on_indeed,) = quoted("meaning", r"(\d\.\d+) on \"indeed\"")
    assert f'{on_not} on "not" (own slot)' in text and f'{on_indeed} on "indeed" (own slot)' in text, text


def test_retrieval_prints_the_readings_table(printed: dict[str, str]) -> None:
    rows = re.findall(r"(?m)^\s+(\d+)\s+(\d\.\d{3})\s+(\d\.\d{3})\s+(\d\.\d{3})\s+(\d\.\d{3})\s+(\d\.\d{3})$",
                      section("retrieval"))
    assert len(rows) >= 5, "the reading's table of recall against k is gone: update this test"
    for k, *figures in rows:
        assert re.search(rf"(?m)^\s+{k}\s+" + r"\s+".join(map(re.escape, figures)) + "$", printed["retrieval"]), \
            (k, figures, printed["retrieval"])
    low, high = quoted("retrieval", r"where missed: (\d\.\d+) to (\d\.\d+)")
    assert f"sharpness   100: where retrieved 1.000 to 1.000, where missed {low} to {high}" in printed["retrieval"]


def test_tokenization_prints_the_readings_table_and_ratios(printed: dict[str, str]) -> None:
    text = printed["tokenization"]
    rows = re.findall(r"(?m)^(\d+)(?: \(bytes\))?\s+(\d+)\s+([\d,]+)\s+([\d,]+)$", section("tokenization"))
    assert len(rows) >= 5, "the reading's table of vocabulary sizes is gone: update this test"
    for size, tokens, ops, score_bytes in rows:
        assert re.search(rf"(?m)^\s+{size}\s+{tokens}\s+{ops}\s+{score_bytes}\s", text), (size, text)
    shorter, cheaper = quoted("tokenization", r"text is (\d\.\d+) times shorter and attention over it (\d\.\d+) "
                                              r"times cheaper")
    assert f"the sequence is {shorter}x shorter; attention_cost {cheaper}x lower" in text, text
    (memory,) = quoted("tokenization", r"falls (\d\.\d+)-fold")
    (cpu,) = quoted("tokenization", r"about (\d+)-fold")
    ratios = re.search(r"measured peak memory (\S+)x, CPU time (\S+)x", text)
    assert ratios and decimals(ratios[1]) == decimals(memory) and decimals(ratios[2]) == decimals(cpu), text


def test_distance_prints_the_readings_figures_with_its_digits(printed: dict[str, str]) -> None:
    text = printed["distance"]
    (critical,) = quoted("context-use", r"slope 0\.3 \(critical distance (\d+\.\d+)\)")
    assert f"critical distance 1 + 4.0 / 0.3 = {critical};" in text, text
    (margin,) = quoted("context-use", r"`score_margin`, mean (\d\.\d+)\)")
    shown = re.search(r"measured mean margin (\d+\.\d+)", text)
    assert shown and decimals(shown[1]) == decimals(margin), text
    near, far = quoted("context-use", r"\(means (\d\.\d+) and (\d\.\d+)\)")
    recall_table, length_table = text.split("accuracy of heads trained at length")
    recall = re.findall(r"(?m)^\s+\d+\s+(\d\.\d+)\s+(\d\.\d+)$", recall_table)
    assert recall and all(decimals(a) == decimals(near) == decimals(b) == decimals(far) for a, b in recall), text
    accuracy = re.findall(r"(?m)^sinusoidal head\s+(\d\.\d+)", section("context-use"))
    lengths = re.findall(r"(?m)^\s+(?:16|32|64)\s+(\d\.\d+)\s+(\d\.\d+)$", length_table)
    assert accuracy and lengths and all(decimals(a) == decimals(accuracy[0]) for row in lengths for a in row), text


def test_a_figure_printed_too_short_is_caught(printed: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail: recall printed with two decimals, as it was, against the reading's three."""
    shortened = re.sub(r"(?m)^(\s+\d+\s+)(\d\.\d{2})\d(\s+)(\d\.\d{2})\d$", r"\1\2\3\4", printed["distance"])
    assert shortened != printed["distance"]
    with pytest.raises(AssertionError):
        test_distance_prints_the_readings_figures_with_its_digits({**printed, "distance": shortened})

