"""``attention-kit demo --measure tokenization`` on the reference: the numbers it prints, the picture it draws."""

from __future__ import annotations

import argparse

import numpy as np

from grader.curriculum import ROOT
from grader.student import demo, demo_tokenization

SOLUTIONS = ROOT / "solutions"


def test_the_demo_measures_lengths_costs_and_pieces(tmp_path, capsys):
    out = tmp_path / "tokenization.png"
    args = argparse.Namespace(impl=str(SOLUTIONS), reference=True, out=str(out), measure="tokenization",
                              explain=False)
    assert demo.run(args) == 0
    printed = capsys.readouterr().out
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "'XK-9931-B': 9 tokens: X | K | - | 9 | 9 | 3 | 1 | - | B" in printed
    assert "'vessel': 1 token: vessel" in printed
    assert "from V = 256 to V = 512" in printed


def test_the_measured_costs_fall_with_the_square_of_the_length():
    result = demo_tokenization.compute(SOLUTIONS, source="reference")
    lengths = np.array(result.lengths)
    assert result.sizes[0] == 256 and result.sizes[-1] == 512
    assert lengths[0] == result.held_out_bytes and np.all(np.diff(lengths) <= 0)
    assert result.predicted_ops == [4 * n * n * demo_tokenization.D for n in result.lengths]
    assert result.predicted_bytes == [8 * n * n for n in result.lengths]
    # The traced peak of full attention is a few (n, n) arrays: it falls with n^2, within 10%.
    squared = (lengths[0] / lengths[-1]) ** 2
    assert 0.9 * squared <= result.measured_peak[0] / result.measured_peak[-1] <= 1.1 * squared
    assert len(result.pieces["XK-9931-B"]) >= 3 * len(result.pieces["vessel"])


def test_the_demo_asks_for_the_exercises_first(tmp_path, capsys):
    args = argparse.Namespace(impl=str(ROOT / "exercises"), reference=False, out=str(tmp_path / "x.png"),
                              measure="tokenization", explain=False)
    assert demo_tokenization.run(args) == 1
    printed = capsys.readouterr().out
    assert "Finish these first" in printed and "tokenization" in printed
    assert not (tmp_path / "x.png").exists()
