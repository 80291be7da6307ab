"""Run an `art` command as another kind of host would, forced on this one (an AVX-512 BF16 CPU).

    python benchmarks/as_host.py avx2 art demo --seed 1
    python benchmarks/as_host.py avx512-no-bf16 art demo --seed 2

The profiles are `art.testing.host_kinds`'s (the ones tests/kernels/test_host_kinds.py runs the numerics tests
under): ATen's, inductor's, oneDNN's and MKL's kernels limited to the other host's instructions, and the CPU's
bf16 instructions hidden from ART, so the engine picks float32 as it does there. What this does not give is
the other host's speed (its clock, caches and memory): times measured this way are this host's.

The command runs in a child Python (the environment must be set before torch is imported), which hides the
bf16 instructions and then runs the `art` command line in-process. Exit status: the command's.
"""

from __future__ import annotations

import os
import subprocess
import sys

from art.testing.host_kinds import PROFILES, hide_cpu_bf16_if_asked, profile_env

_CHILD = "ART_AS_HOST_CHILD"


def main(argv: list[str]) -> int:
    if os.environ.get(_CHILD) == "1":
        hide_cpu_bf16_if_asked()
        from art.cli import main as art_main

        sys.argv = ["art", *argv]
        try:
            art_main()
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        return 0
    if len(argv) < 2 or argv[0] not in PROFILES or argv[1] != "art":
        print(f"usage: as_host.py {{{','.join(PROFILES)}}} art <command> [options]", file=sys.stderr)
        return 2
    env = profile_env(argv[0]) | {_CHILD: "1"}
    probe = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    capability = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    print(f"[as_host] {argv[0]}: torch's kernels {capability}; {PROFILES[argv[0]]}", flush=True)
    return subprocess.run([sys.executable, __file__, *argv[2:]], env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
