"""Print how attention's memory and time grow with the sequence length n (the reference, numpy).

Two comparisons, the growth laws side by side:

1. one pass of attention over n queries and n keys: full attention
   (``scaled_dot_product_attention``, an (n, n) array of scores, memory ~ n^2)
   against ``blockwise_attention`` (blocks of ``--block`` keys, memory ~ n);
2. generating n tokens one at a time: recomputing full causal attention over
   the whole prefix at every step (total work ~ n^3) against the KV cache and
   ``attend_step`` (one row per step, total work ~ n^2).

Peak memory is what ``tracemalloc`` saw numpy allocate during the call; time
is the wall time of one run on whatever else the machine is doing.

Usage::

    python benchmarks/generation_memory.py            # n = 256 .. 8192; generation up to n = 512
    python benchmarks/generation_memory.py --full     # generation up to n = 8192 too (minutes)
    python benchmarks/generation_memory.py --max-n 2048 --block 128
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from solutions.attention import scaled_dot_product_attention  # noqa: E402
from solutions.decoding import attend_step, blockwise_attention, kv_cache_append  # noqa: E402
from solutions.masks import causal_mask  # noqa: E402

D = 16  # d_k = d_v, one head


def measure(function, *args, **kwargs) -> tuple[float, float]:
    """(peak MB allocated, seconds) of ``function``: timed on its own, then run again under tracemalloc."""
    start = time.perf_counter()
    function(*args, **kwargs)
    seconds = time.perf_counter() - start  # tracemalloc slows every allocation: time without it
    tracemalloc.start()
    function(*args, **kwargs)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 1e6, seconds


def recompute(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
    """Generate token by token without a cache: full causal attention over the prefix at every step."""
    for t in range(1, q.shape[0] + 1):
        scaled_dot_product_attention(q[:t], k[:t], v[:t], causal_mask(t))


def cached(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
    """Generate token by token with the KV cache: one new row of attention per step."""
    cache = None
    for t in range(q.shape[0]):
        cache = kv_cache_append(cache, k[t : t + 1], v[t : t + 1])
        attend_step(q[t : t + 1], cache)


def sizes(max_n: int) -> list[int]:
    n, result = 256, []
    while n <= max_n:
        result.append(n)
        n *= 2
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-n", type=int, default=8192, help="largest n (default 8192)")
    parser.add_argument("--block", type=int, default=256, help="keys per block for blockwise attention (256)")
    parser.add_argument("--generate-up-to", type=int, default=512,
                        help="largest n for the generation comparison (default 512; recomputing is ~n^3)")
    parser.add_argument("--full", action="store_true", help="run the generation comparison up to --max-n too")
    args = parser.parse_args(argv)
    generate_max = args.max_n if args.full else min(args.generate_up_to, args.max_n)
    rng = np.random.default_rng(0)

    print(f"1. one attention pass over n queries and n keys (d = {D}, float64, block_size = {args.block})")
    print(f"{'n':>6} | {'full: peak MB':>13} {'time s':>8} | {'blockwise: peak MB':>18} {'time s':>8} |"
          f" {'memory ratio':>12}")
    previous = None
    for n in sizes(args.max_n):
        q, k, v = (rng.normal(size=(n, D)) for _ in range(3))
        full_mb, full_s = measure(scaled_dot_product_attention, q, k, v)
        block_mb, block_s = measure(blockwise_attention, q, k, v, args.block)
        growth = "" if previous is None else (f"   x{full_mb / previous[0]:.1f} and x{block_mb / previous[1]:.1f}"
                                               " per doubling")
        print(f"{n:>6} | {full_mb:>13.1f} {full_s:>8.3f} | {block_mb:>18.2f} {block_s:>8.3f} |"
              f" {full_mb / block_mb:>11.0f}x{growth}")
        previous = (full_mb, block_mb)
    print("   full attention holds (n, n) scores and weights: memory x4 per doubling of n (n^2);")
    print("   blockwise holds (n, block_size) per block: memory x2 per doubling (n). Both do ~n^2 work.")

    print(f"\n2. generating n tokens one at a time (d = {D}): total time and peak memory")
    print(f"{'n':>6} | {'recompute: peak MB':>18} {'time s':>8} | {'KV cache: peak MB':>17} {'time s':>8} |"
          f" {'time ratio':>10}")
    previous = None
    for n in sizes(generate_max):
        q, k, v = (rng.normal(size=(n, D)) for _ in range(3))
        again_mb, again_s = measure(recompute, q, k, v)
        cache_mb, cache_s = measure(cached, q, k, v)
        growth = "" if previous is None else (f"   x{again_s / previous[0]:.1f} and x{cache_s / previous[1]:.1f}"
                                               " per doubling")
        print(f"{n:>6} | {again_mb:>18.1f} {again_s:>8.2f} | {cache_mb:>17.2f} {cache_s:>8.2f} |"
              f" {again_s / cache_s:>9.0f}x{growth}")
        previous = (again_s, cache_s)
    skipped = [n for n in sizes(args.max_n) if n > generate_max]
    if skipped:
        print(f"   skipped n = {', '.join(map(str, skipped))} for generation (recomputing takes ~n^3: minutes at "
              f"8192); run with --full to include them")
    print("   recomputing does sum_t t^2 ~ n^3 / 3 work in total (x8 per doubling), the cache sum_t t ~ n^2 / 2")
    print("   (x4 per doubling; the cache's concatenation copies are n^2 too). Per step the cache needs one")
    print("   row of t scores instead of a (t, t) array. At small n Python's per-step overhead hides the laws.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
