#!/usr/bin/env bash
# Install scratchformer as a user would (a wheel, not editable) into a fresh venv holding the LOWEST dependency
# versions pyproject.toml allows (scripts/floor-constraints.txt), then run scripts/floor_smoke.py from outside the
# repository:
#   1. core install only: the shipped checkpoint, generate, the encoder, the tokenizer, remote-code loading in a
#      process without our package, compare (plots), senses, export; no training package is installed, and the
#      training commands say which extra they need in one line;
#   2. the [train] extra added at its floors: a 3-step seq2seq training run (BLEU/chrF at its evaluation).
# Needs ./.venv (scripts/setup.sh; BUILD_PYTHON overrides it) only to build the wheel. The floor venv is made anew each run (FLOOR_VENV, default
# ./.venv-floor), so phase 1 really has no training package. Takes about 3-4 minutes on 2 cores, most of it pip.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
FLOOR_VENV=${FLOOR_VENV:-$ROOT/.venv-floor}
PYTHON=${PYTHON:-python3}
start=$SECONDS
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Every pin of the constraints file, split at the "# [train]" line into the core part and the [train] part.
sed -n '/^# \[train\]/q;p' scripts/floor-constraints.txt > "$work/core.txt"
sed -n '/^# \[train\]/,$p' scripts/floor-constraints.txt > "$work/train.txt"

echo "floor check: building the wheel"
# A copy of what the wheel is built from, so that the build writes nothing into the repository
mkdir "$work/src"
cp -r pyproject.toml LICENSE docs scratchformer scratchformer_launcher.py "$work/src/"
find "$work/src" -name __pycache__ -type d -prune -exec rm -rf {} +
"${BUILD_PYTHON:-.venv/bin/python}" -m pip wheel -q --no-deps --no-build-isolation "$work/src" -w "$work/dist"
wheel=$(ls "$work"/dist/scratchformer-*.whl)

echo "floor check: a fresh venv with the floor versions ($FLOOR_VENV) ($((SECONDS - start)) s)"
rm -rf "$FLOOR_VENV"
"$PYTHON" -m venv "$FLOOR_VENV"
# (pipefail: pip's status is the pipeline's; the filter only hides this machine's notes on missing local indexes)
pip_install() { "$FLOOR_VENV/bin/python" -m pip install -q --disable-pip-version-check "$@" 2>&1 \
    | { grep -v "^WARNING: Location" || true; }; }
# CPU machines: the pinned version resolves to the local CPU build (see setup.sh); TORCH_SPEC overrides it.
pip_install "${TORCH_SPEC:-torch==2.13.0}"
pip_install -c "$work/core.txt" "$wheel"
"$FLOOR_VENV/bin/python" -m pip check || true  # informational: a floor pin another package dislikes shows here

echo "floor check: core install done ($((SECONDS - start)) s)"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
export HF_HOME="$work/hf_home"
unset PYTHONPATH
# from outside the repository, so that `import scratchformer` can only find the installed wheel
(cd "$work" && "$FLOOR_VENV/bin/python" "$ROOT/scripts/floor_smoke.py" core)

echo "floor check: adding the [train] extra at its floors ($((SECONDS - start)) s)"
pip_install -c "$work/train.txt" "${wheel}[train]"
(cd "$work" && "$FLOOR_VENV/bin/python" "$ROOT/scripts/floor_smoke.py" train)

echo "floor check passed in $((SECONDS - start)) s"
