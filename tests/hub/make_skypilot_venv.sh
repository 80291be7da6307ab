#!/usr/bin/env bash
# Build (once) a separate virtualenv with SkyPilot, for the tests that read `art launch`'s tasks back with
# SkyPilot's own parser (tests/hub/test_launch.py). It lives apart from ART's venv because SkyPilot pins older
# transformers, huggingface-hub, uvicorn, click and wandb than ART uses.
#
#   bash tests/hub/make_skypilot_venv.sh     # -> ~/.cache/art/skypilot-venv (or $ART_SKYPILOT_VENV)
#
# A venv that already imports SkyPilot is left as it is (a second). Building it took 51 s here (460 MB).
set -euo pipefail
VENV="${ART_SKYPILOT_VENV:-$HOME/.cache/art/skypilot-venv}"
CHECK='import sky, yaml; print("skypilot", sky.__version__)'
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "$CHECK" 2>/dev/null; then
  exit 0
fi
start=$(date +%s)
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q "skypilot==0.14.1" pyyaml
"$VENV/bin/python" -c "$CHECK"
echo "SkyPilot venv ready at $VENV in $(( $(date +%s) - start )) s"
