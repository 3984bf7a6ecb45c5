#!/usr/bin/env bash
# Set up ./.venv (see setup.sh) and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
# pytest exits 5 when it collected no test; with `set -e` that fails this script, as it should.
python -m pytest "$@"
