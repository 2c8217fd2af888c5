"""The analytic-gradient gate passes a correct backward pass on every draw: no test lost by a submission's draw.

Exercise 8's gate checks a few entries of each gradient against the loss's derivatives, on inputs drawn for the
submission. At the large size it used central differences, which missed the exact derivative by about 1e-5 on
some draws: the reference's ``softmax_backward`` failed its five tests for about one submission in 130 (salts 87,
197 and 415 of the first 800), which ``benchmarks/draw_fairness.py`` showed as catalogue mistakes of other
functions failing softmax_backward's tests under one key of eight. The complex step is exact at both sizes.
"""

from __future__ import annotations

import pytest

from grader.curriculum import ROOT
from tests.kit import Kit, LocalImplementation

NONLINEAR = ("softmax_backward", "layer_norm_backward", "attention_backward", "multi_head_attention_backward")


def _gate(monkeypatch: pytest.MonkeyPatch, name: str, salt: int) -> list:
    import tests.test_08_backward as backward

    monkeypatch.setattr(backward, "submission_salt", lambda module: salt)
    return backward._gate(Kit(LocalImplementation(ROOT / "solutions"), "backward"), name)


@pytest.mark.parametrize("salt", [87, 197, 415])
def test_the_reference_passes_where_central_differences_missed(monkeypatch: pytest.MonkeyPatch, salt: int) -> None:
    assert _gate(monkeypatch, "softmax_backward", salt) == []


def test_the_reference_passes_every_nonlinear_gate_on_many_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    failed = [(name, salt) for name in NONLINEAR for salt in range(40) if _gate(monkeypatch, name, salt)]
    assert not failed, failed
