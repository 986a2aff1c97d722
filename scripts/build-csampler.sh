#!/usr/bin/env bash
# Build the compiled helpers (.build/bb-qdisc-sampler, the queue sampler;
# .build/bb-departures, the departure trace's reader; .build/bb-link-trace, the
# capacity replay; static) if missing or older than their sources. Run on the host
# before the project VM boots, so that no run in
# the guest waits for a compiler under TCG (the guest can build it too: vm/packages.txt
# installs gcc and make, and a run builds it before its sampler starts).
# Exit 0: built (or fresh); 1: the compiler failed (its errors shown); 2: no gcc/make
# here (install gcc make libc6-dev linux-libc-dev, or scripts/install-deps.sh).
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")/.." || exit 1
if ! command -v make >/dev/null || ! command -v gcc >/dev/null; then
  echo "error: gcc/make missing: cannot build the compiled queue sampler" \
       "(install gcc make libc6-dev linux-libc-dev)" >&2
  exit 2
fi
if ! make -s -C bufferbloat/measure/csampler; then
  echo "error: building bufferbloat/measure/csampler failed (compiler output above)" >&2
  exit 1
fi
for bin in bb-qdisc-sampler bb-departures bb-link-trace; do
  test -x ".build/$bin" || { echo "error: make left no .build/$bin" >&2; exit 1; }
done
