"""Run the reference's own unit tests (OpenPipe's ART) against OUR `art` and count what passes.

    python benchmarks/reference_unit_tests.py /path/to/OpenPipe-ART-checkout [--files a.py b.py] [--json out.json]

The reference's repository is never copied into ours: this script takes the path of a checkout (e.g. made
with `git worktree add` or `git archive` of `q-qp-p/OpenPipe-ART` at 0.5.18), copies each portable test
file into a fresh temporary folder (so nothing of the reference's `src/` or `conftest` can shadow ours),
and runs pytest on it with this interpreter, our `src/` first on `sys.path` and the reference's pytest
settings (`asyncio_mode = "auto"`). It fetches nothing.

The files are those of its `tests/unit` and of `src/art/test` (tests kept beside its code). "Portable"
means the file needs no GPU, vLLM, Unsloth, Megatron, Tinker or network service (a server the
test starts on 127.0.0.1 is fine). The files left out, and why, are in `EXCLUDED`. A file that fails at
import counts all of its tests (counted from its source, parametrize cases included) as failed.

Prints one line per file (passed / total, failed and skipped) and the total; `--json` writes the same.
Tests we fail on purpose are listed, with the reason, in docs/compat.md ("The reference's unit tests").
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

PORTABLE = [
    "tests/unit/test_auto_trajectory.py",
    "tests/unit/test_benchmarking_loader.py",
    "tests/unit/test_chat_template_config.py",
    "tests/unit/test_checkpoint_retention.py",
    "tests/unit/test_dedicated_config.py",
    "tests/unit/test_frontend_logging.py",
    "tests/unit/test_metric_routing.py",
    "tests/unit/test_metrics_builder.py",
    "tests/unit/test_metrics_taxonomy.py",
    "tests/unit/test_model_openai_client_costs.py",
    "tests/unit/test_model_support_import_boundary.py",
    "tests/unit/test_multi_checkpoint_inference.py",
    "tests/unit/test_pipeline_trainer_batching.py",
    "tests/unit/test_pipeline_trainer_metrics.py",
    "tests/unit/test_preprocessing_tokenize.py",
    "tests/unit/test_ruler_metrics.py",
    "tests/unit/test_sft.py",
    "tests/unit/test_strip_logprobs.py",
    "tests/unit/test_tau_bench_client.py",
    "tests/unit/test_track_api_cost.py",
    "tests/unit/test_trajectory_copy.py",
    "tests/unit/test_trajectory_parquet.py",
    "tests/unit/test_yield_trajectory.py",
    "tests/unit/test_serverless_adapter_lease.py",
    "src/art/test/test_kl_advantage.py",  # the reference's tests kept beside its code (shipped in its wheel)
]

EXCLUDED = {
    "src/art/test/test_step_skipping.py": "a LocalBackend step on a GPU (Unsloth and vLLM, Qwen2.5-0.5B)",
    "tests/test_backend_train_api.py": "a script (no test functions) that trains a real model on a GPU",
    "tests/unit/test_megatron_reference_logprobs.py": "Megatron",
    "tests/unit/test_merged_weight_names.py": "Unsloth and vLLM (importorskip)",
    "tests/unit/test_moe_routing_real_path.py": "Megatron MoE routing replay",
    "tests/unit/test_moe_routing_replay.py": "Megatron MoE routing replay",
    "tests/unit/test_mp_actors.py": "the reference's own process-actor package `mp_actors`, not part of `art`",
    "tests/unit/test_pipeline_trainer_local_backend.py": "imports `art.megatron` at top level",
    "tests/unit/test_prefix_cache.py": "Tinker (`art.tinker`)",
    "tests/unit/test_serverless_pipeline_trainer_compat.py": "the reference's hosted ServerlessBackend internals",
    "tests/unit/test_tinker_native_kl.py": "Tinker",
    "tests/unit/test_tinker_renderers.py": "Tinker and tinker_cookbook",
    "tests/unit/test_unsloth_autocast_dtype.py": "Unsloth",
    "tests/unit/test_unsloth_metrics.py": "Unsloth",
}

PYTEST_INI = """[pytest]
asyncio_mode = auto
markers =
    live_api_cost: opt-in live API cost validation against provider endpoints
"""


@dataclass
class FileResult:
    """What one reference test file did against our `art`."""

    file: str
    total: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    import_error: str | None = None
    failures: list[str] = field(default_factory=list)


def _parametrize_count(decorator: ast.expr) -> int:
    """How many cases a literal `@pytest.mark.parametrize(names, [cases])` makes (1 if not one)."""
    if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)):
        return 1
    if decorator.func.attr != "parametrize" or len(decorator.args) < 2:
        return 1
    cases = decorator.args[1]
    return len(cases.elts) if isinstance(cases, ast.List | ast.Tuple) else 1


def count_tests_statically(path: Path) -> int:
    """Tests in a file counted from its source: `test_*` functions (module level and in `Test*` classes)
    times their literal parametrize cases. Used when the file cannot be imported."""
    tree = ast.parse(path.read_text())
    total = 0

    def functions(body: list[ast.stmt]) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
        return [n for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]

    candidates = functions(tree.body)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            candidates.extend(functions(node.body))
    for fn in candidates:
        if fn.name.startswith("test_"):
            cases = 1
            for decorator in fn.decorator_list:
                cases *= _parametrize_count(decorator)
            total += cases
    return total


def run_file(ref: Path, rel: str, timeout: float) -> FileResult:
    """Run one reference test file in a fresh folder against our `art`."""
    source = ref / rel
    result = FileResult(file=rel)
    with tempfile.TemporaryDirectory(prefix="art-ref-tests-") as tmp:
        work = Path(tmp)
        shutil.copy(source, work / source.name)
        support = ref / "tests" / "support"
        if support.is_dir():  # `tests.support` helpers some files import
            shutil.copytree(support, work / "tests" / "support")
            (work / "tests" / "__init__.py").write_text("")
        (work / "pytest.ini").write_text(PYTEST_INI)
        report = work / "report.xml"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(work)])}
        for name in ("PYTEST_ADDOPTS", "WANDB_API_KEY"):
            env.pop(name, None)
        # The suite's environment (README): offline, no W&B, LiteLLM's bundled prices; and a judge cache of
        # the file's own (ours caches RULER's judgements; the reference's tests expect every call made).
        env.update(
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            WANDB_MODE="disabled",
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            ART_JUDGE_CACHE_DIR=str(work / "judge-cache"),
        )
        cmd = [sys.executable, "-m", "pytest", source.name, "-q", "-p", "no:cacheprovider"]
        cmd += ["-p", "no:randomly", f"--junitxml={report}", "-o", "junit_family=xunit1"]
        try:
            proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
            output = proc.stdout + proc.stderr
        except subprocess.TimeoutExpired:
            output = f"timed out after {timeout:.0f} s"
        cases = ET.parse(report).getroot().iter("testcase") if report.exists() else iter(())
        for case in cases:
            name = case.get("name", "?")
            if case.find("skipped") is not None:
                result.skipped += 1
            elif case.find("failure") is not None or case.find("error") is not None:
                if name == source.stem or case.get("classname", "") == "":  # a collection error
                    continue
                result.failed += 1
                result.failures.append(name)
            else:
                result.passed += 1
        result.total = result.passed + result.failed + result.skipped
        if result.total == 0:
            result.total = result.failed = count_tests_statically(source)
            lines = [line for line in output.splitlines() if "Error" in line or "error" in line]
            result.import_error = (lines[0] if lines else output.strip()[-300:]).strip()
    return result


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run the files, print the table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("reference", type=Path, help="path of a checkout of OpenPipe's ART (0.5.18)")
    parser.add_argument("--files", nargs="*", help="run only these files (paths relative to the checkout)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per file")
    parser.add_argument("--show-failures", action="store_true", help="name each failing test")
    args = parser.parse_args(argv)
    ref: Path = args.reference
    if not (ref / "tests" / "unit").is_dir():
        parser.error(f"{ref} has no tests/unit/: pass the root of a checkout of OpenPipe's ART")
    files = args.files or PORTABLE
    results: list[FileResult] = []
    for rel in files:
        if not (ref / rel).is_file():
            print(f"{rel}: not in this checkout, skipped", flush=True)
            continue
        res = run_file(ref, rel, args.timeout)
        results.append(res)
        note = f"  import failed: {res.import_error}" if res.import_error else ""
        print(
            f"{res.passed:4d}/{res.total:<4d} {rel}  (failed {res.failed}, skipped {res.skipped}){note}",
            flush=True,
        )
        if args.show_failures:
            for name in res.failures:
                print(f"          FAILED {name}")
    passed = sum(r.passed for r in results)
    total = sum(r.total for r in results)
    skipped = sum(r.skipped for r in results)
    share = 100.0 * passed / total if total else 0.0
    runnable = total - skipped
    print(f"total: {passed}/{total} passed ({share:.1f}%) in {len(results)} files")
    if runnable:
        # Skips are the reference's own: tests that need Tinker or Unsloth, or fixture files its repository
        # does not ship; they skip the same way against the reference itself.
        print(
            f"runnable here: {passed}/{runnable} passed ({100.0 * passed / runnable:.1f}%; {skipped} skipped)"
        )
    if args.json:
        summary = {
            "passed": passed,
            "total": total,
            "skipped": skipped,
            "files": [asdict(r) for r in results],
        }
        args.json.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
