"""The reference solutions agree with PyTorch (a project test, not graded).

Weights of ``nn.MultiheadAttention`` and ``nn.TransformerEncoderLayer`` are
copied into the kit's parameter dicts. PyTorch computes ``y = x @ W.T + b``
and the kit ``y = x @ W + b`` (row vectors), so every weight is transposed.
PyTorch's boolean attention masks mean True = blocked; the kit's mean True =
may attend, so masks are inverted on the way over.
"""

from __future__ import annotations

import numpy as np
import pytest

from solutions.layer import transformer_layer
from solutions.multihead import multi_head_attention

torch = pytest.importorskip("torch")
nn = torch.nn

BATCH, N_HEADS, D_MODEL, N_Q, N_K, D_FF = 2, 3, 12, 5, 7, 9
TOLERANCE = 1e-9


def _randomise(module, seed: int) -> None:
    """Give every parameter non-trivial values (biases, gammas and betas included)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            values = torch.randn(parameter.shape, generator=generator, dtype=torch.float64)
            if name.endswith("norm1.weight") or name.endswith("norm2.weight"):
                parameter.copy_(1.0 + 0.3 * values)
            else:
                parameter.copy_(values * (0.5 if parameter.ndim == 1 else 1.0 / np.sqrt(parameter.shape[-1])))


def _attention_params(mha) -> dict[str, np.ndarray]:
    weight = mha.in_proj_weight.detach().numpy()
    bias = mha.in_proj_bias.detach().numpy()
    d = D_MODEL
    return {
        "w_q": weight[:d].T.copy(), "w_k": weight[d:2 * d].T.copy(), "w_v": weight[2 * d:].T.copy(),
        "b_q": bias[:d].copy(), "b_k": bias[d:2 * d].copy(), "b_v": bias[2 * d:].copy(),
        "w_o": mha.out_proj.weight.detach().numpy().T.copy(), "b_o": mha.out_proj.bias.detach().numpy().copy(),
    }


def _layer_params(layer) -> dict:
    def array(tensor):
        return tensor.detach().numpy().copy()

    return {
        "attention": _attention_params(layer.self_attn),
        "ln1_gamma": array(layer.norm1.weight), "ln1_beta": array(layer.norm1.bias),
        "ln2_gamma": array(layer.norm2.weight), "ln2_beta": array(layer.norm2.bias),
        "w_1": array(layer.linear1.weight).T, "b_1": array(layer.linear1.bias),
        "w_2": array(layer.linear2.weight).T, "b_2": array(layer.linear2.bias),
    }


def _mha(seed: int):
    mha = nn.MultiheadAttention(D_MODEL, N_HEADS, dropout=0.0, batch_first=True, dtype=torch.float64).eval()
    _randomise(mha, seed)
    return mha


def _assert_close(ours: np.ndarray, theirs, what: str) -> None:
    theirs = theirs.detach().numpy()
    assert ours.shape == theirs.shape, f"{what}: shape {ours.shape} vs. PyTorch's {theirs.shape}"
    difference = float(np.max(np.abs(ours - theirs)))
    assert difference <= TOLERANCE, f"{what}: max abs difference {difference:.3g} from PyTorch (> {TOLERANCE})"


def _causal(n: int) -> np.ndarray:
    return np.tril(np.ones((n, n), dtype=bool))


@pytest.mark.parametrize("masked", [False, True], ids=["no-mask", "causal"])
def test_multi_head_self_attention_matches_pytorch(masked):
    mha = _mha(1)
    x = np.random.default_rng(2).normal(size=(BATCH, N_Q, D_MODEL))
    mask = _causal(N_Q) if masked else None
    ours, our_weights = multi_head_attention(x, _attention_params(mha), N_HEADS, mask=mask)
    t = torch.from_numpy(x)
    theirs, their_weights = mha(t, t, t, attn_mask=None if mask is None else torch.from_numpy(~mask),
                                need_weights=True, average_attn_weights=False)
    _assert_close(ours, theirs, f"multi-head self-attention output (mask={masked})")
    _assert_close(our_weights, their_weights, f"multi-head self-attention per-head weights (mask={masked})")


def test_multi_head_cross_attention_matches_pytorch():
    mha = _mha(3)
    rng = np.random.default_rng(4)
    x, kv = rng.normal(size=(BATCH, N_Q, D_MODEL)), rng.normal(size=(BATCH, N_K, D_MODEL))
    mask = rng.random((N_Q, N_K)) < 0.6
    mask[:, 0] = True  # no fully blocked row: PyTorch returns NaN there, the kit zeros
    ours, our_weights = multi_head_attention(x, _attention_params(mha), N_HEADS, mask=mask, kv=kv)
    t_kv = torch.from_numpy(kv)
    theirs, their_weights = mha(torch.from_numpy(x), t_kv, t_kv, attn_mask=torch.from_numpy(~mask),
                                need_weights=True, average_attn_weights=False)
    _assert_close(ours, theirs, "cross-attention output (5 queries, 7 keys, mask)")
    _assert_close(our_weights, their_weights, "cross-attention per-head weights")


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-ln", "pre-ln"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_transformer_layer_matches_pytorch(norm_first, activation):
    torch_activation = "relu" if activation == "relu" else (
        lambda t: torch.nn.functional.gelu(t, approximate="tanh"))
    layer = nn.TransformerEncoderLayer(D_MODEL, N_HEADS, dim_feedforward=D_FF, dropout=0.0,
                                       activation=torch_activation, batch_first=True, norm_first=norm_first,
                                       dtype=torch.float64).eval()
    _randomise(layer, 5)
    x = np.random.default_rng(6).normal(size=(BATCH, N_Q, D_MODEL))
    params = _layer_params(layer)
    what = f"transformer_layer (norm_first={norm_first}, {activation})"
    ours = transformer_layer(x, params, N_HEADS, norm_first=norm_first, activation=activation)
    _assert_close(ours, layer(torch.from_numpy(x)), what)
    mask = _causal(N_Q)
    ours = transformer_layer(x, params, N_HEADS, mask=mask, norm_first=norm_first, activation=activation)
    _assert_close(ours, layer(torch.from_numpy(x), src_mask=torch.from_numpy(~mask)), what + " with a causal mask")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("block_size", [1, 7, 16, 64, 100])
def test_blockwise_and_cached_attention_match_pytorch(causal, block_size):
    """Blockwise and KV-cached attention against torch's scaled_dot_product_attention, scores up to ~1e4."""
    from solutions.decoding import blockwise_attention, causal_decode

    functional = torch.nn.functional
    rng = np.random.default_rng(900 + block_size)
    n, d_k, d_v = 64, 8, 5
    q = rng.normal(size=(2, 3, n, d_k)) * rng.choice([1.0, 1e2, 3e3], size=(2, 3, n, 1))  # mild to huge scores
    k, v = rng.normal(size=(2, 3, n, d_k)), rng.normal(size=(2, 3, n, d_v))
    expected = functional.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)),
                                                       is_causal=causal).numpy()
    np.testing.assert_allclose(blockwise_attention(q, k, v, block_size, causal=causal), expected, rtol=1e-9,
                               atol=1e-12)
    if causal and block_size == 1:
        np.testing.assert_allclose(causal_decode(q, k, v), expected, rtol=1e-9, atol=1e-12)
