"""Families of mistakes: a transformation that explains every deviation is named in the student's words.

Each mistake below is written as a student would write it (not as grader/mutants/families.toml plants its
family), in a copy of the reference. The family must be named exactly; the reference, and mistakes that
the family does not explain, get none.
"""

from __future__ import annotations

import shutil

import pytest

from grader.curriculum import ROOT
from grader.curriculum import load as load_curriculum
from grader.mutants import FAMILY_KINDS, apply, load_families
from grader.mutants.report import run_tests
from tests.diagnosis import describe_family, diagnose, diagnose_family
from tests.diagnosis import load_families as stored_families
from tests.kit import LocalImplementation


def plant(tmp_path, file: str, replace: str, with_: str):
    """A copy of solutions/ with ``replace`` (which must occur once) replaced in ``file``."""
    target = tmp_path / "student"
    shutil.copytree(ROOT / "solutions", target, ignore=shutil.ignore_patterns("__pycache__"))
    path = target / file
    source = path.read_text(encoding="utf-8")
    assert source.count(replace) == 1, replace
    path.write_text(source.replace(replace, with_), encoding="utf-8")
    return target


VARIANTS = {
    # p*(1-p) elementwise as the softmax Jacobian (the catalogue has p*g)
    "jacobian-diagonal": ("backward.py",
                          "    coupled = np.sum(grad_weights * weights, axis=axis, keepdims=True)  # the - p p^T term "
                          "of the Jacobian\n    return weights * (grad_weights - coupled)",
                          "    return weights * (1 - weights) * grad_weights",
                          "backward", "family-softmax_backward-diagonal-only"),
    # a bias gradient summed over the batch only (the catalogue has: over positions only)
    "bias-batch-only": ("backward.py", "    grad_bias = rows_out.sum(axis=0)  # (d_out,)",
                        "    grad_bias = np.sum(grad_out, axis=0)",
                        "backward", "family-linear_backward-bias-first-axis"),
    # the cache concatenated on axis -1 (the catalogue has axis 0)
    "cache-last-axis": ("decoding.py",
                        "    new[\"k\"] = np.concatenate([k, k_t], axis=-2)  # (..., t, d_k) + (..., 1, d_k) -> "
                        "(..., t + 1, d_k)\n    new[\"v\"] = np.concatenate([v, v_t], axis=-2)",
                        "    new[\"k\"] = np.concatenate((k, k_t), axis=k.ndim - 1)\n"
                        "    new[\"v\"] = np.concatenate((v, v_t), axis=v.ndim - 1)",
                        "decoding", "family-kv_cache_append-last-axis"),
    # log(exp / sum) without the shift
    "log-of-ratio-unshifted": ("training.py",
                               "    shifted = logits - logits.max(axis=-1, keepdims=True)  # the largest logit of "
                               "each row becomes 0\n    log_total = np.log(np.exp(shifted).sum(axis=-1, keepdims=True))"
                               "\n    log_probs = shifted - log_total  # (n, n_classes)",
                               "    exps = np.exp(logits)\n    probs = exps / np.sum(exps, axis=1, keepdims=True)\n"
                               "    log_probs = np.log(probs)",
                               "training", "family-cross_entropy-log-of-ratio-unshifted"),
    # cross-entropy with the batch-wide maximum
    "batch-wide-max": ("training.py",
                       "    shifted = logits - logits.max(axis=-1, keepdims=True)  # the largest logit of each row "
                       "becomes 0", "    shifted = logits - np.max(logits)",
                       "training", "family-cross_entropy-batch-max"),
    # blockwise attention without the 1/sqrt(d_k) scale
    "blockwise-unscaled": ("decoding.py",
                           "        scores = (q @ np.swapaxes(k[..., start:stop, :], -1, -2)) * dtype.type(scale)  "
                           "# (..., n_q, block)",
                           "        scores = np.matmul(q, np.swapaxes(k[..., start:stop, :], -1, -2))",
                           "decoding", "family-blockwise_attention-no-scale"),
}


# Beyond the list: other families, each written as a student would.
VARIANTS |= {
    "sinusoidal-from-1": ("positional.py", "    positions = np.arange(n_positions)[:, None]  # (n_positions, 1)",
                          "    positions = (np.arange(n_positions) + 1).reshape(-1, 1)",
                          "positional", "family-sinusoidal_encoding-positions-from-1"),
    "adam-next-step": ("training.py", "        m_hat = moment / (1 - beta1**step)  # bias correction: both means "
                       "start at 0\n        v_hat = square / (1 - beta2**step)",
                       "        t = step + 1\n        m_hat = moment / (1 - beta1 ** t)\n"
                       "        v_hat = square / (1 - beta2 ** t)", "training", "family-adam_step-step-off-by-one"),
    # the PyTorch convention for a linear layer's weight (only runs on a square weight)
    "linear-weight-transposed": ("projections.py",
                                 "    out = x @ weight  # (..., d_in) @ (d_in, d_out) -> (..., d_out)",
                                 "    out = np.matmul(x, np.transpose(weight))",
                                 "projections", "family-linear-weight-transposed"),
    # grad_weight written as grad_out^T x (only has the right shape on a square weight)
    "grad-weight-transposed": ("backward.py",
                               "    grad_weight = rows_in.T @ rows_out  # (d_in, d_out), summed over the rows",
                               "    grad_weight = np.einsum('ro,ri->oi', rows_out, rows_in)",
                               "backward", "family-linear_backward-grad-weight-transposed"),
    # float32 q and k turned into float64 before the product
    "scores-in-float64": ("attention.py", "    q = as_float_array(\"q\", q)\n    k = as_float_array(\"k\", k)\n",
                          "    q = np.asarray(q, dtype=float)\n    k = np.asarray(k, dtype=float)\n",
                          "attention", "family-attention_scores-float64-path"),
    # layer norm that centres but never divides by the standard deviation
    "layer-norm-no-std": ("layer.py", "    return (x - mean) / np.sqrt(variance + eps) * gamma + beta",
                          "    centred = x - mean\n    return gamma * centred + beta",
                          "layer", "family-layer_norm-no-std"),
    "attention-scores-unscaled": ("attention.py", "    return (q @ np.swapaxes(k, -1, -2)) / math.sqrt(d_k)",
                                  "    return np.einsum('...id,...jd->...ij', q, k)", "attention", None),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_variant_of_a_catalogued_mistake_is_named_by_its_family(name, tmp_path):
    file, replace, with_, exercise, family_id = VARIANTS[name]
    implementation = LocalImplementation(plant(tmp_path, file, replace, with_))
    if family_id is None:  # a catalogued mistake: the family fits too, but the catalogue's words come first
        assert diagnose(implementation, exercise) != [] and diagnose_family(implementation, exercise) is not None
        run = run_tests(ROOT / load_curriculum().exercise(exercise).test_file, implementation.path, tb="short")
        first = run.output.split("= FAILURES =", 1)[1].split("\n", 2)[2]
        assert first.startswith("Diagnosis: your attention.py gives exactly the outputs of a known mistake:"), first
        assert "a family of mistakes" not in run.output
        return
    assert diagnose(implementation, exercise) == []  # no catalogued mistake gives these outputs exactly
    family = diagnose_family(implementation, exercise)
    assert family is not None and family.id == family_id, family
    wanted = {entry.id: entry for entry in load_families()}[family_id]
    text = describe_family(exercise, family)
    assert text.startswith(f"Diagnosis (a family of mistakes: {wanted.family}): on every input where your "
                           f"{load_curriculum().exercise(exercise).module_file} goes wrong, "), text
    assert wanted.description in text and f"Revisit: {wanted.revisit}" in text


def test_the_reference_and_the_stubs_get_no_family():
    for folder in ("solutions", "exercises"):
        implementation = LocalImplementation(ROOT / folder)
        for exercise in load_curriculum().names:
            assert diagnose_family(implementation, exercise) is None, (folder, exercise)


@pytest.mark.parametrize(("file", "replace", "with_", "exercise"), [
    # the unscaled blockwise scores, and a second mistake the family does not explain
    ("decoding.py", "        scores = (q @ np.swapaxes(k[..., start:stop, :], -1, -2)) * dtype.type(scale)  "
     "# (..., n_q, block)", "        scores = (q @ np.swapaxes(k[..., start:stop, :], -1, -2)) * 1.01", "decoding"),
    # a bias gradient that is half the right one: no family halves it
    ("backward.py", "    grad_bias = rows_out.sum(axis=0)  # (d_out,)", "    grad_bias = rows_out.sum(axis=0) / 2",
     "backward"),
    # the mean loss replaced by the sum: no family sums instead of averaging
    ("training.py", "    loss = float(-log_probs[rows, targets].mean())",
     "    loss = float(-log_probs[rows, targets].sum())", "training"),
    # the weight transposed AND halved: the transpose alone does not explain it
    ("projections.py", "    out = x @ weight  # (..., d_in) @ (d_in, d_out) -> (..., d_out)",
     "    out = x @ weight.T / 2", "projections"),
    # float32 scores cast to float16: a wrong dtype path, but not the float64 one
    ("attention.py", "    return (q @ np.swapaxes(k, -1, -2)) / math.sqrt(d_k)",
     "    return ((q @ np.swapaxes(k, -1, -2)) / math.sqrt(d_k)).astype(np.float16)", "attention"),
    # layer norm divided by the variance instead of the standard deviation: not a missing division
    ("layer.py", "    return (x - mean) / np.sqrt(variance + eps) * gamma + beta",
     "    return (x - mean) / (variance + eps) * gamma + beta", "layer"),
])
def test_a_mistake_no_family_explains_gets_none(file, replace, with_, exercise, tmp_path):
    implementation = LocalImplementation(plant(tmp_path, file, replace, with_))
    assert diagnose_family(implementation, exercise) is None


def test_every_family_is_stored_with_a_known_kind_and_its_outputs():
    stored = {family.id: family for family in stored_families()}
    for family in load_families():
        assert family.family in FAMILY_KINDS
        assert family.id in stored, f"{family.id}: run `python -m grader.authoring.fingerprints`"
        assert stored[family.id].description == family.description and stored[family.id].outputs


def test_blockwise_without_the_scale_is_told_the_scale_not_the_last_block(tmp_path):
    file, replace, with_, exercise, _ = VARIANTS["blockwise-unscaled"]
    target = plant(tmp_path, file, replace, with_)
    run = run_tests(ROOT / load_curriculum().exercise(exercise).test_file, target, tb="short")
    assert run.exit_code == 1
    text = run.output.split("= FAILURES =", 1)[1]
    assert "Diagnosis (a family of mistakes: missing scale): on every input where your decoding.py goes wrong, " \
           "your output equals attention without the 1/sqrt(d_k) scale of the scores, for every block size" in text
    revisits = [line.strip() for line in text.splitlines() if line.strip().startswith("revisit:")]
    assert revisits, text[:2000]
    family = {entry.id: entry for entry in load_families()}["family-blockwise_attention-no-scale"]
    for line in revisits:  # every test's revisit line is the family's idea, not the last block's or the rescaling's
        assert line == f"revisit:  {family.revisit}", line
        assert "last block" not in line and "rescal" not in line and "online" not in line, line


def test_every_family_applies_to_the_reference_and_names_a_function_of_its_exercise(tmp_path):
    for family in load_families():
        apply(family, tmp_path / family.id)  # raises when its `replace` text is no longer in solutions/
        function = family.id.removeprefix("family-").split("-")[0]
        assert function in load_curriculum().exercise(family.exercise).functions, family.id
