#!/usr/bin/env bash
# Set up ./.venv (see setup.sh) and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
# Several tests start subprocesses (torchrun, fresh interpreters) that share the cores with pytest: OpenMP threads
# that spin while waiting make that up to 10x slower on a small machine; passive waiting does not.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
# Tests run in up to 4 worker processes (pytest-xdist; the suite waits on subprocesses and file systems as much as on
# the cores: 2 workers take 12 minutes on 2 cores, where one took 22). PYTEST_WORKERS=0 runs them in this process.
# pytest exits 5 when it collected no test; with `set -e` that fails this script, as it should.
python -m pytest -n "${PYTEST_WORKERS:-auto}" --maxprocesses 4 --dist worksteal "$@"
