"""``attention-kit demo --measure negation`` on the reference: the figures it prints and the picture it writes."""

from __future__ import annotations

import argparse
import re

from grader.curriculum import ROOT
from grader.student import demo, demo_negation


def test_the_demo_prints_the_claim_and_draws_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the default --out becomes attention-negation.png, here
    args = argparse.Namespace(impl=str(ROOT / "solutions"), reference=True, out=demo.DEFAULT_OUT,
                              measure="negation")
    assert demo_negation.run(args) == 0
    out = capsys.readouterr().out
    accuracy = {name: float(value) for name, value in re.findall(r"^  (.+?)\s+accuracy ([0-9.]+)", out, re.M)}
    assert accuracy[demo_negation.NAMES["pooled"]] <= 0.5, out
    assert accuracy[demo_negation.NAMES["bag_attention"]] <= 0.5, out
    assert accuracy[demo_negation.NAMES["attention"]] >= 0.95, out
    own, other = (float(v) for v in re.search(r"attention: ([0-9.]+) on its own slot, ([0-9.]+)", out).groups())
    assert own - other >= 0.3, out
    assert 'model: no (right: no)' in out and 'model: yes (right: yes)' in out, out
    picture = tmp_path / demo_negation.DEFAULT_OUT
    assert picture.is_file() and picture.stat().st_size > 10_000
    assert not (tmp_path / demo.DEFAULT_OUT).exists()
