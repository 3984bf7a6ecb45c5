#!/usr/bin/env bash
# Set up ./.venv (see setup.sh) and run the main job: the learned-vs-contextual embedding comparison
# (`scratchformer compare`), our model side by side with the reference BERT. Extra arguments go to the command.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1}
scratchformer compare --html --screenshot "$@"  # tables, compare.json, plots, index.html (+ index.png)
