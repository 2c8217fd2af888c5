"""explain() in named steps (issue 34.7): a condition on a candidate is a Rule of CANDIDATE_RULES, and every
step sees it, so a rule is added by adding one entry."""

from __future__ import annotations

import pytest

from grader.mutants import apply, load_catalogue
from tests import diagnosis
from tests.diagnosis import CANDIDATE_RULES, Candidate, Rule, explain, observe_everything
from tests.kit import LocalImplementation

CATALOGUE = {mutant.id: mutant for mutant in load_catalogue()}


@pytest.fixture(scope="module")
def no_scaling(tmp_path_factory):
    target = apply(CATALOGUE["attention-no-scaling"], tmp_path_factory.mktemp("explain") / "student")
    return observe_everything(LocalImplementation(target))


def test_every_rule_is_named_and_says_why():
    assert CANDIDATE_RULES and all(isinstance(rule, Rule) and rule.name and rule.why for rule in CANDIDATE_RULES)
    assert len({rule.name for rule in CANDIDATE_RULES}) == len(CANDIDATE_RULES)


def test_a_rule_added_is_a_condition_of_every_candidate(no_scaling, monkeypatch):
    assert [m.id for m in explain("attention", no_scaling)] == ["attention-no-scaling"]
    refused = Rule("not this one", "a test's rule", lambda mistake, observation, deviating:
                   mistake.id != "attention-no-scaling")
    monkeypatch.setattr(diagnosis, "CANDIDATE_RULES", (*CANDIDATE_RULES, refused))
    assert explain("attention", no_scaling) == []


def test_the_candidates_have_named_fields(no_scaling):
    deviating = frozenset(p for p, d in no_scaling.deviates.items() if d)
    found = diagnosis.candidates("attention", no_scaling, deviating)
    (key,) = [key for key, members in found.items() if key.weight == 1 and any(
        m.id == "attention-no-scaling" for group in members for m in group)]
    assert isinstance(key, Candidate) and key.weight == 1 and key.label is None and key.exact == key.probes
    assert not key.input_check
