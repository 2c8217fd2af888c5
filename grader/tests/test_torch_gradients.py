"""The reference's backward functions, loss, model gradients and Adam agree with PyTorch autograd (not graded).

Each forward pass is written with torch operations on float64 tensors that
require gradients; ``backward()`` of ``sum(R * output)`` gives the expected
gradients, which the reference must reproduce for the same ``R``.
"""

from __future__ import annotations

import numpy as np
import pytest

from solutions import _tasks
from solutions.backward import (
    attention_backward,
    layer_norm_backward,
    linear_backward,
    multi_head_attention_backward,
    softmax_backward,
)
from solutions.multihead import multi_head_attention
from solutions.training import adam_step, cross_entropy, model_gradients

torch = pytest.importorskip("torch")
F = torch.nn.functional

TOLERANCE = dict(rtol=1e-9, atol=1e-11)


def _t(array: np.ndarray, grad: bool = True):
    return torch.tensor(array, dtype=torch.float64, requires_grad=grad)


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _torch_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~torch.as_tensor(mask), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    weights = torch.nan_to_num(weights, nan=0.0)  # fully masked rows: zeros, as the kit defines them
    return weights @ v, weights


def _torch_mha(x, p, n_heads, mask=None):
    *batch, n, d = x.shape
    d_head = d // n_heads

    def heads(t):
        return t.reshape(*batch, n, n_heads, d_head).transpose(-3, -2)

    q, k, v = (heads(x @ p[f"w_{c}"] + p[f"b_{c}"]) for c in "qkv")
    context, _ = _torch_attention(q, k, v, None if mask is None else mask[..., None, :, :])
    return context.transpose(-3, -2).reshape(*batch, n, d) @ p["w_o"] + p["b_o"]


def test_softmax_backward_matches_autograd():
    rng = _rng(1)
    for axis in (-1, 1):
        scores, r = rng.normal(size=(2, 5, 7)), rng.normal(size=(2, 5, 7))
        s = _t(scores)
        (torch.softmax(s, dim=axis) * _t(r, False)).sum().backward()
        weights = torch.softmax(s, dim=axis).detach().numpy()
        np.testing.assert_allclose(softmax_backward(r, weights, axis=axis), s.grad.numpy(), **TOLERANCE)


def test_linear_backward_matches_autograd():
    rng = _rng(2)
    x, w, b, r = rng.normal(size=(2, 5, 7)), rng.normal(size=(7, 4)), rng.normal(size=4), rng.normal(size=(2, 5, 4))
    tx, tw, tb = _t(x), _t(w), _t(b)
    ((tx @ tw + tb) * _t(r, False)).sum().backward()
    for mine, theirs in zip(linear_backward(r, x, w), (tx, tw, tb), strict=True):
        np.testing.assert_allclose(mine, theirs.grad.numpy(), **TOLERANCE)


@pytest.mark.parametrize("masked", [False, True])
def test_attention_backward_matches_autograd(masked):
    rng = _rng(3)
    q, k, v = rng.normal(size=(2, 3, 5, 4)), rng.normal(size=(2, 3, 7, 4)), rng.normal(size=(2, 3, 7, 6))
    r = rng.normal(size=(2, 3, 5, 6))
    mask = None
    if masked:
        mask = rng.random((5, 7)) < 0.6
        mask[:, 0] = True
        mask[2] = False  # a fully blocked query
    tq, tk, tv = _t(q), _t(k), _t(v)
    context, weights = _torch_attention(tq, tk, tv, mask)
    (context * _t(r, False)).sum().backward()
    mine = attention_backward(r, q, k, v, weights.detach().numpy())
    for ours, theirs in zip(mine, (tq, tk, tv), strict=True):
        np.testing.assert_allclose(ours, theirs.grad.numpy(), **TOLERANCE)


def test_layer_norm_backward_matches_autograd():
    rng = _rng(4)
    x, gamma, beta = rng.normal(size=(2, 5, 7)), rng.uniform(0.5, 2, 7), rng.normal(size=7)
    r = rng.normal(size=(2, 5, 7))
    tx, tg, tb = _t(x), _t(gamma), _t(beta)
    (F.layer_norm(tx, (7,), tg, tb, eps=0.1) * _t(r, False)).sum().backward()
    for ours, theirs in zip(layer_norm_backward(r, x, gamma, eps=0.1), (tx, tg, tb), strict=True):
        np.testing.assert_allclose(ours, theirs.grad.numpy(), **TOLERANCE)


@pytest.mark.parametrize("masked", [False, True])
def test_multi_head_attention_backward_matches_autograd(masked):
    rng = _rng(5)
    d, n, heads = 12, 5, 3
    params = {f"w_{c}": rng.normal(scale=0.4, size=(d, d)) for c in "qkvo"}
    params |= {f"b_{c}": rng.normal(scale=0.3, size=d) for c in "qkvo"}
    x, r = rng.normal(size=(2, n, d)), rng.normal(size=(2, n, d))
    mask = np.tril(np.ones((n, n), dtype=bool)) if masked else None
    tx, tp = _t(x), {key: _t(value) for key, value in params.items()}
    output = _torch_mha(tx, tp, heads, None if mask is None else torch.as_tensor(mask))
    np.testing.assert_allclose(output.detach().numpy(), multi_head_attention(x, params, heads, mask)[0], **TOLERANCE)
    (output * _t(r, False)).sum().backward()
    grad_x, grads = multi_head_attention_backward(r, x, params, heads, mask)
    np.testing.assert_allclose(grad_x, tx.grad.numpy(), **TOLERANCE)
    for key in params:
        np.testing.assert_allclose(grads[key], tp[key].grad.numpy(), **TOLERANCE, err_msg=key)


def test_cross_entropy_matches_torch():
    rng = _rng(6)
    logits, targets = rng.normal(scale=3, size=(6, 5)) + 500.0, rng.integers(0, 5, size=6)
    tl = _t(logits)
    expected = F.cross_entropy(tl, torch.as_tensor(targets))
    expected.backward()
    loss, grad = cross_entropy(logits, targets)
    assert loss == pytest.approx(expected.item(), rel=1e-12)
    np.testing.assert_allclose(grad, tl.grad.numpy(), **TOLERANCE)


@pytest.mark.parametrize("positions", [True, False])
def test_model_gradients_match_autograd(positions):
    from solutions.positional import sinusoidal_encoding
    from solutions.training import init_model

    task = _tasks.antecedent_task(_rng(7), 6)
    params = init_model(_rng(8), len(task["vocab"]), 12, 3)
    tokens, query, target = task["tokens"], task["query_position"], task["target"]
    tp = {"embedding": _t(params["embedding"]), "w_out": _t(params["w_out"]), "b_out": _t(params["b_out"]),
          "attention": {key: _t(value) for key, value in params["attention"].items()}}
    x = tp["embedding"][torch.as_tensor(tokens)]
    if positions:
        x = x + torch.as_tensor(sinusoidal_encoding(tokens.shape[1], 12))
    h = x + _torch_mha(x, tp["attention"], 3)
    logits = h[torch.arange(len(tokens)), torch.as_tensor(query)] @ tp["w_out"] + tp["b_out"]
    expected = F.cross_entropy(logits, torch.as_tensor(target))
    expected.backward()
    loss, grads = model_gradients(params, tokens, query, target, 3, positions)
    assert loss == pytest.approx(expected.item(), rel=1e-12)
    for key in ("embedding", "w_out", "b_out"):
        np.testing.assert_allclose(grads[key], tp[key].grad.numpy(), **TOLERANCE, err_msg=key)
    for key, value in tp["attention"].items():
        np.testing.assert_allclose(grads["attention"][key], value.grad.numpy(), **TOLERANCE, err_msg=key)


def test_adam_step_matches_torch_optim():
    rng = _rng(9)
    params = {"w": rng.normal(size=(3, 4)), "group": {"b": rng.normal(size=5)}}
    tensors = [_t(params["w"]), _t(params["group"]["b"])]
    optimiser = torch.optim.Adam(tensors, lr=0.03, betas=(0.8, 0.99), eps=1e-8)
    state = None
    for step in range(5):
        grads = {"w": rng.normal(size=(3, 4)), "group": {"b": rng.normal(size=5) * 10 ** -step}}
        tensors[0].grad, tensors[1].grad = torch.tensor(grads["w"]), torch.tensor(grads["group"]["b"])
        optimiser.step()
        params, state = adam_step(params, grads, state, lr=0.03, beta1=0.8, beta2=0.99, eps=1e-8)
        np.testing.assert_allclose(params["w"], tensors[0].detach().numpy(), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(params["group"]["b"], tensors[1].detach().numpy(), rtol=1e-12, atol=1e-14)
