"""``attention-kit demo --measure distance`` on the reference: the numbers it prints, the picture it draws."""

from __future__ import annotations

import argparse

import numpy as np

from grader.curriculum import ROOT
from grader.student import demo, demo_distance


def test_distance_demo_measures_both_figures_with_the_reference(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    out = tmp_path / "distance.png"
    assert demo.run(parser.parse_args(["--measure", "distance", "--reference", "--out", str(out)])) == 0
    text = capsys.readouterr().out
    assert "critical distance 1 + 4.0 / 0.3 = 14.33" in text
    assert "accuracy of heads trained at length 16" in text and "sinusoidal" in text and "ALiBi" in text
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_distance_demo_shows_the_claim(tmp_path):
    result = demo_distance.compute(ROOT / "solutions", source="reference")
    t_star = result.critical
    near, far = result.distances <= t_star - 4, result.distances >= t_star + 4
    assert result.recall_penalty[near].min() >= 0.9 and result.recall_penalty[far].max() <= 0.1
    assert np.all(result.recall_flat == 1.0)
    at = {length: i for i, length in enumerate(result.lengths)}
    assert result.accuracy["ALiBi"][at[64]] >= 0.9 and result.accuracy["sinusoidal"][at[64]] < 0.6
    assert min(result.accuracy["ALiBi"][at[16]], result.accuracy["sinusoidal"][at[16]]) >= 0.9
    lines = demo_distance.summary_lines(result)
    assert lines[1].startswith("critical distance 1 + 4.0 / 0.3 = 14.33")
    assert "Press et al. (2022)" in demo_distance.CAPTION and "critical distance" in demo_distance.CAPTION
    demo_distance.plot(result, tmp_path / "d.png")
    assert (tmp_path / "d.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_distance_demo_waits_for_the_exercises_it_needs(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    out = tmp_path / "distance.png"
    args = parser.parse_args(["--measure", "distance", "--impl", str(ROOT / "exercises"), "--out", str(out)])
    assert demo.run(args) == 1
    text = capsys.readouterr().out
    assert "Finish these first" in text and "distance: 0/" in text
    assert not out.exists()


def test_distance_demo_writes_its_own_default_picture(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    assert demo.run(parser.parse_args(["--measure", "distance", "--reference"])) == 0
    assert (tmp_path / demo_distance.DEFAULT_OUT).is_file() and not (tmp_path / "attention-demo.png").exists()
