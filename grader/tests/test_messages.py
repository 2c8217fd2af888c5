"""Messages that used to send a student the wrong way (issue 25): each planted in a copy of the reference.

A convention difference (float32 precision, an additive float mask, ALiBi up to a constant per row, the
tensor2tensor / GPT-NeoX layout) gets a message about the convention, never a misconception; a crash is
blamed on the function that crashed; a hint describes the mistake, not the rule.
"""

from __future__ import annotations

import os
import shutil

from grader.curriculum import ROOT
from grader.curriculum import load as load_curriculum
from grader.mutants.report import run_tests


def plant(tmp_path, file: str, *edits: tuple[str, str]):
    """A copy of solutions/ with each ``(replace, with)`` edit (whose text must occur once) made in ``file``."""
    target = tmp_path / "student"
    shutil.copytree(ROOT / "solutions", target, ignore=shutil.ignore_patterns("__pycache__"))
    path = target / file
    source = path.read_text(encoding="utf-8")
    for replace, with_ in edits:
        assert source.count(replace) == 1, replace
        source = source.replace(replace, with_)
    path.write_text(source, encoding="utf-8")
    return target


def failures_of(target, exercise: str, *select: str) -> str:
    """The FAILURES section of ``pytest -m <exercise>`` on ``target`` (only tests whose name has ``select``)."""
    run = run_tests(ROOT / load_curriculum().exercise(exercise).test_file, target, tb="short")
    assert run.exit_code == 1, run.output[-2000:]
    # (without pytest's short summary after the last failure: under CI=true it repeats every message in full)
    text = run.output.split("= FAILURES =", 1)[1].split("short test summary info", 1)[0]
    if select:
        blocks = text.split("\n____")
        text = "\n____".join(block for block in blocks if any(name in block.split("\n", 1)[0] for name in select))
    return text


def revisit_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith("revisit:")]


def test_rotary_in_float32_is_told_the_precision_not_that_it_ignores_its_arguments(tmp_path):
    # llama / flash-attn: the angles and their cos and sin in float32, for float64 x.
    target = plant(tmp_path, "positional.py",
                   ("    cos, sin = np.cos(angles), np.sin(angles)",
                    "    angles = angles.astype(np.float32)\n    cos, sin = np.cos(angles), np.sin(angles)"))
    text = failures_of(target, "positional")
    assert "rotary" in text, text[:3000]
    for line in revisit_lines(text):
        assert "ignores" not in line and "returns x unchanged" not in line, line
    # Float64 values that are not float32 numbers (float32 angles, float64 x): precision is named with the
    # contract, beside the other reading (a tiny term of the formula), neither claimed.
    assert any(("a question of precision, not of the formula" in line or "only at float32's precision" in line)
               and "contract is float64" in line for line in revisit_lines(text)), text[:3000]


def test_a_float_causal_mask_is_told_the_convention_not_swapped_polarity(tmp_path):
    target = plant(tmp_path, "masks.py", ("    return np.tril(np.ones((n, n), dtype=bool))",
                                          "    return np.triu(np.full((n, n), -np.inf), k=1)"))
    text = failures_of(target, "masks", "test_causal_mask_blocks_the_future")
    assert "True/False swapped" not in text and "np.triu" not in text.split("observed:", 1)[1].split("\n")[0]
    assert "an additive mask (PyTorch's float attn_mask convention)" in text, text[:3000]
    assert "a convention, not a misconception" in text


def test_the_original_alibi_bias_is_told_the_convention(tmp_path):
    # slope * j: the key's position, equal to -slope * |i - j| up to slope * i on and below the diagonal.
    target = plant(tmp_path, "positional.py", (
        "    return -slopes[:, None, None] * distance",
        "    return slopes[:, None, None] * np.broadcast_to(positions[None, :], (n, n))"))
    text = failures_of(target, "positional", "alibi")
    assert "alibi" in text, text[:3000]
    for line in revisit_lines(text):
        assert "mind the minus sign" not in line and "not i - j" not in line, line
    assert any("equals the kit's bias up to a constant per row" in line for line in revisit_lines(text))


def test_i_minus_j_without_the_absolute_value_still_gets_its_hint(tmp_path):
    # Equal to the kit's bias on the causal part: not the original ALiBi form, the |i - j| hint stands.
    target = plant(tmp_path, "positional.py", ("    distance = np.abs(positions[:, None] - positions[None, :])",
                                               "    distance = positions[:, None] - positions[None, :]"))
    text = failures_of(target, "positional", "test_alibi_is_symmetric")
    assert "use the distance |i - j|, not i - j" in text and "up to a constant per row" not in text


def test_the_tensor2tensor_layout_is_told_the_convention_not_the_pair_index(tmp_path):
    target = plant(tmp_path, "positional.py", (
        "    return np.where(columns % 2 == 0, np.sin(angles), np.cos(angles))",
        "    half = d_model // 2\n"
        "    increment = np.log(10000.0) / max(half - 1, 1)\n"
        "    timescales = np.exp(np.arange(half) * -increment)\n"
        "    scaled = positions * timescales[None, :]\n"
        "    return np.concatenate([np.sin(scaled), np.cos(scaled)], axis=1)"))
    text = failures_of(target, "positional", "test_sinusoidal_pairs_share_a_frequency")
    assert "2*(j//2)" not in text
    assert "(the tensor2tensor / GPT-NeoX layout)" in text and "a convention, not a misconception" in text


def test_the_log_of_an_underflowed_probability_is_not_told_to_subtract_the_maximum(tmp_path):
    # CS231n's softmax_loss: shifted by each row's maximum, then the log of exp(shifted) / sum.
    target = plant(tmp_path, "training.py", (
        "    log_total = np.log(np.exp(shifted).sum(axis=-1, keepdims=True))\n"
        "    log_probs = shifted - log_total  # (n, n_classes)",
        "    probs = np.exp(shifted) / np.sum(np.exp(shifted), axis=1, keepdims=True)\n"
        "    log_probs = np.log(probs)"))
    text = failures_of(target, "training")
    assert "Diagnosis (a family of mistakes: log of an underflowed probability)" in text, text[:3000]
    for line in revisit_lines(text):
        assert "subtract each row's maximum before exp (log-sum-exp)" not in line, line


def test_a_crash_is_blamed_on_the_function_that_crashed(tmp_path):
    # softmax_backward is wrong (p * g) and linear_backward crashes on batched x: the multi-head backward,
    # which relies on both, crashes in linear_backward, so that is what to fix first.
    target = plant(tmp_path, "backward.py",
                   ("    return weights * (grad_weights - coupled)", "    return weights * grad_weights"),
                   ("    rows_in, rows_out = x.reshape(-1, d_in), grad_out.reshape(-1, d_out)",
                    "    rows_in, rows_out = x, grad_out"))
    text = failures_of(target, "backward", "multi_head_attention_backward")
    # The failures' blocks only: pytest's closing summary quotes other tests' first lines.
    blocks = text.split("short test summary info")[0].split("\n____")
    crashed = [block for block in blocks if "at backward.py line" in block]
    assert len(crashed) == 2 and all("grad_weight = rows_in.T @ rows_out" in block for block in crashed), text[:3000]
    for block in crashed:
        assert "First fix softmax_backward()" not in block and "fix softmax_backward() first" not in block, block
        assert "First fix linear_backward()" in block, block


def test_the_occlusion_hint_describes_the_mistake_not_the_rule(tmp_path):
    target = plant(tmp_path, "explain.py", (
        "    return original[predicted] - occluded[:, predicted]",
        "    return original.max() - occluded.max(axis=-1)"))
    text = failures_of(target, "explain", "occlusion")
    assert "the class predicted AFTER occlusion, not on" not in text
    assert "yours measures the drop on whatever class the model predicts after occlusion" in text, text[:3000]


def test_a_class_taken_after_each_occlusion_is_never_told_a_shift_or_class_0(tmp_path):
    # Each occluded sentence's own class, before and after (a blind round): on one input that is class 0's drop,
    # on the model that attends by position it is no shift. Named where it alone explains the result, else nothing.
    target = plant(tmp_path, "explain.py", (
        "    return original[predicted] - occluded[:, predicted]",
        "    c = occluded.argmax(axis=-1)\n    return original[c] - occluded[np.arange(seq), c]"))
    text = failures_of(target, "explain", "occlusion")
    assert "test_occlusion_replaces_without_shifting" in text, text[:3000]
    assert "deleting it shifts" not in text and "measured on class 0" not in text, text[:3000]
    shifting = text.split("test_occlusion_replaces_without_shifting", 1)[1].split("\n____", 1)[0]
    assert "whatever class the model predicts after occlusion" in shifting, shifting


def test_a_fixed_padding_token_is_told_the_replacement_argument(tmp_path):
    target = plant(tmp_path, "explain.py", (
        "    batch[np.arange(seq), np.arange(seq)] = replacement  # replaced in place: no position shifts",
        "    batch[np.arange(seq), np.arange(seq)] = 0"))
    text = failures_of(target, "explain", "occlusion")
    assert "yours replaced token j with token 0, not with `replacement` (token 3 here)" in text, text[:3000]
    assert "deleting it shifts" not in text, text[:3000]


def test_a_mask_not_passed_on_is_told_so_by_the_masked_reference_values(tmp_path):
    target = plant(tmp_path, "layer.py", ('multi_head_attention(h, params["attention"], n_heads, mask)[0]',
                                          'multi_head_attention(h, params["attention"], n_heads, None)[0]'))
    text = failures_of(target, "layer", "test_reference_values")
    lines = revisit_lines(text)
    assert len(lines) == 3, text[:3000]  # the three masked probes, and none of the others
    assert all(line.startswith("revisit:  yours is this layer computed without its mask") for line in lines), lines


def test_a_sample_variance_in_layer_norm_backward_is_told_the_forward_pass_variance(tmp_path):
    # torch.var divides by n - 1 by default (a blind round): told only the three terms the student had right, and
    # grad_gamma was told grad_x's formula.
    target = plant(tmp_path, "backward.py", (
        "inv_std = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + eps)",
        "inv_std = 1.0 / np.sqrt(x.var(axis=-1, ddof=1, keepdims=True) + eps)"))
    lines = revisit_lines(failures_of(target, "backward", "test_layer_norm_backward_shapes"))  # the gate's
    assert lines and all("not by d - 1" in line for line in lines), lines
    assert any("grad_gamma = grad_out * xhat" in line for line in lines), lines


def test_a_transposed_weight_is_not_told_about_x_T_alone(tmp_path):
    target = plant(tmp_path, "projections.py", ("    out = x @ weight  # (..., d_in) @ (d_in, d_out) -> (..., d_out)",
                                                "    out = x @ weight.T"))
    text = failures_of(target, "projections", "test_linear_shape_with_batch_axes")
    assert "no transpose of x or of weight is needed" in text, text[:3000]


# ---------------------------------------------------------------- conventions of code from elsewhere (issue 34)


def first_block(text: str) -> str:
    """The first failure's block of a FAILURES section (its diagnosis, if any, included)."""
    return text.split("\n____")[1]  # (the section starts with the rest of pytest's "= FAILURES =" line)


def test_alibi_s_original_penalty_in_distance_is_told_the_convention(tmp_path):
    # ALiBi's original code: slope * j, the key's position (exercise 5 names the same convention for alibi_bias).
    target = plant(tmp_path, "distance.py", ("    return -slope * distance.astype(np.float64)",
                                             "    return slope * np.arange(n_keys, dtype=np.float64)"))
    text = failures_of(target, "distance", "distance_penalty")
    assert any("(the original ALiBi code adds slope * j, the key's position)" in line
               and "this kit's contract is -slope * (n_keys - j)" in line for line in revisit_lines(text)), text[:3000]
    assert "so far keys score higher" not in text and "so the first key is penalised least" not in text, text[:3000]


MERGE = ("""    out = []
    i = 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2  # both tokens of the pair are used up
        else:
            out.append(ids[i])
            i += 1
    return out""", """    out = []
    i = len(ids) - 1
    while i >= 0:
        if i >= 1 and ids[i - 1] == pair[0] and ids[i] == pair[1]:
            out.append(new_id)
            i -= 2
        else:
            out.append(ids[i])
            i -= 1
    return out[::-1]""")


def test_a_right_to_left_merge_is_told_the_convention_not_the_ties(tmp_path):
    target = plant(tmp_path, "tokenization.py", MERGE)
    first = first_block(failures_of(target, "tokenization"))
    assert "test_train_bpe_breaks_ties_by_the_smallest_pair" in first, first
    revisit = first.split("revisit:")[-1]
    assert "from right to left" in revisit and "this kit's contract is left to right" in revisit, first


ENCODE = """    ids = list(text.encode("utf-8"))  # (n_bytes,)
    for i, (left, right) in enumerate(merges.tolist()):
        ids = _merge(ids, (left, right), N_BYTES + i)  # merge i, everywhere, before merge i + 1
    return np.array(ids, dtype=np.int64)  # (n,)"""


def test_tiktoken_s_merges_by_byte_rank_are_told_the_convention_not_the_longest_match(tmp_path):
    target = plant(tmp_path, "tokenization.py", (ENCODE, """    rank = {}
    for token, piece in enumerate(_vocabulary(merges)):
        rank.setdefault(piece, token)
    parts = [bytes([b]) for b in text.encode("utf-8")]
    while len(parts) > 1:
        ranked = [(rank[a + b], j) for j, (a, b) in enumerate(pairwise(parts)) if a + b in rank]
        if not ranked:
            break
        _, j = min(ranked)
        parts[j:j + 2] = [parts[j] + parts[j + 1]]
    return np.array([rank[piece] for piece in parts], dtype=np.int64)  # (n,)"""))
    first = first_block(failures_of(target, "tokenization"))
    assert "longest piece of the vocabulary that matches" not in first, first
    assert "tiktoken's merges by byte rank" in first.split("revisit:")[-1], first


def test_gpt2_pre_tokenization_is_told_the_convention_not_the_ties(tmp_path):
    # A regex split into words before counting: no merge crosses a word (GPT-2, tiktoken).
    split = r"""re.findall(r"'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+", text)"""
    target = plant(tmp_path, "tokenization.py", (
        """    ids = list(text.encode("utf-8"))  # (len(bytes),): one token per byte
    merges = []
    for step in range(n_merges):
        counts = _pair_counts(ids)""", f"""    import re
    words = [list(word.encode("utf-8")) for word in {split}]
    merges = []
    for step in range(n_merges):
        counts = {{}}
        for word in words:
            for pair, count in _pair_counts(word).items():
                counts[pair] = counts.get(pair, 0) + count"""),
        ("        ids = _merge(ids, best, N_BYTES + step)",
         "        words = [_merge(word, best, N_BYTES + step) for word in words]"))
    first = first_block(failures_of(target, "tokenization"))
    assert "pre-tokenization, a regex split before merging" in first.split("revisit:")[-1], first


# minbpe's BasicTokenizer.train (and tiktoken's educational bpe_train): max over the counts, so a tie goes to the pair
# seen first, and merging goes on to the vocabulary size asked for, pairs seen once included.
KIT_CHOICE = ("        best = min(counts, key=lambda pair: (-counts[pair], pair))  # most frequent; a tie: the "
              "smallest pair\n        if counts[best] < 2:\n            break  # a pair seen once: merging it saves "
              "one token of this corpus and teaches nothing\n")
MINBPE_TRAIN = ((KIT_CHOICE, "        best = max(counts, key=counts.get)\n"),)


def test_minbpe_s_training_to_a_fixed_size_is_told_the_convention_not_the_counting(tmp_path):
    target = plant(tmp_path, "tokenization.py", *MINBPE_TRAIN)
    first = first_block(failures_of(target, "tokenization"))
    revisit = first.split("revisit:")[-1]
    assert "minbpe's and tiktoken's training to a fixed vocabulary size" in revisit, first
    assert "this kit's contract stops when no pair occurs twice" in revisit, first
    assert "Diagnosis (the step whose output first differs)" not in first, first


def test_minbpe_s_tie_rule_is_named_where_no_stop_shows(tmp_path):
    # The hidden test's long text: every pair left occurs twice, so only minbpe's tie rule shows (as the catalogued
    # mistake of a tie to the pair seen first does); the one rule they share is named, with the kit's contract.
    target = plant(tmp_path, "tokenization.py", *MINBPE_TRAIN)
    run = run_tests(ROOT / "grader/hidden_tests/test_hidden_15_tokenization.py", target, tb="short")
    # (without pytest's short summary after the last failure: under CI=true it repeats every message in full)
    text = run.output.split("= FAILURES =", 1)[1].split("short test summary info", 1)[0]
    block = next(part for part in text.split("\n____") if "test_long_training_on_three_letters" in part.split("\n")[0])
    revisit = block.split("revisit:")[-1]
    assert "yours gives a tie to the pair seen first" in revisit and "minbpe's" in revisit, block
    assert "this kit's contract gives a tie to the smallest pair" in revisit, block


def test_the_original_alibi_slopes_for_three_heads_are_told_the_convention(tmp_path):
    # llm-foundry / Hugging Face / FasterTransformer (and the paper's get_slopes): for a head count that is not a
    # power of two, the slopes of the next power of two, interleaved.
    target = plant(tmp_path, "positional.py", (
        "    slopes = 2.0 ** (-8.0 * np.arange(1, n_heads + 1) / n_heads)  # (n_heads,)",
        "    power = 2 ** int(np.ceil(np.log2(n_heads)))\n"
        "    slopes = 2.0 ** (-8.0 * np.arange(1, power + 1) / power)\n"
        "    if power != n_heads:\n"
        "        slopes = np.concatenate([slopes[1::2], slopes[::2]])[:n_heads]"))
    first = first_block(failures_of(target, "positional"))
    revisit = first.split("revisit:")[-1]
    assert "the slopes of the original ALiBi code" in revisit and "llm-foundry" in revisit, first
    assert "this kit's contract is slope_h = 2**(-8 (h+1) / n_heads) for every head count" in revisit, first


def test_pytorch_s_nan_for_a_row_with_no_allowed_key_is_named(tmp_path):
    # torch.softmax (nanoGPT's masked_fill(-inf) then softmax, nn.MultiheadAttention): NaN for an all -inf row, no
    # warning. The kit's contract (zeros) is said, and PyTorch's convention named.
    target = plant(tmp_path, "softmax.py", ("    largest = np.where(np.isfinite(largest), largest, 0)\n", ""),
                   ("    return np.divide(\n        exponentials, totals, out=np.zeros_like(exponentials), "
                    "where=totals > 0\n    )",
                    "    with np.errstate(all=\"ignore\"):\n        return exponentials / totals"))
    text = failures_of(target, "softmax", "test_all_masked_row_gives_zeros")
    revisit = text.split("revisit:")[-1]
    assert "PyTorch's softmax convention" in revisit and "this kit's contract is a row of zeros" in revisit, text


def test_pytorch_s_key_padding_mask_is_told_the_convention(tmp_path):
    # fairseq's lengths_to_padding_mask, PyTorch's key_padding_mask: True on the padding (the keys to ignore).
    target = plant(tmp_path, "masks.py",
                   ("(np.arange(max_len) < lengths[:, None])", "(np.arange(max_len) >= lengths[:, None])"))
    first = first_block(failures_of(target, "masks"))
    revisit = first.split("revisit:")[-1]
    assert "PyTorch's key_padding_mask" in revisit, first
    assert "this kit's contract is True for a key that may be attended to" in revisit, first


def test_hugging_face_s_byte_level_ties_are_told_the_convention_not_the_counting(tmp_path):
    # tokenizers' BpeTrainer with the ByteLevel alphabet: a tie goes to the smallest pair of its own ids, which follow
    # GPT-2's byte-to-unicode characters (the space and the bytes 127-160 sort after the letters).
    target = plant(tmp_path, "tokenization.py", (
        "        best = min(counts, key=lambda pair: (-counts[pair], pair))",
        "        printable = [33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255 for b in range(256)]\n"
        "        order = [b if printable[b] else 256 + printable[:b].count(False) for b in range(256)]\n"
        "        rank = lambda t: order[t] if t < 256 else 1024 + t  # noqa: E731\n"
        "        best = min(counts, key=lambda pair: (-counts[pair], rank(pair[0]), rank(pair[1])))"))
    first = first_block(failures_of(target, "tokenization"))
    revisit = first.split("revisit:")[-1]
    assert "Hugging Face tokenizers' ByteLevel BPE trainer" in revisit, first
    assert "this kit's contract gives a tie to the smallest pair of byte ids" in revisit, first
    assert "Diagnosis (the step whose output first differs)" not in first, first


def test_the_in_process_runs_take_no_option_from_the_environment(tmp_path, monkeypatch):
    # A shell's PYTEST_ADDOPTS=-x (or a plugin named in PYTEST_PLUGINS) would stop a mutant's run, a status
    # table or a grading session at its first failure: those runs take only the arguments they are given.
    target = plant(tmp_path, "softmax.py", ("totals = np.sum(exponentials, axis=axis, keepdims=True)",
                                            "totals = np.sum(exponentials, axis=-2, keepdims=True)"))
    test_file = ROOT / load_curriculum().exercise("softmax").test_file
    plain = run_tests(test_file, target)
    assert len(plain.failed) >= 3, plain.output[-2000:]
    monkeypatch.setenv("PYTEST_ADDOPTS", "-x --maxfail=1")
    monkeypatch.setenv("PYTEST_PLUGINS", "no_such_plugin_module")
    again = run_tests(test_file, target)
    assert again.failed == plain.failed, again.output[-2000:]
    assert os.environ["PYTEST_ADDOPTS"] == "-x --maxfail=1"  # the caller's environment is left as it was


def test_the_commands_a_test_starts_get_none_of_this_runs_options():
    # grader/tests/conftest.py: CI's PYTEST_ADDOPTS=--durations=25 (or a developer's -x) stays with this run.
    assert "PYTEST_ADDOPTS" not in os.environ


def test_a_known_mistake_of_one_function_does_not_lead_another_functions_failure(tmp_path):
    # A blind round: the catalogued relu after the feed-forward's second layer, beside a dropout that changes its
    # input in place (which no probe output shows): every dropout failure began "exactly the outputs of a known
    # mistake", the feed-forward's.
    target = plant(tmp_path, "layer.py",
                   ('return linear(hidden, params["w_2"], params["b_2"])',
                    'return np.maximum(linear(hidden, params["w_2"], params["b_2"]), 0)'),
                   ("    return np.where(keep, x / (1.0 - rate), 0).astype(x.dtype)",
                    "    x[~keep] = 0\n    x /= 1.0 - rate\n    return x"))
    feed = failures_of(target, "layer", "test_feed_forward_relu")
    assert "known mistake" in feed and "relu after the second linear layer" in feed, feed[:2000]
    dropout = failures_of(target, "layer", "test_dropout")
    assert "changed its input x in place" in dropout, dropout[:2000]
    assert "known mistake" not in dropout and "second linear layer" not in dropout, dropout[:2000]


def test_a_correlation_outside_minus_one_to_one_is_told_its_normalisation_not_the_ranks(tmp_path):
    # A blind round: the covariance of the ranks as a sum, over x.std() * y.std() (means): n times too large, and
    # the revisit spoke of ties and average ranks only.
    target = plant(tmp_path, "explain.py", ("spread = np.sqrt(np.sum(x**2) * np.sum(y**2))",
                                            "spread = x.std() * y.std()"))
    text = failures_of(target, "explain", "test_rank_correlation_of_orders_without_ties")
    assert "a correlation lies between -1 and 1" in text and "product of their spreads" in text, text[:2000]


def test_a_merge_that_drops_the_last_token_is_not_told_only_when_to_stop(tmp_path):
    # A blind round: _merge's loop ends one token early; the step lead said "when to stop" alone.
    target = plant(tmp_path, "tokenization.py", ("while i < len(ids):", "while i < len(ids) - 1:"))
    lines = revisit_lines(failures_of(target, "tokenization", "test_train_bpe"))
    assert lines and all("drops or repeats a token" in line for line in lines if "when to stop" in line), lines


def test_gradients_of_a_forward_pass_that_ignores_positions_are_told_the_positions(tmp_path):
    # A blind round: model_gradients' own forward pass always added the positions; its backward chain was right,
    # and the revisit walked the chain.
    target = plant(tmp_path, "training.py", ("x = _embed(params, tokens, positions)\n    attended, _ =",
                                             "x = _embed(params, tokens, True)\n    attended, _ ="))
    text = failures_of(target, "training", "test_model_gradients_match_central_differences")
    assert "the loss model_gradients returns (positions=False)" in text, text[:2000]
    assert any("positions=False leaves the positional encodings out of model_gradients" in line
               for line in revisit_lines(text)), text[:2000]


def _led(text: str, test: str) -> str:
    """The lines of ``test``'s block before its first FAILURE (its lead, if it has one)."""
    block = next(b for b in text.split("\n____") if test in b.split("\n", 1)[0])
    return block.split("FAILURE", 1)[0]


def test_a_known_mistake_leads_no_failure_it_cannot_be(tmp_path):
    # Blind rounds: a catalogued mistake (d_k from the number of keys; the causal triangle below the diagonal)
    # beside another (np.float64(-inf) turning float32 into float64; a padding mask whose length 0 keeps a key)
    # led failures the mistake cannot have made: a dtype, another function's values.
    target = plant(tmp_path, "attention.py", ("d_k = q.shape[-1]", "d_k = k.shape[-2]"),
                   ("scores = np.where(mask, scores, -np.inf)", "scores = np.where(mask, scores, np.float64(-np.inf))"))
    text = failures_of(target, "attention")
    assert "known mistake" in _led(text, "test_scores_match_the_formula"), text[:2000]
    assert "known mistake" not in _led(text, "test_attention_keeps_float32"), text[:3000]
    target = plant(tmp_path / "masks", "masks.py",
                   ("return np.tril(np.ones((n, n), dtype=bool))", "return np.tril(np.ones((n, n), dtype=bool), k=-1)"),
                   ("np.arange(max_len) < lengths[:, None]", "np.arange(max_len) < np.maximum(lengths, 1)[:, None]"))
    text = failures_of(target, "masks")
    assert "known mistake" in _led(text, "test_causal_mask_allows_the_diagonal"), text[:2000]
    assert "known mistake" not in _led(text, "test_padding_mask_edge_lengths"), text[:3000]
    # An input changed in place by the very function the mistake is in: no output mistake changes its inputs.
    target = plant(tmp_path / "inplace", "attention.py", ("    return (q @ np.swapaxes(k, -1, -2)) / math.sqrt(d_k)",
                                                          "    q /= math.sqrt(d_k)\n    return q @ k"))
    text = failures_of(target, "attention")
    assert "changed its input q in place" in text, text[:2000]
    assert "known mistake" not in _led(text, "test_scores_transpose_k_even_when_shapes_fit"), text[:3000]


def test_a_known_mistake_does_not_lead_a_bad_input_it_does_not_accept(tmp_path):
    # A blind round: the catalogued worst-first top_k beside a k clamped to the number of chunks; the failure "k = 6
    # accepted" was led by the worst-first mistake, which raises for k = 6 as the contract does.
    target = plant(tmp_path, "retrieval.py",
                   ('order = np.argsort(-similarity, axis=1, kind="stable")',
                    'order = np.argsort(similarity, axis=1, kind="stable")'),
                   ("not 1 <= k <= similarity.shape[1]:", "not 1 <= k:"))
    text = failures_of(target, "retrieval")
    assert "known mistake" in _led(text, "test_top_k_best_first"), text[:2000]
    assert "known mistake" not in _led(text, "test_top_k_rejects_a_bad_k"), text[:3000]


def test_np_dot_on_batched_arrays_is_named_by_its_shape(tmp_path):
    # np.dot pairs every batch of q with every batch of k: scores of shape (2, 3, 5, 2, 3, 7). The shape test said
    # only what the shape should be (a left-alone vague message of an earlier round); the product that makes that
    # shape is named now, in the scores' tests and in the context's, and nowhere else.
    target = plant(tmp_path, "attention.py", ("    return (q @ np.swapaxes(k, -1, -2)) / math.sqrt(d_k)",
                                              "    return np.dot(q, np.swapaxes(k, -1, -2)) / math.sqrt(d_k)"))
    text = failures_of(target, "attention", "test_scores_")
    assert text.count("revisit:  np.dot of arrays with batch axes pairs every batch") == 2, text[:3000]
    target = plant(tmp_path / "context", "attention.py", ("context = weights @ v", "context = np.dot(weights, v)"))
    text = failures_of(target, "attention", "test_attention_shapes")
    assert "observed: (2, 3, 5, 2, 3, 6)" in text and "revisit:  np.dot of arrays with batch axes" in text, text[:3000]
    assert "np.dot" not in failures_of(plant(tmp_path / "plain", "attention.py", (
        "    return (q @ np.swapaxes(k, -1, -2)) / math.sqrt(d_k)", "    return (q @ k.T) / math.sqrt(d_k)")),
        "attention", "test_scores_")
