"""``attention-kit demo``: the reading's worked example, computed by your own code.

Eight tokens ("the vessel changed course because it detected obstacle"), random
token vectors and projections from ``numpy.random.default_rng(42)``, d_model 16
and d_k = d_v = 8, exactly as in the reading (docs/reading.md#worked-example).
Your ``qkv_projections`` and ``scaled_dot_product_attention`` compute the
weights; the demo prints the same three lines and draws the 8 x 8 weights
as a heatmap.

The vectors are random and untrained, so the picture shows the computation
(every row is a softmax over the keys), not meaning. And even for a trained
model a heatmap of attention weights is not an explanation of what the model
does.

Options: ``--causal`` blocks the keys after each query; ``--heads N`` runs your
``multi_head_attention`` with N heads and draws one panel per head;
``--trained`` (after exercise 9) trains your model on the antecedent task and
draws the sentence three ways: random weights, trained without positions,
trained with positions (docs/reading.md#training); ``--reference`` uses
``solutions/`` (for instructors).
"""

from __future__ import annotations

import argparse
import importlib
import math
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.curriculum import load as load_curriculum
from grader.curriculum import reference_dir
from grader.student import demo_explain
from grader.student.measured_demo import outside_course, unfinished
from grader.student.picture import picture_target
from grader.student.status import DONE, display_path, resolve_impl, run_suite

TOKENS = ("the", "vessel", "changed", "course", "because", "it", "detected", "obstacle")
SEED = 42
D_MODEL = 16
D_K = 8  # = d_v, as in the reading (docs/reading.md#worked-example)
NEEDS = ("softmax", "projections", "attention")
NEEDS_HEADS = ("multihead",)
NEEDS_TRAINED = ("softmax", "projections", "attention", "positional", "multihead", "backward", "training")
TRAIN_SEED, DATA_SEED = 0, 2026
DEFAULT_OUT = "attention-demo.png"
CAPTION = (
    "The token vectors and projections are random (seed 42), not trained, so this picture shows the "
    "computation (each row is a softmax over the keys and sums to 1), not meaning. Even for a trained "
    "model, a heatmap of attention weights is not an explanation of the model."
)


@dataclass
class DemoResult:
    """What the demo computed."""

    weights: Any  # (n, n), or (heads, n, n) with --heads
    output: Any  # context (n, d_v), or the multi-head output (n, d_model)
    causal: bool
    heads: int | None
    mask_source: str  # "" without a mask
    source: str  # whose code: "your code" or "reference solution"


def required_exercises(heads: int | None) -> tuple[str, ...]:
    """The exercises whose tests must pass before the demo can use the student's code."""
    return NEEDS + (NEEDS_HEADS if heads else ())


def compute(impl: Path, *, causal: bool = False, heads: int | None = None, use_causal_mask: bool = False,
            source: str = "your code") -> DemoResult:
    """Run the worked example through the implementation in ``impl``.

    Parameters
    ----------
    impl : pathlib.Path
        The folder holding the modules.
    causal : bool, optional
        Block every key after the query (a causal mask).
    heads : int, optional
        Run ``multi_head_attention`` with this many heads instead of one head.
    use_causal_mask : bool, optional
        Build the causal mask with the implementation's ``causal_mask`` (else ``np.tril``).
    source : str, optional
        Whose code this is, for the titles.

    Returns
    -------
    DemoResult
        The weights, the output and how they were made.
    """
    import numpy as np

    from tests.kit import LocalImplementation

    implementation = LocalImplementation(impl)
    n = len(TOKENS)
    mask, mask_source = None, ""
    if causal:
        if use_causal_mask:
            mask, mask_source = implementation.function("masks", "causal_mask")(n), "causal_mask() from masks.py"
        else:
            masks = load_curriculum().exercise("masks")
            why = (f"until exercise {masks.number}, masks, passes" if "masks" in load_curriculum().assigned_or_given()
                   else f"this course has no exercise {masks.number}, masks")
            mask, mask_source = np.tril(np.ones((n, n), dtype=bool)), f"np.tril ({why})"
    rng = np.random.default_rng(SEED)
    x = rng.normal(size=(n, D_MODEL))  # (8, 16) token vectors
    if heads:
        # The parameters are drawn right after x, from the same generator, as the reading's
        # projections are (docs/reading.md#worked-example).
        params = implementation.function("multihead", "init_multi_head")(rng, D_MODEL, heads)
        mha = implementation.function("multihead", "multi_head_attention")
        output, weights = mha(x, params, heads, mask=mask)  # (8, 16), (heads, 8, 8)
    else:
        # Three draws of rng.normal(scale=1/sqrt(d_model)), in the reading's order (= init_weight;
        # docs/reading.md#worked-example).
        w_q, w_k, w_v = (rng.normal(scale=1 / np.sqrt(D_MODEL), size=(D_MODEL, D_K)) for _ in range(3))
        q, k, v = implementation.function("projections", "qkv_projections")(x, w_q, w_k, w_v)
        attend = implementation.function("attention", "scaled_dot_product_attention")
        output, weights = attend(q, k, v, mask=mask)  # (8, 8) context, (8, 8) weights
    return DemoResult(np.asarray(weights), np.asarray(output), causal, heads, mask_source, source)


def summary_lines(result: DemoResult) -> list[str]:
    """The reading's three lines (docs/reading.md#worked-example: shapes and row sums) for this result."""
    import numpy as np

    weights = result.weights
    name = "output_shape" if result.heads else "context_shape"
    return [
        f"attention_weights_shape={weights.shape}",
        f"{name}={result.output.shape}",
        f"row_sums={np.round(weights.sum(axis=-1), 6)}",
    ]


def title(result: DemoResult) -> str:
    """The figure's title."""
    kind = f"{result.heads}-head attention" if result.heads else "Scaled dot-product attention"
    mask = ", causal mask (no looking ahead)" if result.causal else ""
    return f"{kind} weights{mask}, {result.source}"


def plot(result: DemoResult, out: Path) -> None:
    """Draw the weights as a labelled heatmap (one panel per head) and save a PNG at ``out``."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no window, works without a display
    import matplotlib.pyplot as plt
    import numpy as np

    panels = result.weights[None] if result.weights.ndim == 2 else result.weights
    count = len(panels)
    columns = min(count, 4)
    rows = math.ceil(count / columns)
    size = 6.2 if count == 1 else 3.4
    width = size * columns + 1.4
    figure, axes = plt.subplots(rows, columns, figsize=(width, size * rows + 1.0), squeeze=False,
                                layout="constrained")
    blocked = np.broadcast_to(np.tril(np.ones(panels.shape[-2:], dtype=bool)), panels.shape)
    colours = plt.get_cmap("viridis").with_extremes(bad="#e6e6e6")  # blocked keys: grey, not "weight 0"
    top = float(panels.max()) or 1.0
    image = None
    for index, ax in enumerate(axes.flat):
        if index >= count:
            ax.axis("off")
            continue
        values = panels[index]
        shown = np.ma.masked_where(~blocked[index], values) if result.causal else values
        image = ax.imshow(shown, cmap=colours, vmin=0.0, vmax=top)
        ax.set_xticks(range(len(TOKENS)), TOKENS, rotation=45, ha="right", rotation_mode="anchor")
        ax.set_yticks(range(len(TOKENS)), TOKENS)
        if count > 1:
            ax.set_title(f"head {index}", fontsize=10)
        if index % columns == 0:
            ax.set_ylabel("query (the token attending)")
        if index >= count - columns:
            ax.set_xlabel("key (the token attended to)")
        if count <= 4:
            font = 8 if count == 1 else 6
            for i, j in np.ndindex(values.shape):
                if result.causal and not blocked[index, i, j]:
                    continue
                colour = "black" if values[i, j] > 0.6 * top else "white"
                ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=font, color=colour)
    figure.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, label="attention weight (each row sums to 1)")
    figure.suptitle(title(result), fontsize=12)
    caption = CAPTION
    if result.heads:
        caption += (f" Parameters: init_multi_head(rng, {D_MODEL}, {result.heads}) with the generator that "
                    "drew the token vectors.")
    if result.causal:
        caption += f" Grey cells are keys after the query, blocked by the causal mask ({result.mask_source})."
    # A supxlabel, unlike free text, gets room from the constrained layout.
    figure.supxlabel(textwrap.fill(caption, width=int(width * 15)), fontsize=8, style="italic", ha="left", x=0.02)
    figure.savefig(out, dpi=120)
    plt.close(figure)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``attention-kit demo``."""
    parser.add_argument("--impl", default="exercises", metavar="DIR",
                        help="folder holding your modules (default: exercises)")
    if reference_dir() is not None:  # the instructors' copy (checkout or course folder); students' has none
        parser.add_argument("--reference", action="store_true",
                            help="use the reference solutions/ instead (instructors)")
    parser.add_argument("--causal", action="store_true", help="apply a causal mask (no looking ahead)")
    parser.add_argument("--heads", type=int, metavar="N",
                        help=f"multi-head attention with N heads (N divides {D_MODEL}), one panel per head")
    parser.add_argument("--trained", action="store_true",
                        help="train your model (exercise 9) and draw the sentence untrained, trained without "
                             "positions and trained with them")
    parser.add_argument("--out", default=DEFAULT_OUT, metavar="PNG",
                        help=f"where to write the heatmap (default: {DEFAULT_OUT}; attention-explain.png with "
                             "--explain)")
    parser.add_argument("--explain", action="store_true",
                        help="train the model of exercise 9 and compare, for 'it', its attention with occlusion "
                             "and gradient x input (exercise 10)")
    measures = measured_exercises()
    if measures:
        parser.add_argument("--measure", choices=measures, metavar="EXERCISE",
                            help="make an exercise's measurement with your code and draw it: "
                                 + ", ".join(measures))


def measured_exercises() -> list[str]:
    """The exercises, in the manifest's order, that have a measurement to draw (``demo_NAME.py`` beside this)."""
    here = Path(__file__).resolve().parent
    return [e.name for e in load_curriculum().exercises if (here / f"demo_{e.name}.py").is_file()]


def run(args: argparse.Namespace) -> int:
    """Check that the needed exercises pass, compute, print and plot."""
    if getattr(args, "explain", False):
        return demo_explain.run(args)
    if getattr(args, "measure", None):
        return importlib.import_module(f"grader.student.demo_{args.measure}").run(args)
    heads = args.heads
    args.reference = getattr(args, "reference", False)
    if heads is not None and (heads < 1 or D_MODEL % heads):
        choices = ", ".join(str(h) for h in range(1, D_MODEL + 1) if D_MODEL % h == 0)
        print(f"attention-kit demo: --heads must divide d_model = {D_MODEL}: one of {choices}", file=sys.stderr)
        return 2
    try:
        impl = resolve_impl(reference_dir() if getattr(args, "reference", False) else args.impl)
    except ValueError as error:
        print(f"attention-kit demo: {error}", file=sys.stderr)
        return 2
    if getattr(args, "trained", False):
        return run_trained(args, impl)
    use_causal_mask = args.causal
    source = "reference solution" if args.reference else "your code"
    if not args.reference:
        needed = required_exercises(heads)
        try:
            suite = run_suite(impl, needed + (("masks",) if args.causal else ()), cached=True)
        except RuntimeError as error:
            print(f"attention-kit demo: {error}", file=sys.stderr)
            return 2
        missing = unfinished(suite, needed)
        if missing:
            print(f"The demo runs your {', '.join(needed)}. Finish these exercises first:")
            print("\n".join(missing))
            print("See where you are with `attention-kit status`.")
            return 1
        use_causal_mask = args.causal and suite["masks"].state == DONE
    try:
        result = compute(impl, causal=args.causal, heads=heads, use_causal_mask=use_causal_mask, source=source)
    except Exception as error:  # the student's code passed its tests but failed here
        print(f"attention-kit demo: the worked example failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print("\n".join(summary_lines(result)))
    if result.causal:
        print(f"causal mask: {result.mask_source}")
    out, status = picture_target(args.out, "heatmap")
    if out is None:
        return status
    plot(result, out)
    print(f"heatmap: {display_path(out.resolve())}")
    print(textwrap.fill(CAPTION, width=100))
    return 0


# ---------------------------------------------------------------- --trained: the same sentence, after learning

TRAINED_PANELS = (
    ("random weights (untrained)",
     "The pronoun spreads its attention about evenly (1/8 per token): a random pattern, not meaning."),
    ("trained without positions",
     "Attention sees a bag of tokens: the two nouns look alike to 'it' wherever they stand, so it cannot "
     "tell which came first. Swapping them changes nothing; the model is right about half the time."),
    ("trained with positions",
     "With positional encodings the query at 'it' picks out the noun at the antecedent's position. This "
     "is one head on a toy task where the antecedent is always the first noun: it shows that attention "
     "can learn to route by position, not that a heatmap explains a language model."),
)


@dataclass
class TrainedPanel:
    """One way of running the reading's sentence through the model."""

    label: str
    caption: str
    weights: Any  # (8, 8), head 0
    prediction: str  # the word the model predicts at the pronoun
    swapped: str  # ... when the two nouns trade places ("the obstacle ... it detected vessel")
    accuracy: float  # on 256 held-out sentences
    on_antecedent: float  # mean weight of the pronoun on its antecedent, held out


def compute_trained(impl: Path) -> tuple[list[TrainedPanel], float]:
    """Train the implementation's model (with and without positions) and run the reading's sentence.

    Returns the three panels and the seconds the two trainings took.
    """
    import time

    import numpy as np

    from tests.kit import LocalImplementation

    implementation = LocalImplementation(impl)
    tasks = implementation.module("_tasks")  # the given task module, next to the student's own
    train = implementation.function("training", "train")
    init_model = implementation.function("training", "init_model")
    forward = implementation.function("training", "model_forward")
    data = np.random.default_rng(DATA_SEED)
    train_set, held_out = tasks.antecedent_task(data, 512), tasks.antecedent_task(data, 256)
    sentence = tasks.reading_example()
    swapped = np.array(sentence["tokens"])
    swapped[:, [1, 7]] = swapped[:, [7, 1]]  # the two nouns trade places
    vocab = train_set["vocab"]
    start = time.perf_counter()
    models = [(init_model(np.random.default_rng(TRAIN_SEED), len(vocab), 16, 1), True),
              (train(np.random.default_rng(TRAIN_SEED), train_set, positions=False)[0], False),
              (train(np.random.default_rng(TRAIN_SEED), train_set, positions=True)[0], True)]
    seconds = time.perf_counter() - start
    panels = []
    for (params, positions), (label, caption) in zip(models, TRAINED_PANELS, strict=True):
        logits, weights = forward(params, sentence["tokens"], sentence["query_position"], 1, positions=positions)
        swapped_logits, _ = forward(params, swapped, sentence["query_position"], 1, positions=positions)
        held_logits, held_weights = forward(params, held_out["tokens"], held_out["query_position"], 1,
                                            positions=positions)
        rows = np.arange(len(held_out["tokens"]))
        panels.append(TrainedPanel(
            label, caption, np.asarray(weights)[0, 0], vocab[int(np.argmax(logits[0]))],
            vocab[int(np.argmax(swapped_logits[0]))],
            float(np.mean(np.argmax(held_logits, axis=-1) == held_out["target"])),
            float(np.mean(np.asarray(held_weights)[rows, 0, held_out["query_position"],
                                                   held_out["antecedent_position"]]))))
    return panels, seconds


def plot_trained(panels: list[TrainedPanel], out: Path, source: str) -> None:
    """Three heatmaps side by side, the pronoun's row outlined, each with its caption."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    figure, axes = plt.subplots(1, 3, figsize=(17, 7.4), layout="constrained")
    pronoun = TOKENS.index("it")
    image = None
    for ax, panel in zip(axes, panels, strict=True):
        image = ax.imshow(panel.weights, cmap="viridis", vmin=0.0, vmax=1.0)
        ax.set_xticks(range(len(TOKENS)), TOKENS, rotation=45, ha="right", rotation_mode="anchor")
        ax.set_yticks(range(len(TOKENS)), TOKENS)
        ax.set_xlabel("key (the token attended to)\n\n" + textwrap.fill(panel.caption, width=60), fontsize=9,
                      loc="left")
        ax.add_patch(Rectangle((-0.5, pronoun - 0.5), len(TOKENS), 1, fill=False, edgecolor="red", linewidth=2))
        for j, value in enumerate(panel.weights[pronoun]):
            ax.text(j, pronoun, f"{value:.2f}", ha="center", va="center", fontsize=8,
                    color="black" if value > 0.6 else "white")
        ax.set_title(f"{panel.label}\n'it' predicts '{panel.prediction}' (nouns swapped: '{panel.swapped}')\n"
                     f"held out: accuracy {panel.accuracy:.0%}, weight on the antecedent {panel.on_antecedent:.2f}",
                     fontsize=10)
    axes[0].set_ylabel("query (the token attending); red: the pronoun's row")
    figure.colorbar(image, ax=axes.ravel().tolist(), shrink=0.7, label="attention weight (each row sums to 1)")
    figure.suptitle(f"'the vessel changed course because it detected obstacle': one attention head, {source}",
                    fontsize=12)
    figure.savefig(out, dpi=110)
    plt.close(figure)


def run_trained(args: argparse.Namespace, impl: Path) -> int:
    """``attention-kit demo --trained``: check exercises 1-9, train, print the figures and draw them."""
    source = "reference solution" if args.reference else "your code"
    outside = outside_course(NEEDS_TRAINED)
    if outside:
        print("The trained demo trains the model of exercise 9, which this course does not hold:")
        print("\n".join(outside))
        return 1
    if not args.reference:
        try:
            suite = run_suite(impl, NEEDS_TRAINED, cached=True)
        except RuntimeError as error:
            print(f"attention-kit demo: {error}", file=sys.stderr)
            return 2
        missing = unfinished(suite, NEEDS_TRAINED)
        if missing:
            print("The trained demo trains your model (exercise 9) with your earlier exercises. Finish these first:")
            print("\n".join(missing))
            print("See where you are with `attention-kit status`.")
            return 1
    try:
        panels, seconds = compute_trained(impl)
    except Exception as error:  # the student's code passed its tests but failed here
        print(f"attention-kit demo: training failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print(f"trained twice in {seconds:.1f} s (seed {TRAIN_SEED}; task seed {DATA_SEED}, 512 sentences)")
    for panel in panels:
        weights = ", ".join(f"{word} {value:.2f}" for word, value in zip(TOKENS, panel.weights[TOKENS.index("it")],
                                                                          strict=True))
        print(f"{panel.label}: 'it' predicts '{panel.prediction}' (nouns swapped: '{panel.swapped}'); "
              f"held-out accuracy {panel.accuracy:.2f}, "
              f"mean weight on the antecedent {panel.on_antecedent:.2f}\n  weights of 'it': {weights}")
    out, status = picture_target(args.out, "picture")
    if out is None:
        return status
    plot_trained(panels, out, source)
    print(f"picture: {display_path(out.resolve())}")
    for panel in panels:
        print(textwrap.fill(f"{panel.label}: {panel.caption}", width=100))
    return 0
