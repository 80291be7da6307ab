"""The decode attention alone: our C++ kernel vs the torch paths it replaces (and, optionally, vs the kernel
as it was at an earlier git revision), on a model's head layout, over every layer's cache as a decode step
reads them.

    python benchmarks/bench_attention.py                      # SmolLM2-135M's layout, 32 rows
    python benchmarks/bench_attention.py --against 7d1522e    # also the C++ kernel of that commit
    python benchmarks/bench_attention.py --quick              # small sizes, a few seconds

One decode step reads each layer's keys and values once, and a step's caches (32 rows x 30 layers) do not
fit in the CPU's caches, so each timed "step" here runs the kernel over `--layers` separate caches in turn,
as the engine does. Rows, each timed as the best of `--repeats` interleaved runs (the machine is shared):

- C++ kernel (ours): `cpp_kernels.attention`, the engine's decode attention;
- C++ kernel at REV: the same function's C++ source at git revision REV, built the same way;
- eager torch: `decode_attention.attention_eager` (grouped-head matmuls over a float32 upcast);
- SDPA: `F.scaled_dot_product_attention` with a length mask (what HF models call).

The ratio is each row's time over ours, per context length.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch
import torch.nn.functional as F

from art.engines.torch import decode_attention as da
from art.kernels import cpp_kernels

REPO = Path(__file__).resolve().parents[1]
# Where the kernels' module lives, newest layout first (the C++ moved from Python strings to csrc/ files).
KERNELS_PATHS = ("src/art/kernels/cpp_kernels.py", "src/art/inference/cpp_kernels.py")
CSRC_NAMES = tuple(p.name for p in (REPO / "src" / "art" / "kernels" / "csrc").iterdir())


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes (the test suite runs this)")
    parser.add_argument("--rows", type=int, default=32, help="sequences decoding together")
    parser.add_argument("--heads", type=int, default=9, help="query heads (SmolLM2-135M: 9)")
    parser.add_argument("--kv-heads", type=int, default=3, help="key/value heads (SmolLM2-135M: 3)")
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--layers", type=int, default=30, help="separate caches per step (SmolLM2: 30)")
    parser.add_argument(
        "--lengths", default="32,64,128,256", help="cached positions per row, comma-separated"
    )
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "float32"])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--against", metavar="REV", help="also time the C++ kernel at this git revision")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.layers, args.lengths, args.repeats = 4, 2, "20,40", 2
    return args


def _git_show(rev: str, path: str) -> str | None:
    """The text of `path` at git revision `rev`, or None where it does not exist there."""
    done = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=REPO, capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def kernel_at(rev: str, dtype: torch.dtype) -> Callable[..., None]:
    """The attention kernel's C++ source at git revision `rev`, built like ours.

    Since the C++ moved into `src/art/kernels/csrc/`, the module at `rev` reads its sources from files
    beside it: they are written from the same revision into a temporary folder the module is run from.
    Earlier revisions kept the sources as strings in `src/art/inference/cpp_kernels.py`."""
    import tempfile

    from torch._inductor.codecache import CppPythonBindingsCodeCache

    for path in KERNELS_PATHS:
        text = _git_show(rev, path)
        if text is not None:
            break
    else:
        raise SystemExit(f"--against {rev}: git could not show any of {', '.join(KERNELS_PATHS)} there")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if path == KERNELS_PATHS[0]:
            (folder / "csrc").mkdir()
            for name in ("prelude.h", "attention.cpp"):
                source = _git_show(rev, f"{Path(path).parent}/csrc/{name}")
                if source is None:
                    raise SystemExit(f"--against {rev}: csrc/{name} is missing there")
                (folder / "csrc" / name).write_text(source)
            for name in CSRC_NAMES:  # the module reads every source at import; only attention's is built
                if not (folder / "csrc" / name).exists():
                    (folder / "csrc" / name).write_text(
                        _git_show(rev, f"{Path(path).parent}/csrc/{name}") or ""
                    )
        # A module of its own in sys.modules while it runs: dataclasses look their module up there.
        module = types.ModuleType("kernels_at_rev")
        module.__file__ = str(folder / "cpp_kernels.py")
        sys.modules[module.__name__] = module
        try:
            exec(compile(text, f"{rev}:{path}", "exec"), module.__dict__)  # our own file, from git
        finally:
            del sys.modules[module.__name__]
        namespace: dict[str, Any] = module.__dict__
    source, argtypes = namespace["_SOURCES"]["attention"]
    c_type = namespace["_C_TYPES"][dtype]
    code = (namespace["_PRELUDE"] + source).replace("SCALAR_T", c_type)
    return CppPythonBindingsCodeCache.load_pybinding([a.replace("scalar_t", c_type) for a in argtypes], code)  # type: ignore[no-any-return]


def call_raw(kernel: Callable[..., None]) -> Callable[..., torch.Tensor]:
    """`cpp_kernels.attention`'s calling convention around a raw kernel of the same signature."""

    def run(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor, scale: float
    ) -> torch.Tensor:
        B, H, _, D = q.shape
        out = torch.empty(B, H, D, dtype=q.dtype)
        ks, vs = k.stride(), v.stride()
        kernel(
            q,
            k,
            v,
            lengths,
            out,
            B,
            H,
            k.shape[1],
            D,
            q.stride(0),
            q.stride(1),
            *ks[:3],
            *vs[:3],
            k.shape[2],
            scale,
        )
        return out.view(B, H, 1, D)

    return run


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    B, H, K, D, L = args.rows, args.heads, args.kv_heads, args.head_dim, args.layers
    lengths = [int(x) for x in args.lengths.split(",")]
    if not cpp_kernels.usable(dtype, torch.device("cpu"), D):
        raise SystemExit("the C++ kernels cannot be built or checked here (see the warning above)")
    gen = torch.Generator().manual_seed(0)
    P = max(lengths) + 8
    caches = [
        (torch.randn(B, K, P, D, generator=gen).to(dtype), torch.randn(B, K, P, D, generator=gen).to(dtype))
        for _ in range(L)
    ]
    q = torch.randn(B, H, 1, D, generator=gen).to(dtype)
    scale = D**-0.5

    def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lens: torch.Tensor, s: float) -> torch.Tensor:
        mask = da.length_mask(lens, k.shape[2]).to(q.dtype)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=s, enable_gqa=True)

    def eager(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lens: torch.Tensor, s: float
    ) -> torch.Tensor:
        return da.attention_eager(q, k, v, da.length_mask(lens, k.shape[2]), s)

    rows: dict[str, Callable[..., torch.Tensor]] = {"C++ kernel (ours)": cpp_kernels.attention}
    if args.against:
        rows[f"C++ kernel at {args.against}"] = call_raw(kernel_at(args.against, dtype))
    rows["eager torch"] = eager
    rows["SDPA"] = sdpa

    print(f"bench_attention: rows={B} heads={H} kv_heads={K} head_dim={D} layers={L} dtype={dtype} "
          f"threads={torch.get_num_threads()}; best of {args.repeats} interleaved runs")  # fmt: skip
    print(f"cpu: {_cpu_flags()}")
    names = list(rows)
    table: dict[tuple[str, int], float] = {}
    for T in lengths:
        lens = torch.randint(max(1, T // 2), T + 1, (B,), generator=gen)
        lens[0] = T
        views = [(k[:, :, :T], v[:, :, :T]) for k, v in caches]
        reference = [
            da.attention_eager(q, k, v, da.length_mask(lens, T), scale).float() for k, v in views[:1]
        ]
        for name, fn in rows.items():  # every row computes the same thing (checked once per length)
            got = fn(q, *views[0], lens, scale).float()
            if not torch.allclose(got, reference[0], atol=2e-2 if dtype == torch.bfloat16 else 1e-4):
                raise SystemExit(f"{name} differs from eager at length {T}")
        best = {name: float("inf") for name in names}
        with torch.inference_mode():
            for _ in range(args.repeats):
                for name in names:
                    fn = rows[name]
                    start = time.perf_counter()
                    for k, v in views:
                        fn(q, k, v, lens, scale)
                    best[name] = min(best[name], time.perf_counter() - start)
        for name in names:
            table[(name, T)] = best[name]

    header = (
        "| attention                      | " + " | ".join(f"len {T:>4}: ms/step (x)" for T in lengths) + " |"
    )
    print(header)
    print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
    for name in names:
        cells = [
            f"{table[(name, T)] * 1e3:8.2f} ({table[(name, T)] / table[(names[0], T)]:5.2f}x)"
            for T in lengths
        ]
        print(f"| {name:<30} | " + " | ".join(f"{c:>21}" for c in cells) + " |")
    ours = [table[(names[0], T)] for T in lengths]
    gb = [2 * B * K * T * D * dtype.itemsize * L / t / 1e9 for T, t in zip(lengths, ours, strict=True)]
    print("ours, cache bytes read per second (rows x kv heads x positions x head size x 2, /s): "
          + ", ".join(f"len {T}: {g:.1f} GB/s" for T, g in zip(lengths, gb, strict=True)))  # fmt: skip
    print("(x) = that row's time over ours at the same length")
    return 0


def _cpu_flags() -> str:
    try:
        flags = next(
            line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")
        )
    except (OSError, StopIteration):
        return "unknown"
    wanted = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
    return " ".join(f for f in wanted if f in flags.split())


if __name__ == "__main__":
    sys.exit(main())
