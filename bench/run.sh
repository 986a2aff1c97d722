#!/usr/bin/env bash
# Run the emulation-core benchmark on the host, then inside the project VM.
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
./scripts/install-deps.sh || exit 2
PYTHONPATH=$PWD /usr/bin/python3 bench/bench_core.py --rates 1.5,10,100 "$@"
vm/run -- python3 bench/bench_core.py --rates 1.5,10,20 "$@"
