#!/usr/bin/env bash
# Wheels for benchmarks/gpu_check.py on the offline GPU machines lent here (their Python is 3.12 with torch,
# transformers, peft, tokenizers, safetensors, httpx, tqdm and typer, but no pydantic, fastapi, uvicorn or
# openai). Downloads those (no dependencies resolved: each one is named) into .whl/ for CPython 3.12 on x86-64.
# On the GPU machine, before the check:
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
#     && export PYTHONPATH=/tmp/site:src && python3 benchmarks/gpu_check.py | tee benchmarks/results/gpu_check.txt
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
platforms=()
for n in 35 34 31 28 27 24 17; do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
platforms+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" -d .whl \
  pydantic pydantic-core annotated-types typing-inspection \
  fastapi starlette uvicorn \
  openai jiter distro sniffio \
  llguidance
du -sh .whl
