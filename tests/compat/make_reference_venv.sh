#!/usr/bin/env bash
# Build (once) a separate virtualenv with the reference's client, OpenPipe's `openpipe-art`, for the tests that
# drive `art serve` with the reference's own ServerlessBackend (tests/compat/test_reference_serverless.py).
# It cannot share ART's venv: both install a package named `art`.
#
#   tests/compat/make_reference_venv.sh            # -> ~/.cache/art/reference-venv (or $ART_REFERENCE_VENV)
#
# Pins: openpipe-art 0.5.23 (the newest on PyPI, the release docs/compat.md follows) needs Python >= 3.12 (its
# `art.trajectories` uses PEP 695 syntax); openai 3.x breaks its `Model.openai_client()` (it pins <3 itself now);
# its ServerlessBackend imports wandb lazily, but its SFT, fork and pull paths need it (its `backend` extra pins
# 0.28.0), and its Model.log writes Parquet with pyarrow. A venv holding another version (0.5.18, made by an
# earlier version of this script) is upgraded in place. Nothing else is downloaded at test time.
set -euo pipefail
VENV="${ART_REFERENCE_VENV:-$HOME/.cache/art/reference-venv}"
REFERENCE_VERSION=0.5.23
PINS=("openpipe-art==$REFERENCE_VERSION" "openai>=2.14,<3" "wandb==0.28.0" "pyarrow>=15" numpy)
CHECK='import importlib.metadata as m, sys; from art.serverless.backend import ServerlessBackend; sys.exit(m.version("openpipe-art") != sys.argv[1])'
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "$CHECK" "$REFERENCE_VERSION" 2>/dev/null; then
  echo "reference venv already at $VENV (openpipe-art $REFERENCE_VERSION)"
  exit 0
fi
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then
  start=$(date +%s)
  "$VENV/bin/pip" install -q "${PINS[@]}"
  "$VENV/bin/python" -c "$CHECK" "$REFERENCE_VERSION"
  echo "reference venv at $VENV upgraded to openpipe-art $REFERENCE_VERSION in $(( $(date +%s) - start )) s"
  exit 0
fi
PYTHON="${ART_REFERENCE_PYTHON:-}"
if [ -z "$PYTHON" ]; then
  for candidate in python3.13 python3.12; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then
      PYTHON="$candidate"; break
    fi
  done
fi
if [ -z "$PYTHON" ] && command -v pyenv >/dev/null 2>&1; then
  # pyenv's shims refuse a version that is installed but not selected (`pyenv global`): take it by path
  for candidate in "$(pyenv root)"/versions/3.13*/bin/python3.13 "$(pyenv root)"/versions/3.12*/bin/python3.12; do
    if [ -x "$candidate" ] && "$candidate" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then
      PYTHON="$candidate"; break
    fi
  done
fi
if [ -z "$PYTHON" ]; then
  echo "openpipe-art needs Python >= 3.12; none found (set ART_REFERENCE_PYTHON=/path/to/python3.12)" >&2
  exit 1
fi
start=$(date +%s)
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q "${PINS[@]}"
"$VENV/bin/python" -c "$CHECK" "$REFERENCE_VERSION"
echo "reference venv ready at $VENV in $(( $(date +%s) - start )) s"
