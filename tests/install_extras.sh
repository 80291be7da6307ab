#!/usr/bin/env bash
# What the README's test command (command 2) installs beyond ART's own venv, so that the tests needing it run
# for real instead of skipping. Run from ART's activated venv (command 2 does):
#
#   bash tests/install_extras.sh
#
# Each part is built once and is a no-op (a second or so) when it is there. The parts are independent (venvs of
# their own, Debian's packages) and most of their time is downloads, so they run at the same time, each into a
# log of its own that is printed when it ends; the script fails, naming them, if a required part failed:
# - vLLM's CPU build in a venv of its own, ~/.cache/art/vllm-venv (about 2 minutes once): the vLLM engine tests;
# - SkyPilot in a venv of its own, ~/.cache/art/skypilot-venv (49 s once, 460 MB; it pins older transformers
#   than ART): its parser reads `art launch`'s tasks back;
# - the reference's own client, openpipe-art 0.5.23, ~/.cache/art/reference-venv (67 s once for 0.5.18, 856 MB; an older venv is upgraded in 58 s; needs
#   Python >= 3.12): it drives `art serve` as the reference's users do. Where it cannot be built, its test
#   skips saying why, and this script goes on;
# - tinker-cookbook 0.6.1 in ART's venv, for tests/hub/test_tinker_cookbook.py: --no-deps, because it pins
#   tml-renderers>=0.4.1, which PyPI does not have (it is imported only for thinkingmachines/Inkling and
#   Kimi-K3.1 models); its other dependencies are named here (none pulls torch);
# - Chromium from Debian's packages, for the UI's browser tests (needs root: else run that line with sudo).
set -eo pipefail

vllm() { python -m art.engines.vllm.install; }
skypilot() { bash tests/hub/make_skypilot_venv.sh; }
reference() { bash tests/compat/make_reference_venv.sh || echo 'no reference venv: its test will skip, saying why'; }
cookbook() {
  python -c 'import tinker_cookbook' 2>/dev/null || (python -m pip install -q chz blobfile cloudpickle termcolor \
    pyrage pylatexenc math-verify && python -m pip install -q --no-deps tinker-cookbook==0.6.1)
}
browser() { command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium); }

# run_parts PART...: each part at once, its output kept apart and printed in order as the parts end.
run_parts() {
  local logs start part status
  local -A pid
  local failed=()
  logs=$(mktemp -d)
  start=$(date +%s)
  for part in "$@"; do
    "$part" >"$logs/$part.log" 2>&1 &
    pid[$part]=$!
  done
  for part in "$@"; do
    if wait "${pid[$part]}"; then status=ok; else status=FAILED; failed+=("$part"); fi
    echo "== install_extras: $part $status ($(( $(date +%s) - start )) s since the start)"
    cat "$logs/$part.log"
  done
  rm -rf "$logs"
  if [ "${#failed[@]}" -gt 0 ]; then
    echo "install_extras: failed: ${failed[*]} (their output is above)" >&2
    return 1
  fi
  echo "install_extras: all parts ready in $(( $(date +%s) - start )) s"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then  # run, not sourced (the tests source it to try run_parts)
  cd "$(dirname "$0")/.."
  run_parts vllm skypilot reference cookbook browser
fi
