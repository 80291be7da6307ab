#!/usr/bin/env bash
# What one lent GPU session runs (issue 40, item 6), in one call of the device tool:
#   run(command="bash benchmarks/gpu_session.sh", carry=[".whl"])  after  bash benchmarks/gpu_wheels.sh here.
# Installs the carried wheels, records the machine, then runs on cuda: benchmarks/gpu_check.py (bf16, torch
# engine: register, serve, 3 RL steps, 1 SFT step, served = trained; then again with the trainer's kernels not
# compiled, to weigh torch.compile on a GPU), benchmarks/bench_canary.py --quick (the canary's separation,
# float32 and bf16), then the SFT learning tests. Each output lands in $OUT (or ./gpu-out) for
# benchmarks/results/. A failing check does not stop the next: one call gathers everything.
set -uo pipefail
out="${OUT:-gpu-out}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:src
{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import sys, torch, transformers, peft, pydantic, openai, fastapi
print("python", sys.version.split()[0], "| torch", torch.__version__, "| cuda", torch.version.cuda,
      "| transformers", transformers.__version__, "| peft", peft.__version__, "| pydantic", pydantic.__version__,
      "| openai", openai.__version__, "| fastapi", fastapi.__version__)'
} 2>&1 | tee "$out/machine.txt"
status=0
timeout "${GPU_CHECK_TIMEOUT:-300}" python3 benchmarks/gpu_check.py "$@" 2>&1 | tee "$out/gpu_check.txt" || status=1
timeout "${GPU_CHECK_TIMEOUT:-300}" python3 benchmarks/gpu_check.py --no-compile "$@" 2>&1 \
  | tee "$out/gpu_check_no_compile.txt" || status=1
timeout "${CANARY_TIMEOUT:-200}" python3 benchmarks/bench_canary.py --quick --device cuda 2>&1 \
  | tee "$out/bench_canary_cuda.txt" || status=1
# The learning-and-serving tests on cuda (device="auto" picks the GPU): SFT in float32 and bf16.
timeout "${TESTS_TIMEOUT:-200}" python3 -m pytest -q -p no:cacheprovider -o log_level=INFO \
  tests/backends/test_sft_local.py 2>&1 | tee "$out/pytest_cuda.txt" || status=1
exit $status
