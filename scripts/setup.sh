#!/usr/bin/env bash
# Create .venv and install the package with its test, plot, data and zh extras.
# The CPU build of torch goes in first, so that no dependency pulls a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
python -m pip install --quiet "torch==2.13.0"
# The distribution is elmo-pytorch (the index's "elmo" is an unrelated package); a .venv made
# before the rename holds this repository as "elmo", which would shadow it: remove that first.
# (pip's output is read whole first: with pipefail, grep -q stopping early would fail the test)
old_install="$(python -m pip show elmo 2>/dev/null || true)"
if grep -qx "Editable project location: $PWD" <<<"$old_install"; then
    python -m pip uninstall --quiet -y elmo
fi
python -m pip install --quiet -e ".[test,plots,data,zh]"
