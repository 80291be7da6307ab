"""Memory of the KV cache when it grows beside one long sequence: copying only what each slot holds
(what the engine does) vs copying the whole old extent (what it did before), side by side in one run.

    python benchmarks/bench_kv_growth.py            # SmolLM2-135M's layout in float32 (an AVX2 host's dtype)
    python benchmarks/bench_kv_growth.py --quick    # 4 layers: seconds, a few hundred MiB

The pattern is MCP-RL's (docs/mcp.md): short rollouts run while one long prompt (the judge reading a whole
group) stretches every slot to its length; then one more sequence arrives and the slots double. Each row
fills `--slots` slots (the first with `--long` tokens, the rest with `--short`), grows to one slot more,
and reports the cache's resident memory after the growth (RSS over the process's before the cache was made)
against the bytes its tokens need. Target: with the engine's way the cache holds at most 1.5x what its
tokens need.
"""

from __future__ import annotations

import argparse
import gc

import torch

from art.engines.torch.kv_cache import SlotKVCache


def rss_bytes() -> int:
    """This process's resident memory (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def grow_once(layers: int, slots: int, long: int, short: int, copy_only_held: bool) -> tuple[int, int]:
    """(the cache's resident bytes after the growth, bytes of the tokens it holds), for one fresh cache."""
    before = rss_bytes()
    cache = SlotKVCache(
        num_layers=layers, num_kv_heads=3, head_dim=64, max_slots=4 * slots, max_positions=4 * long,
        dtype=torch.float32, device=torch.device("cpu"),
    )  # fmt: skip
    cache.min_slots = slots
    lengths = [long] + [short] * (slots - 1)
    cache.ensure(slots, long + 1)
    for slot, length in enumerate(lengths):
        cache.keys_LSHTD[:, slot, :, :length] = 1.0
        cache.values_LSHTD[:, slot, :, :length] = 1.0
    per_position = 2 * layers * 3 * 64 * 4
    cache.ensure(slots + 1, long + 1, lengths if copy_only_held else None)
    resident = rss_bytes() - before
    assert bool((cache.keys_LSHTD[:, 0, :, :long] == 1.0).all()), "growth lost the long sequence"
    cache.release()
    del cache
    gc.collect()
    return resident, sum(lengths) * per_position


def main() -> int:
    """Run both rows, print the table, exit 1 when the target is not met."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="4 layers instead of 30")
    parser.add_argument("--slots", type=int, default=16)
    parser.add_argument("--long", type=int, default=8000, help="tokens of the long sequence")
    parser.add_argument("--short", type=int, default=500, help="tokens of each other sequence")
    args = parser.parse_args()
    layers = 4 if args.quick else 30
    print(f"layout: {layers} layers x 3 kv heads x 64, float32; {args.slots} slots: 1 x {args.long} tokens, "
          f"{args.slots - 1} x {args.short}; growth to {args.slots + 1} slots")  # fmt: skip
    print(f"{'row':<36} {'cache RSS MiB':>14} {'tokens need MiB':>16} {'ratio':>7}")
    results = {}
    for name, only_held in (
        ("copy the whole old extent (before)", False),
        ("copy what slots hold (ours)", True),
    ):
        resident, needed = grow_once(layers, args.slots, args.long, args.short, only_held)
        results[name] = resident / needed
        print(f"{name:<36} {resident / 2**20:>14.1f} {needed / 2**20:>16.1f} {resident / needed:>6.2f}x")
    ours = results["copy what slots hold (ours)"]
    met = ours <= 1.5
    print(
        f"target: after growing, the cache holds at most 1.5x its tokens' bytes: {'met' if met else 'NOT met'} "
        f"({ours:.2f}x; copying everything: {results['copy the whole old extent (before)']:.2f}x)"
    )
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
