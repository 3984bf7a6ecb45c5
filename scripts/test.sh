#!/usr/bin/env bash
# Set up ./.venv (see setup.sh) and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
# Several tests start subprocesses (torchrun, fresh interpreters) that share the cores with pytest: OpenMP threads
# that spin while waiting make that up to 10x slower on a small machine; passive waiting does not.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
# pytest exits 5 when it collected no test; with `set -e` that fails this script, as it should.
python -m pytest "$@"
