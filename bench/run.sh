#!/usr/bin/env bash
# Benchmarks (they print measured numbers; they assert nothing): the emulation core
# (configured vs achieved rate, full-queue RTT vs theory, delay and loss, build/teardown
# time) and the 10 ms sampler (achieved period, CPU share), on the host, then inside the
# project VM; then the VM's boot (20 x vm/run -- true).   sudo bench/run.sh [--time S]
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
./scripts/install-deps.sh || exit 2
export PYTHONPATH=$PWD
echo "=== host: emulation core"
/usr/bin/python3 bench/bench_core.py --rates 1.5,10,100 "$@"
echo "=== host: sampler"
/usr/bin/python3 bench/bench_sampler.py
echo "=== project VM: emulation core and sampler"
vm/run -- bash -c 'python3 bench/bench_core.py --rates 1.5,10,20 "$@" &&
                   python3 bench/bench_sampler.py --time 5' bench "$@"
echo "=== project VM: boot time and watchdog retries"
/usr/bin/python3 bench/bench_vm_boot.py
