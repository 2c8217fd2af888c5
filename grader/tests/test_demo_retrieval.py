"""``attention-kit demo --measure retrieval``: the measurement of exercise 14, printed and drawn.

The demo runs the reference (``--reference``) or a student's ``evaluate`` on four collections of the given
``_facts.py``; these tests check what it prints and draws on the reference, that its figures say the claim
(where the evidence was retrieved a sharp reader is right, where it was missed every reader is at chance), and
that it waits for exercise 14 when the student's code does not pass yet.
"""

from __future__ import annotations

import argparse

import numpy as np

from grader.curriculum import ROOT
from grader.student import demo, demo_retrieval


def _args(*extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    return parser.parse_args(["--measure", "retrieval", *extra])


def test_retrieval_is_a_measured_exercise():
    assert "retrieval" in demo.measured_exercises()


def test_the_figures_say_the_claim():
    result = demo_retrieval.compute(ROOT / "solutions", source="reference solution", ks=(1, 4, 8))
    sharp, soft = result.figures[10.0], result.figures[1.0]
    assert np.all(np.diff(sharp["recall"]) > 0), sharp["recall"]
    assert min(sharp["accuracy_retrieved"]) >= 0.97 and min(result.figures[100.0]["accuracy_retrieved"]) >= 0.97
    for figures in result.figures.values():  # every reader, however sharp, is at chance without the evidence
        assert max(abs(np.array(figures["accuracy_missed"]) - result.chance)) <= 0.05, figures["accuracy_missed"]
    line = result.chance + (1 - result.chance) * np.array(sharp["recall"])
    assert max(abs(np.array(sharp["accuracy"]) - line)) <= 0.03
    assert soft["accuracy_retrieved"][-1] < 0.9  # a soft reader loses retrieved facts in a crowded context
    lines = demo_retrieval.summary_lines(result)
    assert lines[1].split() == ["k", "recall", "accuracy", "line", "where", "retrieved", "where", "missed"]
    assert len(lines) == 2 + 3 + 1 + 3


def test_the_demo_on_the_reference_prints_and_draws(tmp_path, capsys):
    out = tmp_path / "retrieval.png"
    assert demo.run(_args("--reference", "--out", str(out))) == 0
    text = capsys.readouterr().out
    assert "reader of sharpness 10" in text and "chance + (1 - chance) * recall" in text
    assert "Lewis et al., 2020" in text
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_default_picture_is_attention_retrieval_png(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(demo_retrieval, "KS", (1, 2))
    monkeypatch.setattr(demo_retrieval, "SEEDS", (14,))
    assert demo.run(_args("--reference")) == 0
    assert (tmp_path / "attention-retrieval.png").is_file() and not (tmp_path / demo.DEFAULT_OUT).exists()


def test_the_demo_waits_for_exercise_14(tmp_path, capsys):
    out = tmp_path / "retrieval.png"
    assert demo.run(_args("--impl", str(ROOT / "exercises"), "--out", str(out))) == 1
    text = capsys.readouterr().out
    assert "Finish these first" in text and "retrieval: 0/" in text
    assert not out.exists()
