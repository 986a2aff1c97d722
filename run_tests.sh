#!/usr/bin/env bash
# The test command: unit and host-kernel tests on this machine, then the full-kernel
# tests inside the project VM (built on first use, cached afterwards).
#   sudo ./run_tests.sh            everything
#   sudo ./run_tests.sh --host     unit + host-kernel tests only
#   sudo ./run_tests.sh --vm       VM tests only
# Extra arguments after -- go to pytest (both phases).
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")"
phase=all
while [ $# -gt 0 ]; do
  case "$1" in
    --host) phase=host; shift ;;
    --vm) phase=vm; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "run_tests.sh: unknown option $1 (valid: --host, --vm, -- PYTEST_ARGS)" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" -ne 0 ]; then
  echo "run_tests.sh: needs root (network namespaces, qdiscs, the VM): run it with sudo" >&2
  exit 2
fi
if [ -e /etc/bufferbloat-vm ]; then   # the image's marker (bufferbloat.run.where.VM_MARKER)
  # inside the project VM (sudo ./run_tests.sh --host there): its image holds its own
  # packages (vm/packages.txt) and has no network to install more; the tests that boot
  # the VM are skipped there, by name (tests/conftest.py: BOOTS_A_VM)
  echo "run_tests.sh: inside the project VM: nothing to install (vm/packages.txt)"
else
  ./scripts/install-deps.sh || exit 2
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# the compiled 10 ms queue sampler (static): built here before any VM boots, so that no
# run in the guest waits for a compiler under TCG; a failed build stops us
scripts/build-csampler.sh || exit 2
PY=/usr/bin/python3  # Debian's python: mininet, numpy, matplotlib are its packages
rc=0
if [ "$phase" != vm ]; then
  echo "=== unit and host-kernel tests (host: $(uname -r)) ==="
  # --durations: where the suite's time goes (issue 27: CI's cost), printed at the end
  $PY -m pytest -p no:cacheprovider --durations=15 tests/unit tests/host "$@" || rc=1
fi
if [ "$phase" != host ]; then
  echo "=== full-kernel tests in the project VM (and the fault-injection tests again, with OVS) ==="
  # every test's outcome is written to a ledger as it ends (tests/conftest.py): a phase
  # stopped by a guest lockup runs again only the tests that had not ended
  mkdir -p .scratch
  ledger=.scratch/vm-phase-ledger.txt
  rm -f "$ledger"
  vm_phase() {
    vm/run --env BUFFERBLOAT_TEST_LEDGER="/bb/$ledger" -- \
      python3 -m pytest -p no:cacheprovider --durations=15 tests/vm tests/host/test_faults.py "$@"
  }
  vm_phase "$@"
  vmrc=$?
  if [ $vmrc -eq 6 ]; then
    # exit 6: the guest kernel locked up (bufferbloat/vm/boot.py: guest_lockup), an
    # emulator fault seen under TCG, not a test's: the tests that had not ended run once
    # more, in a fresh VM
    ended=()
    if [ -f "$ledger" ]; then mapfile -t ended < "$ledger"; fi
    deselect=()
    failed=0
    for line in "${ended[@]}"; do
      deselect+=(--deselect "${line#* }")
      [ "${line%% *}" = passed ] || failed=$((failed + 1))
    done
    echo "=== the project VM's kernel locked up (exit 6): ${#ended[@]} tests had ended" \
         "($failed failed) and are kept; the others again, in a fresh VM (once) ==="
    vm_phase "${deselect[@]}" "$@"
    vmrc=$?
    [ $vmrc -eq 5 ] && vmrc=0     # pytest's "no tests ran": every test had ended
    [ $failed -eq 0 ] || vmrc=1
  fi
  [ $vmrc -eq 0 ] || rc=1
fi
exit $rc
