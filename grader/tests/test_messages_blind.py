"""Feedback that blind rounds found wrong (issue 25's kind): each mistake planted in the reference.

(Blind mistake writers, and a student following the README who copied a body without the helper it calls.)

A wrong diagnosis is worse than none: each of these was told a mistake it did not make, or blamed a function it
did not get wrong, or passed every test.
"""

from __future__ import annotations

from grader.tests.test_messages import failures_of, plant, revisit_lines


def test_a_wrong_model_forward_is_not_blamed_on_train_s_batch(tmp_path):
    # train never calls model_forward: a residual from the raw embedding there is model_forward's own failure.
    target = plant(tmp_path, "training.py", ("    h = x + attended  # the residual",
                                             "    h = params[\"embedding\"][tokens] + attended  # the residual"))
    text = failures_of(target, "training")
    assert "model_forward" in text, text[:3000]
    assert "a batch of another size" not in text and "never a size of its own" not in text, text[:6000]


def test_an_eps_argument_not_used_is_told_so(tmp_path):
    target = plant(tmp_path, "backward.py",
                   ("    inv_std = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + eps)",
                    "    inv_std = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + 1e-5)"))
    text = failures_of(target, "backward", "layer_norm_backward")
    assert "its eps argument is not used" in text, text[:3000]
    for line in revisit_lines(text):  # the terms are all there: never told only that one is missing
        assert not line.endswith("it needs the - xhat * mean(gxhat * xhat) term"), line


def test_a_misplaced_bracket_in_numerical_gradient_is_told_neither_float32_nor_a_constant(tmp_path):
    # (above - below) / 2 * eps: values 1e-12 times the right ones, computed in float64 on both sides.
    target = plant(tmp_path, "backward.py", ("        grad[index] = (above - below) / (2 * eps)",
                                             "        grad[index] = (above - below) / 2 * eps"))
    text = failures_of(target, "backward", "numerical_gradient")
    assert "a scale" in text, text[:3000]
    assert "the same values everywhere" not in text, text[:3000]  # they differ, at 1e-12
    assert "one-sided" not in text, text[:3000]  # it is a central difference
    assert not any(line.endswith("rounds to a step of another size for most entries") for line in revisit_lines(text))


def test_occlusion_s_class_taken_from_the_whole_batch_fails_and_is_named(tmp_path):
    for name, taken in (("mean", "int(np.argmax(probabilities.mean(axis=0)))"),
                        ("largest", "int(np.argmax(probabilities)) % probabilities.shape[1]")):
        target = plant(tmp_path / name, "explain.py", ("    predicted = int(np.argmax(original))",
                                                       f"    predicted = {taken}"))
        text = failures_of(target, "explain", "occlusion")
        assert "yours takes the class from the whole batch" in text, (name, text[:3000])


def test_a_name_never_defined_is_told_so_not_sent_to_the_inputs(tmp_path):
    target = plant(tmp_path, "softmax.py", ("    x = as_float_array(", "    x = as_float_arrray("))
    text = failures_of(target, "softmax")
    assert "NameError" in text and "'as_float_arrray' is not defined in your module" in text, text[:3000]
    assert "what does the line above assume" not in text, text[:3000]


def test_a_mask_applied_after_the_softmax_and_renormalised_fails(tmp_path):
    # Equal to the reference on ordinary inputs; a blocked key that dwarfs the allowed ones underflows them to 0.
    target = plant(tmp_path, "attention.py",
                   ("        if mask.dtype == np.bool_:\n            scores = np.where(mask, scores, -np.inf)\n"
                    "        else:\n", "        if mask.dtype != np.bool_:\n"),
                   ("    weights = softmax(scores, axis=-1)\n",
                    "    weights = softmax(scores, axis=-1)\n"
                    "    if mask is not None and mask.dtype == np.bool_:\n"
                    "        weights = weights * mask\n"
                    "        total = weights.sum(axis=-1, keepdims=True)\n"
                    "        weights = np.divide(weights, total, out=np.zeros_like(weights), where=total > 0)\n"))
    text = failures_of(target, "attention")
    assert "the softmax was taken before the blocked key was taken out" in text, text[:3000]


def test_a_strict_utf8_decode_is_told_what_the_docstring_gives_for_broken_bytes(tmp_path):
    target = plant(tmp_path, "tokenization.py", (".decode(\"utf-8\", errors=\"replace\")", ".decode(\"utf-8\")"))
    text = failures_of(target, "tokenization")
    assert "UnicodeDecodeError" in text and "bytes.decode raises on them unless told what to do" in text, text[:3000]


def test_two_wrong_functions_behind_one_test_are_both_named(tmp_path):
    # An unscaled attention_scores led multi-head tests that only merge_heads (also wrong) could fail, and
    # merge_heads went unnamed there.
    target = plant(tmp_path, "attention.py", ("    return (q @ np.swapaxes(k, -1, -2)) / math.sqrt(d_k)",
                                              "    return (q @ np.swapaxes(k, -1, -2))"))
    module = target / "multihead.py"
    source = module.read_text(encoding="utf-8")
    assert source.count("    x = np.swapaxes(x, -3, -2)  # (..., n, n_heads, d_head)") == 1
    module.write_text(source.replace("    x = np.swapaxes(x, -3, -2)  # (..., n, n_heads, d_head)", "    pass"),
                      encoding="utf-8")
    text = failures_of(target, "multihead")
    assert "First fix attention_scores()" in text and "It also went through merge_heads()" in text, text[:4000]


def test_batches_from_a_fixed_seed_generator_of_train_s_own_fail(tmp_path):
    # The same losses twice from rngs seeded alike, so the determinism check passed: the rng given stays where
    # init_model leaves it.
    target = plant(tmp_path, "training.py", ("    for _ in range(steps):\n        batch = rng.integers(",
                                             "    own = np.random.default_rng(0)\n    for _ in range(steps):\n"
                                             "        batch = own.integers("))
    text = failures_of(target, "training", "init_model_then_adam_steps")
    assert "left where init_model(rng, ...) alone leaves it: no batch was drawn from it" in text, text[:3000]
    assert "a generator of its own" in text, text[:3000]


def test_a_recall_wrong_only_at_k_1_is_recall_at_k_s_own_failure(tmp_path):
    # retrieved.squeeze() at k = 1 compared each evidence with every question's chunk: recall_at_k's own test
    # (k = 2 and 5 only) passed, and the first failure was evaluate's at k = 1, telling of evaluate's pipeline.
    target = plant(tmp_path, "retrieval.py", ("hit = np.any(retrieved == relevant[:, None], axis=1)",
                                              "hit = np.any(retrieved.squeeze() == relevant[:, None], axis=1)"))
    text = failures_of(target, "retrieval")
    headers = [line for line in text.splitlines() if line.startswith("____") and " test_" in line]
    assert "test_recall_at_k_counts_the_hits" in headers[0], text[:3000]  # the first failure a student reads
    assert "recall_at_k at k = 1" in text and "its own row only" in text, text[:3000]


def test_a_cache_begun_from_the_caller_s_k_t_itself_fails(tmp_path):
    # kv_cache_append(None, k_t, v_t) returning k_t and v_t themselves passed every test: a caller that writes the
    # next token's key into the same buffer changed the cache it kept.
    target = plant(tmp_path, "decoding.py", ('return {"k": k_t.copy(), "v": v_t.copy()}',
                                             'return {"k": k_t, "v": v_t}'))
    text = failures_of(target, "decoding", "test_cache_is_never_changed")
    assert "after the caller wrote the next token into its k_t array" in text, text[:3000]
    assert "copy k_t and v_t" in text, text[:3000]


def test_an_additive_mask_made_with_np_log_is_told_its_warning(tmp_path):
    # np.log(mask) gives 0.0 and -inf, the right values, with a RuntimeWarning at every call: it passed every test.
    target = plant(tmp_path, "masks.py", ("return np.where(mask, 0.0, -np.inf).astype(dtype)",
                                          "return np.log(mask.astype(dtype))"))
    text = failures_of(target, "masks", "test_to_additive_gives_zero_and_minus_infinity")
    assert "to_additive(mask) raises no RuntimeWarning" in text and "divide by zero" in text, text[:3000]
    assert "np.log(0) is -inf" in text, text[:3000]


def test_numpy_s_warning_is_said_in_the_terms_of_the_values(tmp_path):
    # A softmax without the guard for an all -inf row: "invalid value encountered in subtract" alone did not say
    # which values (a blind round); the warning's arithmetic is said beside it.
    target = plant(tmp_path, "softmax.py", ("    largest = np.where(np.isfinite(largest), largest, 0)\n", ""))
    text = failures_of(target, "softmax", "all_masked_row")
    assert "observed: invalid value encountered in subtract (-inf - (-inf) is NaN" in text, text[:3000]


def test_a_right_float32_softmax_rounded_otherwise_is_not_blamed_for_a_caller_s_mistake(tmp_path):
    # A blind round: softmax as exp(x - logsumexp(x)), right and passing every test, differs from the float32
    # golden outputs by a few roundings (2.4e-7 on an entry of 0.01, beyond the diagnosis's float64 tolerance);
    # its callers' own mistakes were then sent to "First fix scaled_dot_product_attention()".
    logsumexp = ("    exponentials = np.exp(x - largest)\n"
                 "    totals = np.sum(exponentials, axis=axis, keepdims=True)\n"
                 "    return np.divide(\n"
                 "        exponentials, totals, out=np.zeros_like(exponentials), where=totals > 0\n"
                 "    )",
                 "    with np.errstate(divide=\"ignore\", invalid=\"ignore\"):\n"
                 "        lse = np.log(np.sum(np.exp(x - largest), axis=axis, keepdims=True)) + largest\n"
                 "        out = np.exp(x - lse)\n"
                 "    return np.where(np.isneginf(lse), 0, out).astype(x.dtype)")
    target = plant(tmp_path / "multihead", "softmax.py", logsumexp)
    source = (target / "multihead.py").read_text(encoding="utf-8")
    assert source.count("        mask = mask[..., None, :, :]") == 1
    (target / "multihead.py").write_text(source.replace("        mask = mask[..., None, :, :]", "        pass"),
                                         encoding="utf-8")
    text = failures_of(target, "multihead")
    assert "First fix" not in text, text[:3000]
    assert "give it a head axis" in text, text[:3000]
    target = plant(tmp_path / "training", "softmax.py", logsumexp)
    source = (target / "training.py").read_text(encoding="utf-8")
    old = "    np.add.at(grad_embedding, tokens, grad_x)"
    assert source.count(old) == 1
    (target / "training.py").write_text(source.replace(old, "    grad_embedding[tokens] = grad_x"), encoding="utf-8")
    text = failures_of(target, "training", "model_gradients")
    assert "First fix" not in text, text[:3000]
    assert "np.add.at" in text, text[:3000]


def test_dropout_keeping_with_probability_rate_is_sent_to_the_fraction_not_the_scaling(tmp_path):
    # Kept with probability rate (drawn otherwise than the reference, so no catalogued mistake matches): the first
    # failure, the mean's, spoke of the 1 / (1 - rate) scaling, which was right.
    target = plant(tmp_path, "layer.py", ("    keep = rng.random(x.shape) >= rate",
                                          "    keep = rng.binomial(1, rate, size=x.shape).astype(bool)"))
    text = failures_of(target, "layer", "preserves_the_mean")
    assert "first, the fraction dropped: yours zeroed 0.7" in text, text[:3000]


def test_a_dropout_that_zeroes_x_in_place_and_never_rescales_is_not_led_by_a_scale(tmp_path):
    # Two mistakes in one function: "a scale" explains the kept values, not the caller's x written over; a
    # failure that found x changed is led by no family of outputs, and both revisit lines are there.
    target = plant(tmp_path, "layer.py", ("    return np.where(keep, x / (1.0 - rate), 0).astype(x.dtype)",
                                          "    x[~keep] = 0\n    return x"))
    text = failures_of(target, "layer", "dropout")
    blocks = text.split("\n____")
    changed = [block for block in blocks if "changed its input x in place" in block]
    assert changed, text[:3000]
    for block in changed:
        assert "a family of mistakes" not in block and "Diagnosis" not in block, block[:3000]
    assert any("divide the kept ones by (1 - rate)" in line for line in revisit_lines(text)), text[:6000]


def test_a_dropout_that_never_rescales_is_still_told_a_scale(tmp_path):
    target = plant(tmp_path, "layer.py", ("    return np.where(keep, x / (1.0 - rate), 0).astype(x.dtype)",
                                          "    return np.where(keep, x, 0).astype(x.dtype)"))
    text = failures_of(target, "layer", "dropout")
    assert "a scale" in text or "(1 - rate)" in text, text[:3000]


def test_a_rate_check_that_lets_nan_through_fails(tmp_path):
    # `if rate < 0 or rate >= 1` is False for NaN: dropout(x, nan) zeroed every entry and passed every test.
    target = plant(tmp_path, "layer.py", ("if not 0 <= rate < 1:", "if rate < 0 or rate >= 1:"))
    text = failures_of(target, "layer", "rejects_a_bad_rate")
    assert "dropout(x, rate=nan)" in text and "ValueError naming 'rate'" in text, text[:3000]


def test_a_slope_check_that_lets_nan_through_fails(tmp_path):
    # `slope < 0` alone: a NaN slope made every penalty NaN and passed every test.
    target = plant(tmp_path, "distance.py",
                   ("not isinstance(slope, numbers.Real) or not np.isfinite(slope) or slope < 0",
                    "not isinstance(slope, numbers.Real) or slope < 0"))
    text = failures_of(target, "distance", "rejects_bad_input")
    assert "distance_penalty(5, slope=nan)" in text and "critical_distance(2.0, slope=nan)" in text, text[:3000]


def test_a_causal_mask_cached_between_calls_fails(tmp_path):
    # functools.lru_cache hands every caller one array: a caller's mask &= padding changes every later mask.
    target = plant(tmp_path, "masks.py", ("def causal_mask(n: int) -> np.ndarray:",
                                          "@functools.lru_cache\ndef causal_mask(n: int) -> np.ndarray:"))
    text = failures_of(target, "masks", "causal_mask")
    assert "causal_mask(4) called twice" in text and "a mask kept between calls" in text, text[:3000]


def test_biases_that_are_one_array_fail(tmp_path):
    # dict.fromkeys(names, np.zeros(d)): four names, one array; an in-place step moves all four together.
    target = plant(tmp_path, "multihead.py",
                   ('params.update({name: np.zeros(d_model) for name in ("b_q", "b_k", "b_v", "b_o")})',
                    'params.update(dict.fromkeys(("b_q", "b_k", "b_v", "b_o"), np.zeros(d_model)))'))
    text = failures_of(target, "multihead", "init_multi_head")
    assert "b_q and b_k" in text and "are one array" in text, text[:3000]


def test_a_result_s_items_in_another_order_are_told_so_not_a_scale(tmp_path):
    # A blind round: (both_right, accuracy) was told its accuracy was "0.5 times it" and sent to the controls;
    # (bytes, flops) that its flops were "0.2 times" the formula's, which was right.
    for name, file, edit, exercise in (
            ("pairs", "negation.py", ("return float(right.mean()), float(np.mean(right_per_pair == 2))",
                                      "return float(np.mean(right_per_pair == 2)), float(right.mean())"), "negation"),
            ("cost", "tokenization.py", ("return int(flops), int(n * n * itemsize)",
                                         "return int(n * n * itemsize), int(flops)"), "tokenization")):
        text = failures_of(plant(tmp_path / name, file, edit), exercise)
        assert "its result holds the right values in another order: item 0 is what item 1 should be" in text, \
            (name, text[:3000])
        assert "times it" not in text.split("FAILURE")[0], (name, text[:3000])


def test_a_train_that_never_draws_the_last_sentence_fails(tmp_path):
    # rng.integers(0, n - 1, ...): the last example is never drawn, and every test passed (a blind round).
    target = plant(tmp_path, "training.py", ("        batch = rng.integers(0, len(tokens), size=batch_size)",
                                             "        batch = rng.integers(0, len(tokens) - 1, size=batch_size)"))
    text = failures_of(target, "training", "init_model_then_adam_steps")
    assert "sentence 0's loss alone: the other was never drawn" in text, text[:3000]


def test_a_function_that_prints_instead_of_returning_is_told_it_returned_nothing(tmp_path):
    # A blind round: print(...) in place of return read "shape NoneType (not an array)".
    target = plant(tmp_path, "layer.py", ("    return np.where(keep, x / (1.0 - rate), 0).astype(x.dtype)",
                                          "    print(np.where(keep, x / (1.0 - rate), 0).astype(x.dtype))"))
    text = failures_of(target, "layer", "zeroes_or_rescales")
    assert "observed: None: the function returned nothing (no `return` reached, or print(...)" in text, text[:3000]


def test_scores_divided_by_a_whole_square_root_fail_the_formula_test(tmp_path):
    # math.isqrt(d_k): right wherever d_k is a square (the tests' 4, 16, 64 ...), found only by the reading example.
    target = plant(tmp_path, "attention.py", ("    return (q @ np.swapaxes(k, -1, -2)) / math.sqrt(d_k)",
                                              "    return (q @ np.swapaxes(k, -1, -2)) / math.isqrt(d_k)"))
    text = failures_of(target, "attention", "scores_match_the_formula")
    assert "FAILURE: attention_scores(q, k) with q (5, 8) and k (7, 8)" in text, text[:3000]


def test_a_list_returned_for_an_array_is_told_to_return_an_array(tmp_path):
    # A blind round: .tolist() at the end of softmax was sent to "normalise each slice" (which it did).
    end = "        exponentials, totals, out=np.zeros_like(exponentials), where=totals > 0\n    )"
    target = plant(tmp_path, "softmax.py", (end, end + ".tolist()"))
    text = failures_of(target, "softmax", "same_shape_and_dtype")
    assert "revisit:  the docstring's Returns gives a numpy.ndarray, and yours is a list: return np.asarray" in text, \
        text[:3000]


def test_a_result_the_test_cannot_use_is_described(tmp_path):
    # A blind round: rank_correlation returning np.corrcoef's 2 x 2 matrix was told only numpy's "truth value of an
    # array ... is ambiguous", never what came back.
    target = plant(tmp_path, "explain.py", ("    return _pearson(rank_a, rank_b)",
                                            "    return np.corrcoef(rank_a, rank_b)"))
    text = failures_of(target, "explain", "rank_correlation_of_orders_without_ties")
    assert "(your rank_correlation() returned a numpy array of shape (2, 2) and dtype float64)" in text, text[:3000]


def test_a_softmax_that_subtracts_no_maximum_is_not_told_it_took_the_array_s(tmp_path):
    # A blind round: exp(x) / sum without any shift was right in its diagnosis, but its revisit line said "not the
    # maximum of the array", a mistake it did not make.
    target = plant(tmp_path, "softmax.py",
                   ("    largest = np.where(np.isfinite(largest), largest, 0)\n    exponentials = np.exp(x - largest)",
                    "    exponentials = np.exp(x)"))
    text = failures_of(target, "softmax", "each_slice_uses_its_own_maximum")
    assert "without subtracting the maximum" in text, text[:3000]
    assert "not the maximum of the array" not in text, text[:3000]
    assert "(nothing, or the maximum of the whole array) underflows to 0" in text, text[:3000]


def test_a_check_of_a_callee_that_raised_names_the_caller_s_line(tmp_path):
    # A blind round: values projected from x in cross-attention made scaled_dot_product_attention's own check raise;
    # the crash named only attention.py's `raise ValueError(` and asked what "the line above" assumed.
    target = plant(tmp_path, "multihead.py",
                   ('v = split_heads(linear(kv, params["w_v"], params["b_v"]), n_heads)',
                    'v = split_heads(linear(x, params["w_v"], params["b_v"]), n_heads)'))
    text = failures_of(target, "multihead", "cross_attention_with_kv")
    assert "at attention.py line" in text, text[:3000]
    assert "called from multihead.py line" in text and "scaled_dot_product_attention(q, k, v, mask)" in text, \
        text[:3000]
    assert "what does the line it was called from pass to the function whose check raised" in text, text[:3000]


def test_a_caller_s_changed_input_is_sent_to_the_callee_that_changed_it(tmp_path):
    # A blind round: layer_norm doing `x -= mean` made transformer_layer, right, fail as "transformer_layer() changed
    # its input x in place", the blame on the caller, in a test that had just found layer_norm changing its x.
    target = plant(tmp_path, "layer.py",
                   ("    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # biased: divide by d\n"
                    "    return (x - mean) / np.sqrt(variance + eps) * gamma + beta",
                    "    x -= mean\n    variance = (x ** 2).mean(axis=-1, keepdims=True)\n"
                    "    return x / np.sqrt(variance + eps) * gamma + beta"))
    text = failures_of(target, "layer", "residual_paths_with_silent_sublayers")
    assert "transformer_layer() changed its input x in place" in text, text[:3000]
    assert "first fix your layer_norm(), which transformer_layer() calls: it changed its input in place in this test" \
        in text, text[:6000]


def test_top_k_returning_the_scores_is_told_so_not_only_to_cast_them(tmp_path):
    # The first failure is the dtype check; its old advice (.astype(np.int64)) would cast the scores to int.
    target = plant(tmp_path, "retrieval.py", ("    return order[:, :k].astype(np.int64)",
                                              "    return -np.sort(-similarity, axis=1)[:, :k]"))
    text = failures_of(target, "retrieval", "test_top_k_shape_and_dtype")
    assert "yours holds the k largest similarity scores themselves, not the indices" in text, text[:3000]
    assert ".astype(np.int64))" not in text, text[:3000]


def test_a_running_sum_not_rescaled_is_named_on_scores_far_below_zero_too(tmp_path):
    # That check's revisit line was only "start the running maximum at -inf", which this student did.
    target = plant(tmp_path, "decoding.py", ("        running_sum = running_sum * rescale + exponentials.sum",
                                             "        running_sum = running_sum + exponentials.sum"))
    text = failures_of(target, "decoding", "test_blockwise_with_scores_far_below_zero")
    for line in revisit_lines(text):
        assert line.startswith("revisit:  the running sum l was not rescaled"), line


def test_an_adam_step_count_from_zero_is_told_its_first_step_divides_by_zero(tmp_path):
    # step = 0 on the first call: 1 - b1**0 = 0, every new parameter NaN; the first message said only "expected
    # values, observed nan" beside the whole Adam formula (a blind round). A v from g (not g**2), NaN where g < 0
    # only, is not told so.
    target = plant(tmp_path, "training.py", ("    step = 1 if state is None else int(state[\"step\"]) + 1",
                                             "    step = 0 if state is None else int(state[\"step\"]) + 1"))
    text = failures_of(target, "training", "test_adam_first_step")
    assert "revisit:  every new parameter is NaN, as a step count of 0 on the first call makes them" in text, text
    target = plant(tmp_path / "g", "training.py",
                   ("(1 - beta2) * grad**2 if old_v is None", "(1 - beta2) * grad if old_v is None"))
    assert "a step count of 0" not in failures_of(target, "training", "test_adam_first_step")


def test_a_crash_two_files_below_names_the_call_in_the_file_under_test(tmp_path):
    # A blind round: multi_head_attention_backward giving the mask its head axis in front (mask[None]) made
    # _checks.py's require_broadcast raise inside attention.py; the message named attention.py's line only, never
    # backward.py's call, where the mistake was, and its revisit line told nothing of the mask.
    target = plant(tmp_path, "backward.py", ("mask = np.asarray(mask)[..., None, :, :]  # the same mask for every head",
                                             "mask = np.asarray(mask)[None]"))
    text = failures_of(target, "backward", "multi_head_attention_backward_with_a_mask")
    assert "called from attention.py line" in text, text[:3000]
    assert "called from backward.py line" in text and "scaled_dot_product_attention(q, k, v, mask)" in text, \
        text[:3000]
    assert "mask[..., None, :, :]" in text, text[:3000]


def test_a_crash_of_combine_masks_names_its_line(tmp_path):
    # A blind round: np.logical_and.reduce(masks) stacks masks of two shapes into one array and crashes in numpy;
    # the first failure gave numpy's "inhomogeneous shape" alone, no line of masks.py (the test's own crash helper).
    target = plant(tmp_path, "masks.py", ("    return functools.reduce(np.logical_and, arrays)",
                                          "    return np.logical_and.reduce(arrays)"))
    text = failures_of(target, "masks", "test_combine_causal_and_padding")
    assert "at masks.py line" in text and "np.logical_and.reduce(arrays)" in text, text[:3000]
    assert "fold them two at a time, np.logical_and(a, b)" in text, text[:3000]


def test_a_top_k_that_drops_the_best_is_told_so(tmp_path):
    # A blind round: order[:, 1:k + 1] (a nearest-neighbour habit of dropping the query itself) was told only the
    # whole top-k rule, which it mostly followed.
    target = plant(tmp_path, "retrieval.py", ("    return order[:, :k].astype(np.int64)",
                                              "    return order[:, 1 : k + 1].astype(np.int64)"))
    text = failures_of(target, "retrieval", "test_top_k_best_first")
    assert "yours leaves out the best chunk of every row and keeps ranks 2..k+1" in text, text[:3000]
    good = plant(tmp_path / "good", "retrieval.py", ("    return order[:, :k].astype(np.int64)",
                                                     "    return order[:, ::-1][:, :k].astype(np.int64)"))
    assert "leaves out the best" not in failures_of(good, "retrieval", "test_top_k_best_first")


def test_layer_norm_gammas_that_are_one_array_fail(tmp_path):
    # ones = np.ones(d_model) given to both norms passed every test: an in-place step moves both together.
    target = plant(tmp_path, "layer.py", ("    params.update(\n        ln1_gamma=np.ones(d_model),",
                                          "    ones = np.ones(d_model)\n    params.update(\n        ln1_gamma=ones,"),
                   ("        ln2_gamma=np.ones(d_model),", "        ln2_gamma=ones,"))
    text = failures_of(target, "layer", "init_transformer_layer")
    assert "ln1_gamma and ln2_gamma are one array" in text, text[:3000]


def test_lengths_returned_transposed_are_told_so_not_the_formula(tmp_path):
    # A blind round: sequence_lengths returning (texts, sizes) was told "V > 256: the length of bpe_encode with the
    # first V - 256 merges" at every check, a formula it followed; its numbers were right, the axes swapped.
    target = plant(tmp_path, "tokenization.py", ("    return lengths\n", "    return lengths.T\n"))
    text = failures_of(target, "tokenization", "test_sequence_lengths_are_those_of_your_encode")
    assert "the right values transposed, shape (2, 3) where the contract's is (3, 2)" in text, text[:3000]
    for line in revisit_lines(text):
        assert "with their two axes swapped" in line, line


def test_an_adam_step_that_moves_every_parameter_by_one_factor_is_told_the_factor(tmp_path):
    # A blind round: v_hat = v / (1 - b1^t) moved every parameter by 10 lr on the first step and was told only
    # Adam's whole formula. Its factor is named, and the correction that gives it; eps inside the square root
    # (moves that differ from parameter to parameter) is told no factor.
    target = plant(tmp_path, "training.py", ("        v_hat = square / (1 - beta2**step)",
                                             "        v_hat = square / (1 - beta1**step)"))
    text = failures_of(target, "training", "test_adam_first_step")
    assert "yours moves every parameter by the same 10 times lr" in text, text[:3000]
    assert "v_hat = v / (1 - b1^t), beta1's correction on v" in text, text[:3000]
    other = plant(tmp_path / "eps", "training.py", ("lr * m_hat / (np.sqrt(v_hat) + eps)",
                                                    "lr * m_hat / np.sqrt(v_hat + eps)"))
    assert "times lr" not in failures_of(other, "training", "test_adam_first_step")


def test_an_attend_step_scaled_by_another_width_is_told_which(tmp_path):
    # A blind round: sqrt(t) (the cache's length) and sqrt(d_v) (the values' width) in place of sqrt(d_k) were told
    # only the whole formula; each divisor is named, and none where the scale is right.
    line = "    scores = q_t @ np.swapaxes(k, -1, -2) / math.sqrt(q_t.shape[-1])  # (..., 1, t)"
    for name, divisor, told in (("t", "k.shape[-2]", "divided by sqrt(t), the number of cached positions"),
                                ("dv", "v.shape[-1]", "divided by sqrt(d_v), the values' width")):
        target = plant(tmp_path / name, "decoding.py",
                       (line, f"    scores = q_t @ np.swapaxes(k, -1, -2) / math.sqrt({divisor})"))
        text = failures_of(target, "decoding", "test_attend_step_is_one_row_of_attention")
        assert all(line.startswith(f"revisit:  the scores were {told}") for line in revisit_lines(text)), text[:3000]


def test_queries_scaled_before_the_attention_are_told_they_are_scaled_twice(tmp_path):
    # A blind round: q divided by sqrt(d_head) before scaled_dot_product_attention (which divides again) was told
    # only the rule and "not by sqrt(d_model)", which it did not do.
    target = plant(tmp_path, "multihead.py",
                   ('params["b_q"]), n_heads)  # (..., H, n_q, d_head)',
                    'params["b_q"]), n_heads) / (d_model // n_heads) ** 0.5'))
    text = failures_of(target, "multihead", "test_scores_are_scaled_by_sqrt_d_head")
    assert "yours divides by d_head = 4 itself, sqrt(d_head) twice" in text, text[:3000]


def test_controls_counted_as_a_pair_are_told_they_are_in_no_pair(tmp_path):
    # A blind round: np.unique(pair), the controls' -1 with them, made one more pair; the step's revisit line
    # ("the fraction of pairs whose two members are both right") said nothing of the controls.
    target = plant(tmp_path, "negation.py", ("    ids, counts = np.unique(pair[paired], return_counts=True)",
                                             "    ids, counts = np.unique(pair, return_counts=True)"))
    text = failures_of(target, "negation", "test_pair_accuracy_counts_sentences_and_pairs")
    assert "the controls (pair = -1) are in no pair" in text, text[:3000]


def test_blockwise_scores_scaled_by_the_block_length_are_told_so_in_every_call(tmp_path):
    # A blind round: scores divided by sqrt(block length) were told "divided by sqrt(d_v)" on the one call whose
    # blocks were as long as d_v (5), beside three calls that mistake did not explain. A mistake is named in a test
    # only when it reproduces every call of it that differs.
    line = "        scores = (q @ np.swapaxes(k[..., start:stop, :], -1, -2)) * dtype.type(scale)  # (..., n_q, block)"
    target = plant(tmp_path, "decoding.py", (line, line.replace("dtype.type(scale)",
                                                                "dtype.type(1 / math.sqrt(stop - start))")))
    text = failures_of(target, "decoding", "test_blockwise_causal_equals_causal_attention")
    assert "sqrt(d_v)" not in text, text[:3000]
    assert sum("the square root of the block's length" in line for line in revisit_lines(text)) >= 4, text[:3000]


def test_a_layer_norm_that_only_centres_fails_the_normalisation_test(tmp_path):
    # A hostile round: (x - mean) * gamma + beta, never divided by the standard deviation, passed "normalises each
    # token over its features" (its features had a spread of 1, and a spread between 0.5 and 2 passed).
    target = plant(tmp_path, "layer.py", ("(x - mean) / np.sqrt(variance + eps) * gamma + beta",
                                          "(x - mean) * gamma + beta"))
    text = failures_of(target, "layer", "test_layer_norm_normalises_each_token_over_its_features")
    assert "the spread (std) of every token's output features" in text, text[:3000]
