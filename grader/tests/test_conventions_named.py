"""Correct code from elsewhere is told its convention, never a mistake (issue 34, point 4).

Each test plants the logic of a public library or tutorial (scipy's softmax, PyTorch's init and masks,
Hugging Face's finfo.min, nanoGPT's tril buffer, the annotated transformer's LayerNorm, tensor2tensor's
timing signal, llama's float32 rotary angles) in a copy of the reference, as an adapter of that code would
be, and checks that the first message of the test it fails names the convention and the kit's contract.
The adapters themselves (around the real code, with torch) are kept out of the kit.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from grader.curriculum import ROOT
from grader.mutants.report import run_tests

CONVENTION = "a convention, not a misconception"


def override(tmp_path, file: str, code: str):
    """A copy of solutions/ whose ``file`` ends with ``code`` (redefinitions of its public functions)."""
    target = tmp_path / "adapter"
    shutil.copytree(ROOT / "solutions", target, ignore=shutil.ignore_patterns("__pycache__"))
    path = target / file
    path.write_text(path.read_text(encoding="utf-8") + "\n\n" + code, encoding="utf-8")
    return target


def block(target, test_file: str, test: str) -> str:
    """The failure text of the test named ``test`` when ``test_file`` (under the root) runs on ``target``."""
    run = run_tests(ROOT / test_file, target, tb="short")
    assert run.exit_code == 1, run.output[-2000:]
    text = run.output.split("= FAILURES =", 1)[1]
    found = [part for part in text.split("\n____") if test in part.split("\n", 1)[0]]
    assert found, text[:3000]
    return found[0]


SCIPY_SOFTMAX = '''
def softmax(x, axis=-1):
    # scipy.special.softmax, numpy-ml's Softmax._fwd, jax.nn.softmax: NaN for an all -inf slice
    x = np.asarray(x)
    x_max = np.amax(x, axis=axis, keepdims=True)
    exp_x_shifted = np.exp(x - x_max)
    return exp_x_shifted / np.sum(exp_x_shifted, axis=axis, keepdims=True)
'''


def test_scipy_softmax_is_told_the_nan_convention_not_only_a_mistake(tmp_path):
    target = override(tmp_path, "softmax.py", SCIPY_SOFTMAX)
    text = block(target, "tests/test_01_softmax.py", "test_all_masked_row_gives_zeros")
    assert "scipy.special.softmax" in text and CONVENTION in text, text
    assert "Or right code with another convention" in text, text  # the diagnosis says it too
    hidden = block(target, "grader/hidden_tests/test_hidden_01_softmax.py", "test_float32_masked_slices_in_a_batch")
    assert "scipy.special.softmax" in hidden and CONVENTION in hidden, hidden


def test_a_float32_softmax_of_minus_1e300_is_told_the_precision(tmp_path):
    target = override(tmp_path, "softmax.py", SCIPY_SOFTMAX.replace("x = np.asarray(x)",
                                                                    "x = np.asarray(x, dtype=np.float32)"))
    text = block(target, "grader/hidden_tests/test_hidden_01_softmax.py", "test_length_one_slices")
    assert "a question of precision" in text and "beyond the range" in text, text
    assert "subtract the maximum" not in text, text


def test_causal_masks_built_as_floats_are_told_whose_convention(tmp_path):
    forms = {
        "generate_square_subsequent_mask": "np.triu(np.full((n, n), -np.inf), k=1)",
        "_make_causal_mask": "np.triu(np.full((n, n), np.finfo(np.float32).min, dtype=np.float32), k=1)",
        "torch.tril(torch.ones(n, n))": "np.tril(np.ones((n, n), dtype=np.float32))",
    }
    for index, (name, body) in enumerate(forms.items()):
        target = override(tmp_path / str(index), "masks.py", f"def causal_mask(n):\n    return {body}\n")
        text = block(target, "tests/test_04_masks.py", "test_causal_mask_is_a_square_boolean_array")
        assert name in text and CONVENTION in text and "not 0/1 floats" not in text, text
        hidden = block(target, "grader/hidden_tests/test_hidden_04_masks.py", "test_causal_mask_of_one_position")
        assert name in hidden and CONVENTION in hidden, hidden


def test_hugging_faces_finfo_min_additive_mask_is_named(tmp_path):
    target = override(tmp_path, "masks.py", """
def to_additive(mask, dtype=np.float64):
    # transformers' get_extended_attention_mask: (1.0 - mask) * torch.finfo(dtype).min
    return ((1.0 - np.asarray(mask).astype(dtype)) * np.finfo(dtype).min).astype(dtype)
""")
    text = block(target, "tests/test_04_masks.py", "test_to_additive_gives_zero_and_minus_infinity")
    assert "Hugging Face" in text and CONVENTION in text, text
    hidden = block(target, "grader/hidden_tests/test_hidden_04_masks.py", "test_to_additive_float32_and_float16")
    assert "Hugging Face" in hidden and CONVENTION in hidden, hidden


def test_a_large_finite_fill_is_named_in_multi_head_attention(tmp_path):
    # Inside multihead.py, as GPT-2's GPT2Attention._attn is inside its attention module (exercise 3 stays right).
    target = override(tmp_path, "multihead.py", """
def scaled_dot_product_attention(q, k, v, mask=None):
    # d2l's masked_softmax / GPT-2's _attn: blocked scores set to a large finite number, not -inf
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        mask = np.asarray(mask)
        scores = np.where(mask, scores, -1e6) if mask.dtype == bool else scores + np.maximum(mask, -1e6)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights
""")
    text = block(target, "tests/test_06_multihead.py", "test_fully_masked_query_gives_zero_weights")
    assert "large finite number" in text and CONVENTION in text, text
    hidden = block(target, "grader/hidden_tests/test_hidden_06_multihead.py",
                   "test_fully_masked_query_outputs_the_output_bias")
    assert "large finite number" in hidden and CONVENTION in hidden, hidden


def test_init_scales_of_pytorch_and_gpt2_are_named(tmp_path):
    forms = {
        "nn.Linear default": "rng.uniform(-1 / math.sqrt(d_in), 1 / math.sqrt(d_in), size=(d_out, d_in)).T.copy()",
        "GPT-2": "rng.normal(0.0, 0.02, size=(d_in, d_out))",
    }
    for index, (name, body) in enumerate(forms.items()):
        target = override(tmp_path / str(index), "projections.py", f"def init_weight(rng, d_in, d_out):\n"
                                                                     f"    return {body}\n")
        text = block(target, "tests/test_02_projections.py", "test_init_weight_mean_and_std")
        assert name in text and CONVENTION in text, text
        hidden = block(target, "grader/hidden_tests/test_hidden_02_projections.py", "test_init_weight_of_size_one")
        assert name in hidden and CONVENTION in hidden, hidden


def test_the_annotated_transformers_layer_norm_is_named(tmp_path):
    target = override(tmp_path, "layer.py", """
def layer_norm(x, gamma, beta, eps=1e-5):
    # the annotated transformer: a_2 * (x - mean) / (std + eps) + b_2 with torch's unbiased x.std()
    x = np.asarray(x)
    mean = x.mean(-1, keepdims=True)
    std = x.std(-1, keepdims=True, ddof=1)
    return gamma * (x - mean) / (std + eps) + beta
""")
    text = block(target, "tests/test_07_layer.py", "test_layer_norm_statistics_with_a_large_eps")
    assert "annotated transformer" in text and CONVENTION in text, text
    hidden = block(target, "grader/hidden_tests/test_hidden_07_layer.py", "test_layer_norm_float32_four_axes")
    assert "annotated transformer" in hidden and CONVENTION in hidden, hidden


def test_tensor2tensor_timing_signal_and_float32_rotary_angles_in_the_hidden_tests(tmp_path):
    target = override(tmp_path, "positional.py", """
def sinusoidal_encoding(n_positions, d_model):
    # tensor2tensor's get_timing_signal_1d: sines, then cosines; a zero column for an odd width
    num_timescales = d_model // 2
    increment = np.log(1.0e4) / max(num_timescales - 1, 1)
    inv_timescales = np.exp(np.arange(num_timescales) * -increment)
    scaled_time = np.arange(n_positions)[:, None] * inv_timescales[None, :]
    signal = np.concatenate([np.sin(scaled_time), np.cos(scaled_time)], axis=1)
    return np.pad(signal, [[0, 0], [0, d_model % 2]])


def rotary_embedding(x, positions=None, base=10000.0):
    # llama's precompute_freqs_cis: the angles in float32, the result in x's dtype
    x = np.asarray(x)
    n, d = x.shape[-2:]
    positions = np.arange(n) if positions is None else np.asarray(positions)
    angles = (positions[:, None] * base ** (-np.arange(0, d, 2) / d)).astype(np.float32)
    cos, sin = np.cos(angles), np.sin(angles)
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = a * sin + b * cos
    return out
""")
    hidden = "grader/hidden_tests/test_hidden_05_positional.py"
    text = block(target, hidden, "test_sinusoidal_single_position_and_column")
    assert "tensor2tensor" in text and CONVENTION in text, text
    text = block(target, hidden, "test_rotary_fractional_and_negative_positions")
    assert "a question of precision" in text, text


def test_torchs_default_erf_gelu_is_named_in_public_and_hidden_tests(tmp_path):
    target = override(tmp_path, "layer.py", """
def _gelu_tanh(x):
    # nanoGPT's MLP: nn.GELU(), torch's default, the exact erf form
    from math import erf
    return (0.5 * x * (1.0 + np.vectorize(erf)(x / np.sqrt(2.0)))).astype(x.dtype)


_ACTIVATIONS = {"relu": lambda x: np.maximum(x, 0), "gelu": _gelu_tanh}
""")
    text = block(target, "tests/test_07_layer.py", "test_feed_forward_gelu_uses_the_tanh_approximation")
    assert "nn.GELU()" in text and CONVENTION in text, text
    hidden = block(target, "grader/hidden_tests/test_hidden_07_layer.py", "test_feed_forward_float32_gelu_d_ff_one")
    assert "nn.GELU()" in hidden and CONVENTION in hidden, hidden


def test_a_table_is_called_tensor2tensors_only_when_its_timescales_are():
    from tests.conventions import timing_signal

    position = np.arange(5.0)[:, None]
    kit = position / 10000 ** (np.arange(0, 6, 2) / 6)  # the kit's frequencies, in the sines-then-cosines layout
    t2t = position * np.exp(np.arange(3) * -np.log(1.0e4) / 2)
    assert "get_timing_signal_1d" in timing_signal(np.hstack([np.sin(t2t), np.cos(t2t)]), 5, 6)
    blocks = timing_signal(np.hstack([np.sin(kit), np.cos(kit)]), 5, 6)
    assert "layout" in blocks and "get_timing_signal_1d" not in blocks, blocks
    one = timing_signal(np.array([[0.0, 0.0, 0.0, 1.0, 1.0, 1.0]]), 1, 6)  # position 0 shows no timescale
    assert "layout" in one and "get_timing_signal_1d" not in one, one
    assert timing_signal(np.hstack([np.sin(kit), np.cos(kit)])[:, [0, 3, 1, 4, 2, 5]], 5, 6) == ""  # the kit's


def test_gpt2s_scale_by_the_value_size_is_named_in_the_hidden_test(tmp_path):
    target = override(tmp_path, "attention.py", """
def scaled_dot_product_attention(q, k, v, mask=None):
    # Hugging Face's GPT2Attention._attn: attn_weights / value.size(-1) ** 0.5
    scores = q @ np.swapaxes(k, -1, -2) / v.shape[-1] ** 0.5
    if mask is not None:
        mask = np.asarray(mask)
        scores = np.where(mask, scores, -np.inf) if mask.dtype == bool else scores + mask
    weights = softmax(scores)
    return weights @ v, weights
""")
    text = block(target, "grader/hidden_tests/test_hidden_03_attention.py", "test_single_query_long_keys_float32")
    assert "value.size(-1) ** 0.5" in text and CONVENTION in text, text


TIKTOKEN_ENCODE = '''
def bpe_encode(text, merges):
    # tiktoken's encoder (and GPT-2's): join the adjacent pair whose joined bytes have the lowest rank, until none
    # is a token; the rank of a piece is its id.
    rank = {}
    for token, piece in enumerate(_vocabulary(np.asarray(merges).reshape(-1, 2))):
        rank.setdefault(piece, token)
    parts = [bytes([b]) for b in text.encode("utf-8")]
    while True:
        ranked = [(rank[a + b], j) for j, (a, b) in enumerate(zip(parts, parts[1:])) if a + b in rank]
        if not ranked:
            return np.array([rank[piece] for piece in parts], dtype=np.int64)
        _, j = min(ranked)
        parts[j:j + 2] = [parts[j] + parts[j + 1]]
'''

GREEDY_ENCODE = '''
def bpe_encode(text, merges):
    # A mistake: at each place the longest piece of the vocabulary that matches the text.
    pieces = {piece: token for token, piece in enumerate(_vocabulary(np.asarray(merges).reshape(-1, 2)))}
    data, ids, at = text.encode("utf-8"), [], 0
    while at < len(data):
        size = max(size for size in range(1, len(data) - at + 1) if data[at:at + size] in pieces)
        ids.append(pieces[data[at:at + size]])
        at += size
    return np.array(ids, dtype=np.int64)
'''


def test_tiktokens_byte_rank_is_named_and_a_greedy_longest_match_is_not_called_it(tmp_path):
    """On 'abc' both give the longest piece: the test's other texts tell them apart before a convention is named."""
    first = "test_encode_applies_the_merges_in_their_learned_order"
    text = block(override(tmp_path / "tiktoken", "tokenization.py", TIKTOKEN_ENCODE), "tests/test_15_tokenization.py",
                 first)
    assert "tiktoken" in text and CONVENTION in text, text
    greedy = block(override(tmp_path / "greedy", "tokenization.py", GREEDY_ENCODE), "tests/test_15_tokenization.py",
                   first)
    assert "tiktoken" not in greedy and CONVENTION not in greedy, greedy


# Adapters of a blind round (issue 34, point 4): the first message of each names its library's convention, in
# the public suite or, for the padding mask, the hidden one (the diagnosis carries it there).
KERAS_CROSS_ENTROPY = '''
_exact_cross_entropy = cross_entropy


def cross_entropy(logits, targets):
    loss, grad = _exact_cross_entropy(logits, targets)  # its checks and its gradient
    logits = np.asarray(logits, dtype=float)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    p = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
    p = np.clip(p, 1e-7, 1 - 1e-7)  # keras.backend.epsilon(): categorical_crossentropy(from_logits=False)
    return float(-np.mean(np.log(p[np.arange(len(targets)), np.asarray(targets)]))), grad
'''

TOTAL_VARIATION_OCCLUSION = '''
def occlusion_importance(predict, tokens, replacement):
    tokens = np.asarray(tokens)
    seq = len(tokens)
    batch = np.repeat(tokens[None], seq, axis=0)
    batch[np.arange(seq), np.arange(seq)] = replacement
    probabilities = np.asarray(predict(np.concatenate([tokens[None], batch])), dtype=np.float64)
    return 0.5 * np.abs(probabilities[1:] - probabilities[0]).sum(axis=-1)  # total variation distance
'''

TORCHMETRICS_SPEARMAN = '''
def rank_correlation(a, b):
    rank_a, rank_b = _average_ranks(as_float_array("a", a)), _average_ranks(as_float_array("b", b))
    da, db = rank_a - rank_a.mean(), rank_b - rank_b.mean()
    eps = 1e-6  # torchmetrics.functional.spearman_corrcoef
    return float(np.clip((da * db).mean() / (np.sqrt((da * da).mean()) * np.sqrt((db * db).mean()) + eps), -1, 1))
'''


# Ports a blind round found called mistakes (each the library's own code, in numpy).

BERT_ADDED_FILL = '''
_sdpa = scaled_dot_product_attention


def scaled_dot_product_attention(q, k, v, mask=None):
    """Hugging Face BERT: extended_attention_mask = (1.0 - mask) * -10000.0, added to the scores."""
    if mask is not None and np.asarray(mask).dtype == np.bool_:
        mask = (1.0 - np.asarray(mask, dtype=np.float64)) * -10000.0
    return _sdpa(q, k, v, mask)
'''

MHA_MASK_POLARITY = '''
_sdpa = scaled_dot_product_attention


def scaled_dot_product_attention(q, k, v, mask=None):
    """nn.MultiheadAttention's attn_mask: a True entry means the position is NOT allowed to attend."""
    if mask is not None and np.asarray(mask).dtype == np.bool_:
        mask = ~np.asarray(mask)  # blocked where True: the kit's function is given the keys it may see
    return _sdpa(q, k, v, mask)
'''

TORCH_CAUSAL_MASK = '''
def causal_mask(n):
    """PyTorch: torch.triu(torch.ones(sz, sz, dtype=torch.bool), diagonal=1) (True = may not attend)."""
    n = require_positive_int("n", n)
    return np.triu(np.ones((n, n), dtype=bool), k=1)
'''

FLASH_LAYOUT = '''
def split_heads(x, n_heads):
    """FlashAttention / xformers layout: (batch, seq, heads, head_dim), no transpose."""
    x = np.asarray(x)
    require_ndim("x", x, 2, "(..., n, d_model)")
    n_heads = require_positive_int("n_heads", n_heads)
    *batch, n, d_model = x.shape
    d_head = require_divisible(d_model, n_heads)
    return x.reshape(*batch, n, n_heads, d_head)


def merge_heads(x):
    """Inverse of the (batch, seq, heads, head_dim) split."""
    x = np.asarray(x)
    require_ndim("x", x, 3, "(..., n, n_heads, d_head)")
    *batch, n, n_heads, d_head = x.shape
    return x.reshape(*batch, n, n_heads * d_head)
'''

MHA_AVERAGED_WEIGHTS = '''
_mha = multi_head_attention


def multi_head_attention(x, params, n_heads, mask=None, kv=None):
    """nn.MultiheadAttention(need_weights=True): the attention weights averaged over the heads."""
    output, weights = _mha(x, params, n_heads, mask, kv)
    return output, weights.mean(axis=-3)
'''

SRIVASTAVA_DROPOUT = '''
def dropout(x, rate, rng, training=True):
    """Original dropout (Srivastava et al. 2014): drop at training without rescaling; scale by p = 1 - rate at test."""
    if not 0 <= rate < 1:
        raise ValueError(f"rate must lie in [0, 1), got {rate}")
    x = as_float_array("x", x)
    if rate == 0:
        return x
    if not training:
        return (x * (1.0 - rate)).astype(x.dtype)
    keep = rng.random(x.shape) >= rate
    return np.where(keep, x, 0).astype(x.dtype)
'''

ADAPTERS = {
    "Hugging Face BERT's added -10000": (
        "attention.py", "tests/test_03_attention.py", "test_fully_blocked_query_gives_zeros", "BERT", BERT_ADDED_FILL),
    "nn.MultiheadAttention's mask polarity": (
        "attention.py", "tests/test_03_attention.py", "test_masked_keys_get_zero_weight", "nn.MultiheadAttention",
        MHA_MASK_POLARITY),
    "PyTorch's causal attn_mask": (
        "masks.py", "tests/test_04_masks.py", "test_causal_mask_allows_the_diagonal", "torch.triu", TORCH_CAUSAL_MASK),
    "FlashAttention's layout": (
        "multihead.py", "tests/test_06_multihead.py", "test_split_heads_shape", "FlashAttention", FLASH_LAYOUT),
    "nn.MultiheadAttention's averaged weights": (
        "multihead.py", "tests/test_06_multihead.py", "test_output_and_weight_shapes", "average_attn_weights",
        MHA_AVERAGED_WEIGHTS),
    "Srivastava's dropout": (
        "layer.py", "tests/test_07_layer.py", "test_dropout_is_the_identity_in_evaluation_and_at_rate_zero",
        "Srivastava", SRIVASTAVA_DROPOUT),
    "Keras' clipped cross-entropy": (
        "training.py", "tests/test_09_training.py", "test_cross_entropy_is_stable_for_large_logits", "Keras",
        KERAS_CROSS_ENTROPY),
    "Jain and Wallace's total variation distance": (
        "explain.py", "tests/test_10_explain.py", "test_occlusion_measures_the_original_class", "total variation",
        TOTAL_VARIATION_OCCLUSION),
    "Jain and Wallace's total variation distance, hidden": (
        "explain.py", "grader/hidden_tests/test_hidden_10_explain.py",
        "test_occlusion_with_many_classes_and_a_long_sentence", "total variation", TOTAL_VARIATION_OCCLUSION),
    "torchmetrics' spearman_corrcoef": (
        "explain.py", "tests/test_10_explain.py", "test_rank_correlation_of_orders_without_ties", "torchmetrics",
        TORCHMETRICS_SPEARMAN),
    "torchmetrics' spearman_corrcoef, hidden": (
        "explain.py", "grader/hidden_tests/test_hidden_10_explain.py",
        "test_rank_correlation_of_two_values_ints_and_heavy_ties", "torchmetrics", TORCHMETRICS_SPEARMAN),
    "torch's LinearBackward": (
        "backward.py", "tests/test_08_backward.py", "test_linear_backward_shapes",
        "PyTorch's nn.Linear", """
def linear_backward(grad_out, x, weight):
    grad_out, x, weight = (np.asarray(a, dtype=float) for a in (grad_out, x, weight))
    d_in, d_out = weight.shape
    grad_output = grad_out.reshape(-1, d_out)
    inp = x.reshape(-1, d_in)
    grad_input = grad_out @ weight.T
    grad_weight = grad_output.T @ inp          # torch: grad_output.t().mm(input) -> (out_features, in_features)
    grad_bias = grad_output.sum(0)
    return grad_input, grad_weight, grad_bias
"""),
    "scipy's approx_fprime": (
        "backward.py", "tests/test_08_backward.py", "test_numerical_gradient_is_the_central_difference",
        "approx_fprime", """
def numerical_gradient(f, x, eps=1e-6):
    if not eps > 0:
        raise ValueError(f"eps must be positive, got {eps}")
    if not callable(f):
        raise ValueError(f"f must be a function of an array, got {type(f).__name__}")
    xk = np.array(x, dtype=np.float64)
    f0 = f(xk.copy())
    grad = np.zeros(xk.shape, dtype=np.float64)
    ei = np.zeros(xk.shape, dtype=np.float64)
    for index in np.ndindex(xk.shape):
        ei[index] = 1.0
        d = eps * ei
        grad[index] = (f(xk + d) - f0) / d[index]
        ei[index] = 0.0
    return grad
"""),
    "nanoGPT's _init_weights": (
        "training.py", "tests/test_09_training.py", "test_init_model_reference_values",
        "nanoGPT", """
def init_model(rng, vocab_size, d_model, n_heads):
    vocab_size = require_positive_int("vocab_size", vocab_size)
    d_model = require_positive_int("d_model", d_model)
    embedding = rng.normal(0.0, 0.02, size=(vocab_size, d_model))   # torch.nn.init.normal_(w, mean=0.0, std=0.02)
    attention = init_multi_head(rng, d_model, n_heads)
    return {
        "embedding": embedding,
        "attention": attention,
        "w_out": rng.normal(0.0, 0.02, size=(d_model, vocab_size)),
        "b_out": np.zeros(vocab_size),
    }
"""),
    "rank_bm25's get_top_n": (
        "retrieval.py", "tests/test_14_retrieval.py", "test_top_k_keeps_ties_in_index_order",
        "rank_bm25", """
def top_k(similarity, k):
    similarity = as_float_array("similarity", similarity)
    if similarity.ndim != 2:
        raise ValueError(f"similarity must have shape (n_queries, n_chunks), got {similarity.shape}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= similarity.shape[1]:
        raise ValueError(f"k must be an integer from 1 to n_chunks = {similarity.shape[1]}, got {k!r}")
    return np.stack([np.argsort(scores)[::-1][:k] for scores in similarity]).astype(np.int64)
"""),
    "PyTorch's key_padding_mask": (
        "masks.py", "grader/hidden_tests/test_hidden_04_masks.py", "test_padding_mask_single_sequence",
        "key_padding_mask", """
def padding_mask(lengths, max_len):
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or not np.issubdtype(lengths.dtype, np.integer):
        raise ValueError(f"lengths must be a 1-D array of integers (batch,), got shape {lengths.shape}")
    if not isinstance(max_len, (int, np.integer)) or isinstance(max_len, bool) or max_len <= 0:
        raise ValueError(f"max_len must be a positive integer, got {max_len!r}")
    if np.any(lengths < 0) or np.any(lengths > max_len):
        raise ValueError(f"lengths must lie in [0, max_len={max_len}], got {lengths.tolist()}")
    return (np.arange(max_len)[None, :] >= lengths[:, None])[:, None, :]
"""),
}


@pytest.mark.parametrize("library", sorted(ADAPTERS))
def test_an_adapter_is_told_its_libraries_convention(library: str, tmp_path):
    module, test_file, test, word = ADAPTERS[library][:4]
    text = block(override(tmp_path, module, ADAPTERS[library][4]), test_file, test)
    assert word in text and CONVENTION in text, text


EFFICIENT_ADAM = '''
def adam_step(params, grads, state, lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8):
    # Kingma & Ba's "efficient" form (TF1's AdamOptimizer): the bias corrections folded into the step size.
    t = 1 if state is None else int(state["step"]) + 1
    m, v = ({}, {}) if state is None else (state["m"], state["v"])
    lr_t = lr * np.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)

    def walk(p, g, m, v):
        new_p, new_m, new_v = {}, {}, {}
        for key, value in p.items():
            if isinstance(value, dict):
                new_p[key], new_m[key], new_v[key] = walk(value, g[key], m.get(key, {}), v.get(key, {}))
                continue
            new_m[key] = beta1 * m.get(key, 0.0) + (1 - beta1) * g[key]
            new_v[key] = beta2 * v.get(key, 0.0) + (1 - beta2) * g[key] ** 2
            new_p[key] = value - lr_t * new_m[key] / (np.sqrt(new_v[key]) + eps)
        return new_p, new_m, new_v

    new_params, new_m, new_v = walk(params, grads, m, v)
    return new_params, {"step": t, "m": new_m, "v": new_v}
'''


def test_adams_efficient_form_is_named_on_the_first_step(tmp_path):
    text = block(override(tmp_path, "training.py", EFFICIENT_ADAM), "tests/test_09_training.py",
                 "test_adam_first_step")
    assert "efficient" in text and "Kingma" in text and CONVENTION in text, text


def test_the_clip_divergence_and_eps_recognisers_name_only_what_they_explain():
    from tests.conventions import clipped_log, eps_denominator, total_variation

    logits = np.array([[1000.0, 999.0, 990.0], [-1000.0, -1002.0, -1001.0], [5000.0, 0.0, -5000.0]])
    targets = np.array([1, 0, 2])
    shifted = logits - logits.max(axis=-1, keepdims=True)
    p = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
    rows = np.arange(3)
    exact = float(-np.mean((shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True)))[rows, targets]))
    keras = float(-np.mean(np.log(np.clip(p, 1e-7, 1 - 1e-7))[rows, targets]))
    assert "Keras" in clipped_log(keras, logits, targets)
    for other in (exact, float("inf"), float("nan"), keras * 1.01, "a string"):  # right, overflowed, off, no number
        assert clipped_log(other, logits, targets) == "", other

    before = np.array([0.2, 0.7, 0.1])
    after = np.array([[0.1, 0.75, 0.15], [0.5, 0.3, 0.2], [0.2, 0.7, 0.1]])  # c rises in the first row
    distance = 0.5 * np.abs(after - before).sum(axis=-1)
    assert "total variation" in total_variation(distance, before, after)
    signed = before[1] - after[:, 1]
    for other in (signed, np.abs(signed), -signed, distance[:2]):  # the contract, its absolute value, a sign flip
        assert total_variation(other, before, after) == "", other

    ranks_a, ranks_b = np.array([0.0, 2.0, 1.0, 3.0, 4.0]), np.array([1.0, 0.0, 2.0, 4.0, 3.0])
    da, db = ranks_a - ranks_a.mean(), ranks_b - ranks_b.mean()
    rho = float((da * db).sum() / np.sqrt((da * da).sum() * (db * db).sum()))
    torchmetrics = float((da * db).mean() / (np.sqrt((da * da).mean()) * np.sqrt((db * db).mean()) + 1e-6))
    assert "torchmetrics" in eps_denominator(torchmetrics, ranks_a, ranks_b)
    for other in (rho, rho * (1 - 1e-3), float(np.float32(rho)), float("nan")):  # right, off, float32, undefined
        assert eps_denominator(other, ranks_a, ranks_b) == "", other


TORCH_FLOAT32_CROSS_ENTROPY = '''
_checked_cross_entropy = cross_entropy


def cross_entropy(logits, targets):
    _checked_cross_entropy(logits, targets)  # its checks
    x = np.asarray(logits).astype(np.float32)  # torch.from_numpy(logits).float()
    m = x.max(axis=-1, keepdims=True)
    log_probs = x - (m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True)))  # F.log_softmax
    rows, n = np.arange(len(x)), len(x)
    grad = np.exp(log_probs)
    grad[rows, targets] -= np.float32(1.0)
    return float(-log_probs[rows, targets].mean()), grad / np.float32({n})
'''


def test_float32_cross_entropy_near_1e4_is_told_the_precision_and_a_float32_mistake_is_not(tmp_path):
    text = block(override(tmp_path / "right", "training.py", TORCH_FLOAT32_CROSS_ENTROPY.format(n="n")),
                 "grader/hidden_tests/test_hidden_09_training.py", "test_cross_entropy_of_very_negative_logits")
    revisit = text.split("revisit:")[-1]
    assert "what the right formula gives computed in float32" in revisit and "float64" in revisit, text
    # The same float32 code with the gradient not divided by n: a mistake, never called a question of precision.
    text = block(override(tmp_path / "mistake", "training.py", TORCH_FLOAT32_CROSS_ENTROPY.format(n="1")),
                 "grader/hidden_tests/test_hidden_09_training.py", "test_cross_entropy_of_very_negative_logits")
    assert "question of precision" not in text, text


FLOAT32_ATTEND_STEP = '''
_float64_attend_step = attend_step


def attend_step(q_t, cache, *args, **kwargs):  # computed in float32, torch's default dtype
    cache = {key: np.asarray(value, dtype=np.float32) for key, value in cache.items()}
    return _float64_attend_step(np.asarray(q_t, dtype=np.float32), cache, *args, **kwargs)
'''


def test_a_blame_on_a_float32_dependency_keeps_the_precision_it_shows(tmp_path):
    # causal_decode is right, but goes through an attend_step in float32: the first message sends the student to
    # attend_step, and says that what differs is a question of precision (not a formula to rewrite).
    text = block(override(tmp_path, "decoding.py", FLOAT32_ATTEND_STEP),
                 "grader/hidden_tests/test_hidden_11_decoding.py", "test_causal_decode_of_one_position")
    assert "First fix attend_step()" in text, text
    revisit = text.split("revisit:")[-1]
    assert "fix attend_step() first" in revisit and "a question of precision" in revisit, text


FAISS_TOP_K = '''
def top_k(similarity, k):
    # faiss' search: -1 for the neighbours an index too small cannot give
    similarity = np.asarray(similarity, dtype=np.float64)
    n = similarity.shape[1]
    order = np.argsort(-similarity, axis=1, kind="stable")[:, :min(k, n)]
    return np.concatenate([order, -np.ones((len(order), max(0, k - n)), dtype=order.dtype)], axis=1)
'''


def test_faiss_padding_is_told_as_its_convention(tmp_path):
    text = block(override(tmp_path, "retrieval.py", FAISS_TOP_K), "tests/test_14_retrieval.py",
                 "test_top_k_rejects_a_bad_k")
    assert "faiss" in text and CONVENTION in text, text
