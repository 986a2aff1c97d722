#!/usr/bin/env bash
# Build the compiled queue sampler (.build/bb-qdisc-sampler, static) if it is missing or
# older than its source. Run on the host before the project VM boots: the guest has no
# compiler and uses the binary through the share. Without gcc/make the sampler falls back
# to reading the qdiscs in Python (slower; sampler.json says why); never fatal.
cd "$(dirname "$(readlink -f "$0")")/.." || exit 0
if ! command -v make >/dev/null || ! command -v gcc >/dev/null; then
  echo "note: gcc/make missing: the 10 ms queue sampler runs in Python (install gcc make libc6-dev linux-libc-dev)" >&2
  exit 0
fi
make -s -C bufferbloat/csampler ||
  echo "note: building bufferbloat/csampler failed: the 10 ms queue sampler runs in Python" >&2
exit 0
