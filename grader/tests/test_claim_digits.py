"""The claims' benchmarks print the reading's figures with the reading's digits (issue 35, 4).

The reading quotes the kit's own benchmark of each Part III claim ("the weight on the own slot averages 0.90",
"2.35 at the least"); the benchmark's recorded summary (benchmarks/results/, written by the script with
--record) must carry the same string, so a reader can find the figure where the reading says it comes from.
"""

from __future__ import annotations

import json
import re

import pytest

from grader.curriculum import ROOT

READING = (ROOT / "docs" / "reading.md").read_text(encoding="utf-8")


def summary(name: str) -> str:
    return json.loads((ROOT / "benchmarks" / "results" / f"{name}.json").read_text(encoding="utf-8"))["summary"]


def said(pattern: str) -> tuple[str, ...]:
    match = re.search(pattern, READING, re.S)
    assert match, f"the reading no longer says {pattern!r}: update this test with it"
    return match.groups()


@pytest.mark.parametrize(("benchmark", "reading", "printed"), [
    # 0.898 and 0.023 were printed where the reading says 0.90 and 0.02.
    ("claim_negation", r"own slot averages (\d\.\d+) against (\d\.\d+) on the other\s+event's",
     "own slot {0} (min .*on the other event's {1};"),
    # The least figures were not printed at all.
    ("claim_tokenization", r"shorter at V = 512 \(median; (\d\.\d+) at the least.*?cost (\d\.\d+) times lower "
                           r"\((\d\.\d+) at the least\)",
     "({0}x at the least; .*attention cost {1}x lower ({2}x at the least;"),
])
def test_the_benchmark_prints_the_readings_figure(benchmark: str, reading: str, printed: str) -> None:
    figures = said(reading.replace(" ", r"\s+"))
    expected = re.escape(printed.format(*figures)).replace(re.escape(".*"), ".*")
    assert re.search(expected, summary(benchmark)), (figures, summary(benchmark))
