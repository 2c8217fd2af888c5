"""The given tasks of exercise 13 (solutions/_distance_task.py): seeded, with the margins and answers they promise."""

from __future__ import annotations

import numpy as np
import pytest

from solutions import _distance_task as tasks


def test_recall_task_keys_are_orthogonal_and_the_answer_leads_by_the_margin():
    task = tasks.recall_task(np.random.default_rng(5), 12, 20, 3.5, repeats=2)
    again = tasks.recall_task(np.random.default_rng(5), 12, 20, 3.5, repeats=2)
    for key in ("keys", "queries", "answer", "distance"):
        np.testing.assert_array_equal(task[key], again[key])
    assert task["keys"].shape == (24, 12, 20) and task["queries"].shape == (24, 20)
    np.testing.assert_array_equal(np.sort(task["distance"]), np.repeat(np.arange(1, 13), 2))
    np.testing.assert_array_equal(task["answer"], 12 - task["distance"])
    scores = np.einsum("bd,bjd->bj", task["queries"], task["keys"]) / np.sqrt(20)
    expected = np.zeros((24, 12))
    expected[np.arange(24), task["answer"]] = 3.5
    np.testing.assert_allclose(scores, expected, atol=1e-12)


def test_recall_task_noise_jitters_each_score_by_about_noise():
    task = tasks.recall_task(np.random.default_rng(6), 30, 64, 4.0, noise=0.5, repeats=40)
    scores = np.einsum("bd,bjd->bj", task["queries"], task["keys"]) / np.sqrt(64)
    others = np.ones_like(scores, dtype=bool)
    others[np.arange(len(scores)), task["answer"]] = False
    assert abs(scores[others].std() - 0.5) < 0.02 and abs(scores[others].mean()) < 0.02


def test_latest_match_answer_is_the_last_occurrence_of_the_query():
    task = tasks.latest_match_task(np.random.default_rng(7), 300, 17, 5)
    assert task["symbols"].shape == (300, 17) and task["symbols"].max() < 5
    for row, query, answer in zip(task["symbols"], task["query"], task["answer"], strict=True):
        assert row[answer] == query and not np.any(row[answer + 1:] == query)


@pytest.mark.parametrize(("call", "name"), [
    (lambda: tasks.recall_task(np.random.default_rng(0), 9, 8, 1.0), "n_pairs"),
    (lambda: tasks.recall_task(np.random.default_rng(0), 4, 8, 0.0), "margin"),
    (lambda: tasks.recall_task(np.random.default_rng(0), 4, 8, 1.0, noise=-1.0), "noise"),
    (lambda: tasks.latest_match_task(np.random.default_rng(0), 4, 0), "length"),
])
def test_bad_arguments_are_named(call, name):
    with pytest.raises(ValueError, match=name):
        call()
