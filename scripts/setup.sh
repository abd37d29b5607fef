#!/usr/bin/env bash
# Create .venv and install the package with its test, plot, data and zh extras.
# The CPU build of torch goes in first, so that no dependency pulls a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
python -m pip install --quiet "torch==2.13.0"
python -m pip install --quiet -e ".[test,plots,data,zh]"
