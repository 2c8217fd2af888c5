"""Conventions of other libraries that a failing result shows: right code, another contract (named, never blamed).

Correct code from elsewhere (PyTorch, Hugging Face, d2l, the annotated transformer, nanoGPT, tensor2tensor, ...)
fails this kit's tests where its contract differs from the kit's. Each function here recognises one such
convention from the observed values and returns the text that names it and says this kit's contract, or ""
(the test then keeps its own idea). They run in the grading process on plain arrays, never on student code.

``CATALOGUED`` adds the same sentence to a diagnosis whose catalogued mistake gives exactly a library's
outputs (the textbook softmax that gives NaN is scipy's and PyTorch's; rotate_half is Hugging Face's).
"""

from __future__ import annotations

from typing import Any

import numpy as np

CONVENTION = "a convention, not a misconception"

NAN_ROWS = ("NaN on exactly the slices with no allowed entry is PyTorch's softmax convention (torch.softmax after "
            "masked_fill(-inf), as nanoGPT does, and nn.MultiheadAttention), and that of scipy.special.softmax, "
            f"jax.nn.softmax and numpy-ml's Softmax: {CONVENTION}; this kit's contract is a row of zeros, without a "
            "RuntimeWarning, as F.scaled_dot_product_attention gives, so that a query that may see nothing "
            "contributes nothing")

FINITE_FILL = ("blocked scores set to a large finite number (-1e9 in the annotated transformer, -1e6 in d2l's "
               f"masked_softmax, torch.finfo(dtype).min in Hugging Face's GPT-2) leave a query with no allowed key "
               f"uniform weights: {CONVENTION}; this kit's contract is -inf, so that query gets all-zero weights "
               "and a zero context")

ADDED_FILL = ("a large finite number added to the blocked scores ((1 - mask) * -10000 in Hugging Face's BERT, -1e9 "
              "as an additive mask) moves every score of a query with no allowed key alike, which softmax ignores, "
              f"so that query keeps its unmasked weights: {CONVENTION}; this kit's contract is -inf, so that query "
              "gets all-zero weights and a zero context")

MASK_POLARITY = ("True for a key that may NOT be attended to is the boolean attn_mask of nn.MultiheadAttention and "
                 f"nn.Transformer: {CONVENTION}; this kit's contract is True where attention is allowed, as "
                 "F.scaled_dot_product_attention's boolean attn_mask")

CAUSAL_POLARITY = ("a causal mask True above the diagonal (torch.triu(ones, diagonal=1), the future keys) is the "
                   f"boolean attn_mask nn.MultiheadAttention and nn.Transformer take: {CONVENTION}; this kit's "
                   "contract is True where query i may attend to key j (j <= i), np.tril of ones")

FLOAT_CAUSAL = ("a float 1/0 lower triangle is nanoGPT's torch.tril(torch.ones(n, n)) buffer, used as "
                f"masked_fill(bias == 0, -inf): {CONVENTION}; this kit's contract is a boolean mask, True where "
                "query i may attend to key j (j <= i)")

AVERAGED_HEADS = ("weights averaged over the heads are nn.MultiheadAttention's default (average_attn_weights=True): "
                  f"{CONVENTION}; this kit's contract returns every head's weights, (..., n_heads, n_q, n_k), as "
                  "average_attn_weights=False does")

SINES_THEN_COSINES = ("every sine in the first half and every cosine in the second is the layout of tensor2tensor's "
                      f"get_timing_signal_1d and of GPT-NeoX: {CONVENTION}; this kit interleaves them, sin in column "
                      "2i and cos in column 2i+1 of pair i")

CLASSIC_DROPOUT = ("no rescaling while training and a scale of (1 - rate) at evaluation is the original dropout of "
                   f"Srivastava et al. (2014): {CONVENTION}; this kit's contract is inverted dropout, as PyTorch and "
                   "Keras do it: the kept entries divided by (1 - rate) while training, nothing done at evaluation")

HEADS_AFTER_POSITIONS = ("(..., n, n_heads, d_head), the heads after the positions, is the layout of FlashAttention "
                         f"and xformers (and of a reshape before its transpose): {CONVENTION}; this kit's contract "
                         "puts the head axis before the positions, (..., n_heads, n, d_head), so that each head is a "
                         "batch of (n, d_head) matrices")

ROTATE_HALF = ("pairing feature i with feature i + d/2 is rotate_half, the convention of GPT-NeoX and Hugging "
               f"Face's Llama (its weights are permuted to match): {CONVENTION}; this kit's contract rotates "
               "neighbours (x[..., 2i], x[..., 2i+1]), as RoFormer, GPT-J and Meta's Llama do")

GELU_ERF = ("the exact erf form 0.5 x (1 + erf(x / sqrt(2))) is the default of torch's nn.GELU() and F.gelu "
            f"(approximate='none'), as nanoGPT's MLP and BERT use it: {CONVENTION}; this kit's contract is the tanh "
            "approximation (GPT-2's gelu_new, F.gelu(approximate='tanh'))")

VALUE_SCALE = ("Hugging Face's GPT-2 _attn divides by value.size(-1) ** 0.5, which is sqrt(d_k) only when d_v = d_k, "
               f"as in GPT-2: {CONVENTION}; this kit's contract is sqrt(d_k), the size of a query and a key, "
               "whatever d_v is")

SHIFTED_PENALTY = ("a distance penalty counted from another origin (the last key at distance 0, or the original "
                   "ALiBi code's slope * j) differs from the kit's by one constant for every key, which softmax "
                   f"ignores: {CONVENTION}; this kit's contract is -slope * (n_keys - j), -slope for the last key, "
                   "so that the penalty is row n_keys of exercise 5's alibi_bias")

PADDING_POLARITY = ("True on the padding is PyTorch's key_padding_mask and fairseq's padding masks (True marks a key "
                    f"to ignore): {CONVENTION}; this kit's contract is True for a key that may be attended to, the "
                    "real tokens j < lengths[b]")

FORWARD_DIFFERENCE = ("a forward difference (f(x + eps) - f(x)) / eps is scipy.optimize.approx_fprime's (and "
                      f"check_grad's) default, accurate to eps: {CONVENTION}; this kit's contract is the central "
                      "difference (f(x + eps) - f(x - eps)) / (2 eps), accurate to eps^2")

CLIPPED_LOG = ("probabilities clipped to [eps, 1 - eps] before the log (Keras' categorical_crossentropy on "
               "probabilities clips at backend.epsilon() = 1e-7; scikit-learn's log_loss clips too) cap each "
               f"example's loss at -log(eps): {CONVENTION}; this kit's contract is the exact log-softmax of the "
               "logits, shifted - log(sum(exp(shifted))), unbounded, as F.cross_entropy and Keras' "
               "from_logits=True give")

TOTAL_VARIATION = ("importance as the total variation distance between the two output distributions, "
                   "0.5 * sum over classes of |p(sentence) - p(occluded)| (the change of output that Jain and "
                   "Wallace's 'Attention is not Explanation' measures), is never negative and counts every class: "
                   f"{CONVENTION}; this kit's contract is the signed fall of the predicted class's probability, "
                   "p(c | sentence) - p(c | occluded), negative where hiding the token makes c likelier")

EPS_DENOMINATOR = ("an eps added to the denominator, cov / (std_a * std_b + eps) (torchmetrics' spearman_corrcoef "
                   "and pearson_corrcoef add 1e-6), pulls every correlation slightly toward 0: "
                   f"{CONVENTION}; this kit's contract is the exact correlation of the ranks, so that the same order "
                   "gives exactly 1")

EPS_ZERO = ("an eps in the denominator (torchmetrics' spearman_corrcoef adds 1e-6) turns 0 / 0 into 0: "
            f"{CONVENTION}; this kit's contract is nan, since a constant has no order to correlate")

# Functions whose inputs a library's own version changes in place, by design: said after the kit's rule.
IN_PLACE = {
    "kv_cache_append": ("Hugging Face's DynamicCache.update grows the cache it is given in place, by design: "
                        f"{CONVENTION}; this kit's contract returns a new dict and leaves the caller's cache intact "
                        "(a step may be rolled back, a prefix shared between two continuations)"),
}

# Catalogued mistakes whose outputs are exactly a library's convention: the diagnosis says so after the hint.
CATALOGUED = {
    "masks-padding-inverted": PADDING_POLARITY,
    "attention-mask-inverted": MASK_POLARITY,
    "masks-causal-inverted": CAUSAL_POLARITY,
    "masks-causal-float": FLOAT_CAUSAL,
    "attention-mask-fill-1e9": FINITE_FILL,
    "softmax-large-negative-fill": FINITE_FILL,
    "masks-additive-minus-1e9": ADDED_FILL,
    "layer-gelu-exact-erf": GELU_ERF,
    "multihead-weights-averaged": AVERAGED_HEADS,
    "positional-concatenated-halves": SINES_THEN_COSINES,
    "backward-numerical-one-sided": FORWARD_DIFFERENCE,
    "distance-last-key-at-zero": SHIFTED_PENALTY,
    "softmax-masked-row-nan": NAN_ROWS,
    "softmax-unguarded-division": NAN_ROWS,
    "attention-inline-softmax": NAN_ROWS,
    "positional-rotary-rotate-half": ROTATE_HALF,
}


def catalogued(mistake_id: str) -> str:
    """The convention a catalogued mistake's outputs are (``""`` for a plain mistake)."""
    return CATALOGUED.get(mistake_id, "")


def with_convention(idea: str, convention: str) -> str:
    """``idea`` followed by ``convention`` when there is one."""
    return f"{idea}; {convention}" if convention else idea


def _floats(value: Any) -> np.ndarray | None:
    """``value`` as a floating array, or None when it is not one."""
    if not isinstance(value, np.ndarray) or value.dtype.kind != "f":
        return None
    return value


def nan_rows(value: Any, blocked: np.ndarray) -> str:
    """NAN_ROWS when ``value`` is NaN on exactly the ``blocked`` entries (bool, ``value``'s shape), else ""."""
    array = _floats(value)
    if array is None or array.shape != blocked.shape or not blocked.any():
        return ""
    return NAN_ROWS if np.all(np.isnan(array[blocked])) and np.all(np.isfinite(array[~blocked])) else ""


def uniform_rows(weights: Any, rows: np.ndarray) -> str:
    """FINITE_FILL when the weight rows ``rows`` (bool over the weights' leading axes) are uniform, else ""."""
    array = _floats(weights)
    if array is None or array.ndim < 1 or array.shape[:-1] != rows.shape or not rows.any():
        return ""
    chosen = array[rows]
    return FINITE_FILL if np.allclose(chosen, 1.0 / array.shape[-1], rtol=1e-5, atol=0.0) else ""


def mask_form(value: Any) -> str:
    """The convention of a causal mask built as floats (PyTorch's, Hugging Face's, nanoGPT's), else ""."""
    array = _floats(value)
    if array is None or array.ndim != 2 or array.shape[0] != array.shape[1] or array.shape[0] < 2:
        return ""
    lower = np.tril(np.ones(array.shape, dtype=bool))
    contract = ("this kit's contract is a boolean mask, True where query i may attend to key j (j <= i), which "
                "to_additive turns into 0 / -inf")
    if np.all(array[lower] == 0) and np.all(array[~lower] == -np.inf):
        return (f"yours is the additive float mask (0 on and below the diagonal, -inf above) of PyTorch's "
                f"nn.Transformer.generate_square_subsequent_mask: {CONVENTION}; {contract}")
    if np.all(array[lower] == 0) and np.all(array[~lower] == np.finfo(array.dtype).min):
        return (f"yours is the additive float mask (0, and torch.finfo(dtype).min above the diagonal) of Hugging "
                f"Face's _make_causal_mask: {CONVENTION}; {contract}")
    if np.all(array[lower] == 1) and np.all(array[~lower] == 0):
        return FLOAT_CAUSAL
    return ""


def finite_additive(value: Any, mask: np.ndarray) -> str:
    """The convention of an additive mask whose blocked entries are finfo(dtype).min (Hugging Face's), else ""."""
    array = _floats(value)
    if array is None or array.shape != np.shape(mask) or np.all(mask):
        return ""
    blocked = array[~np.asarray(mask, dtype=bool)]
    if not np.all(array[np.asarray(mask, dtype=bool)] == 0) or not np.all(blocked == blocked.flat[0]):
        return ""
    if blocked.flat[0] == np.finfo(array.dtype).min:
        return (f"torch.finfo(dtype).min where blocked is Hugging Face's convention ((1.0 - mask) * "
                f"torch.finfo(dtype).min in get_extended_attention_mask): {CONVENTION}; this kit's contract is "
                "-inf, so that a query with every key blocked gets all-zero weights")
    return ADDED_FILL if np.isfinite(blocked.flat[0]) and blocked.flat[0] <= -1e4 else ""


def init_scale(sample: Any, d_in: int, d_out: int) -> str:
    """The convention an ``init_weight`` sample of shape (d_in, d_out) follows (GPT-2's, PyTorch's, ...), else ""."""
    array = _floats(sample)
    if array is None or array.size < 1000:
        return ""
    std = float(np.std(array))
    uniform = float(np.max(np.abs(array))) <= np.sqrt(3.0) * std * 1.001  # a uniform sample never exceeds sqrt(3) std
    contract = f"this kit's contract is normal with std 1/sqrt(d_in) (here {1 / np.sqrt(d_in):.4g})"
    known = [
        (0.02, False, "GPT-2's and minGPT's / nanoGPT's init, normal with std 0.02"),
        (1 / np.sqrt(3 * d_in), True, "PyTorch's nn.Linear default, kaiming_uniform_(a=sqrt(5)): uniform in "
                                      "+-1/sqrt(d_in), std 1/sqrt(3 d_in)"),
        (np.sqrt(2.0 / (d_in + d_out)), False, "Xavier / Glorot normal init, std sqrt(2 / (d_in + d_out))"),
        (np.sqrt(6.0 / (d_in + d_out)) / np.sqrt(3.0), True, "Xavier / Glorot uniform init (nn.MultiheadAttention's "
                                                             "in_proj), uniform in +-sqrt(6 / (d_in + d_out))"),
        (np.sqrt(2.0 / d_in), False, "Kaiming / He normal init, std sqrt(2 / d_in)"),
    ]
    for expected, is_uniform, name in known:
        if is_uniform == uniform and abs(std - expected) <= 0.05 * expected:
            return f"yours is {name} (std {std:.4g}): {CONVENTION}; {contract}"
    return ""


def layer_norm_form(observed: Any, x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> str:
    """The convention of the annotated transformer's LayerNorm (unbiased std, eps added to it), else ""."""
    array = _floats(observed)
    if array is None or array.shape != np.broadcast_shapes(x.shape, np.shape(gamma)) or x.shape[-1] < 2:
        return ""
    centred = x - x.mean(axis=-1, keepdims=True)
    std = x.std(axis=-1, keepdims=True, ddof=1)
    contract = (f"{CONVENTION}; this kit's contract is PyTorch's nn.LayerNorm: (x - mean) / sqrt(var + eps) with "
                "the biased variance (ddof=0)")
    forms = [(gamma * centred / (std + eps) + beta, "the unbiased standard deviation (ddof=1, torch's x.std()) with "
              "eps added to it, as the annotated transformer's LayerNorm (a_2 * (x - mean) / (std + eps) + b_2) does"),
             (gamma * centred / np.sqrt(std**2 + eps) + beta, "the unbiased variance, the default of torch's x.var() "
              "(unbiased=True)")]
    for form, name in forms:
        if np.allclose(array, form, rtol=1e-5, atol=1e-6):
            return f"yours normalises with {name}: {contract}"
    return ""


def timing_signal(observed: Any, n_positions: int, d_model: int) -> str:
    """The convention of tensor2tensor's get_timing_signal_1d (sines, then cosines, other timescales), else ""."""
    array = _floats(observed)
    if array is None or array.shape != (n_positions, d_model) or d_model < 4:
        return ""
    half = d_model // 2
    position = np.arange(n_positions, dtype=np.float64)[:, None]
    increment = np.log(1.0e4) / max(half - 1, 1)
    scaled = position * np.exp(np.arange(half) * -increment)[None, :]
    signal = np.concatenate([np.sin(scaled), np.cos(scaled), np.zeros((n_positions, d_model % 2))], axis=1)
    interleaved = (f"{CONVENTION}; this kit's contract is Vaswani et al.'s table, interleaved: PE[p, 2i] = "
                   "sin(p / 10000**(2i/d_model)), PE[p, 2i+1] = cos(the same angle), the last column a sine for an "
                   "odd d_model")
    if n_positions > 2 and np.allclose(array, signal, rtol=1e-4, atol=1e-5):  # (positions 0, 1 show no timescale)
        return ("yours is tensor2tensor's get_timing_signal_1d: every sine in the first half, every cosine in the "
                "second, at timescales 1e4**(i / (d_model/2 - 1)), and a zero column for an odd d_model: "
                f"{interleaved}")
    with np.errstate(all="ignore"):  # the same layout at other frequencies (GPT-NeoX, fairseq)
        layout = (np.allclose(array[:, :half] ** 2 + array[:, half:2 * half] ** 2, 1.0, rtol=1e-4, atol=1e-5)
                  and np.allclose(array[0, :half], 0.0, atol=1e-6))
    return (f"yours puts every sine in the first half and every cosine in the second (the tensor2tensor and "
            f"fairseq layout): {interleaved}") if layout else ""


def gelu_erf(observed: Any, x: np.ndarray, params: dict, rtol: float = 1e-5) -> str:
    """GELU_ERF when ``observed`` is the feed-forward of ``x`` with the erf form of gelu, else ""."""
    array = _floats(observed)
    if array is None or array.shape != x.shape:
        return ""
    from math import erf

    hidden = np.asarray(x, dtype=np.float64) @ params["w_1"] + params["b_1"]
    hidden = 0.5 * hidden * (1.0 + np.vectorize(erf)(hidden / np.sqrt(2.0)))
    expected = hidden @ params["w_2"] + params["b_2"]
    return GELU_ERF if np.allclose(array, expected, rtol=rtol, atol=rtol * float(np.max(np.abs(expected)))) else ""


def value_scaled(weights: Any, q: np.ndarray, k: np.ndarray, d_v: int) -> str:
    """VALUE_SCALE when ``weights`` are softmax(q k^T / sqrt(d_v)) (no mask) and d_v differs from d_k, else ""."""
    array = _floats(weights)
    d_k = q.shape[-1]
    if array is None or d_v == d_k:
        return ""
    scores = np.asarray(q, dtype=np.float64) @ np.swapaxes(np.asarray(k, dtype=np.float64), -1, -2) / np.sqrt(d_v)
    if array.shape != scores.shape:
        return ""
    expected = np.exp(scores - scores.max(axis=-1, keepdims=True))
    expected /= expected.sum(axis=-1, keepdims=True)
    return VALUE_SCALE if np.allclose(array, expected, rtol=1e-4, atol=1e-7) else ""


def rotate_half(observed: Any, x: np.ndarray, positions: np.ndarray, base: float = 10000.0) -> str:
    """ROTATE_HALF when ``observed`` is x rotated with rotate_half's pairs (i, i + d/2), else ""."""
    array = _floats(observed)
    if array is None or array.shape != x.shape or x.shape[-1] % 2:
        return ""
    d = x.shape[-1]
    angles = np.asarray(positions, dtype=np.float64)[:, None] * base ** (-np.arange(0, d, 2) / d)
    turn_cos, turn_sin = np.cos(angles), np.sin(angles)
    a, b = x[..., : d // 2], x[..., d // 2:]
    rotated = np.concatenate([a * turn_cos - b * turn_sin, a * turn_sin + b * turn_cos], axis=-1)
    return ROTATE_HALF if np.allclose(array, rotated, rtol=1e-4, atol=1e-5) else ""


def _number(observed: Any) -> float | None:
    """``observed`` as one float, or None when it is not one number."""
    try:
        return float(observed)
    except (TypeError, ValueError):
        return None


def clipped_log(observed: Any, logits: np.ndarray, targets: np.ndarray) -> str:
    """CLIPPED_LOG when the loss ``observed`` is the cross-entropy of probabilities clipped at a usual eps, else ""."""
    value = _number(observed)
    if value is None:
        return ""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    rows = np.arange(len(targets))
    exact = -log_p[rows, targets].mean()
    for eps in (1e-7, 1e-8, 1e-10, 1e-12, 1e-15, np.finfo(np.float64).eps, np.finfo(np.float32).eps):
        clipped = -np.log(np.clip(np.exp(log_p), eps, 1 - eps))[rows, targets].mean()
        if not np.isclose(clipped, exact, rtol=1e-6) and np.isclose(value, clipped, rtol=1e-6, atol=0.0):
            return CLIPPED_LOG
    return ""


def total_variation(observed: Any, before: np.ndarray, after: np.ndarray) -> str:
    """TOTAL_VARIATION when ``observed[j]`` is 0.5 |before - after[j]| summed over classes, else "".

    ``before`` is the (n_classes,) output for the sentence, ``after`` the (n_tokens, n_classes) outputs with each
    token occluded in turn.
    """
    array = _floats(observed)
    if array is None or array.shape != after.shape[:1]:
        return ""
    distance = 0.5 * np.abs(after - before[None, :]).sum(axis=-1)
    signed = before.argmax()
    if np.allclose(distance, before[signed] - after[:, signed], rtol=1e-6, atol=1e-12):
        return ""  # on these inputs the two agree: nothing to tell apart
    return TOTAL_VARIATION if np.allclose(array, distance, rtol=1e-6, atol=1e-12) else ""


def eps_denominator(observed: Any, ranks_a: np.ndarray, ranks_b: np.ndarray) -> str:
    """EPS_DENOMINATOR when ``observed`` is the correlation of the ranks with a usual eps below, else ""."""
    value = _number(observed)
    if value is None:
        return ""
    da, db = ranks_a - ranks_a.mean(), ranks_b - ranks_b.mean()
    for ddof in (0, 1):
        n = len(da) - ddof
        cov, spread = (da * db).sum() / n, np.sqrt((da * da).sum() / n) * np.sqrt((db * db).sum() / n)
        for eps in (1e-6, 1e-8, 1e-7, 1e-5, 1e-12):
            if np.isclose(value, cov / (spread + eps), rtol=1e-9, atol=0.0) and not np.isclose(
                    value, cov / spread, rtol=1e-12, atol=0.0):
                return EPS_DENOMINATOR
    return ""
