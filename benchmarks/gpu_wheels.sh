#!/usr/bin/env bash
# Wheels for benchmarks/gpu_check.py on the offline GPU machines lent here (their Python is 3.12 with torch,
# transformers 5.17, peft, tokenizers, safetensors, httpx, tqdm and typer, but no pydantic, fastapi, uvicorn,
# openai or httpx2). Downloads, into .whl/ for CPython 3.12 on x86-64, those plus the Hugging Face versions
# this repo's tests run with (so the GPU runs the code the CPU tested), and pytest to run tests there. No
# dependency is resolved: each one is named, and each name appears once (pip --target stops on two versions
# of one package). What a GPU session then runs: benchmarks/gpu_session.sh (it installs them first).
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
rm -rf .whl
platforms=()
for n in 35 34 31 28 27 24 17; do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
platforms+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" -d .whl \
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types typing-inspection typing-extensions==4.16.0 \
  fastapi==0.165.0 starlette==1.10.0 uvicorn==0.54.0 opentelemetry-api annotated-doc anyio==4.16.0 \
  openai==3.57.0 jiter distro sniffio httpx2==2.16.2 httpcore2==2.16.2 truststore \
  transformers==5.24.0 huggingface-hub==2.4.0 tokenizers==0.23.3 hf-xet==1.8.0 peft==0.21.2 \
  llguidance==1.9.1 pytest==9.2.0 pytest-asyncio==1.5.0
du -sh .whl
