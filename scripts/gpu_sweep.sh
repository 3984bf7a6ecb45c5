#!/bin/bash
# A pre-training sweep for one lent GPU, ready to fire (scripts/gpu_sweep.py says what it runs and writes).
#
#   bash scripts/gpu_sweep.sh prepare             # here, once: wheels and data into .gpu_sweep/ (git-ignored)
#   OUT=/tmp/out bash scripts/gpu_sweep.sh run    # there: at most 9 minutes; docs/training.md gives the run call
#
# run installs the carried wheels (SWEEP_DIR/wheels, default .gpu_sweep/wheels) with --no-deps into /tmp/site
# first, where there are any: the GPU image has no datasets, and other versions of transformers than the tests here.
# BUDGET (seconds, 500), ARMS (names), SWEEP_SIZE=tiny (a toy run on CPU cores, as the tests do) and WORK pass on.
set -u
cd "$(dirname "$0")/.."
if [ "${1:-run}" = "run" ]; then
    WHEELS=${SWEEP_DIR:-.gpu_sweep}/wheels
    if ls "$WHEELS"/*.whl > /dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
            "$WHEELS"/*.whl || exit 3
        export PYTHONPATH=/tmp/site:$PWD
    else
        export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
    fi
    nvidia-smi -L 2> /dev/null
    python3 -c "import torch, transformers, datasets
print('torch', torch.__version__, 'transformers', transformers.__version__, 'datasets', datasets.__version__)" \
        || exit 3  # a package the image lacks, said before any arm starts
fi
exec python3 scripts/gpu_sweep.py "$@"
