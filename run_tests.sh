#!/usr/bin/env bash
# The test command, in two tiers (docs/design/testing.md):
#   sudo ./run_tests.sh                the gate: contracts correct code meets on any machine
#                                      (unit, host-kernel, then the project VM); what CI runs
#   sudo ./run_tests.sh --acceptance   the physics and timing bands on emulated runs
#   --host / --vm                      only this machine's phase / only the VM's phase
# Extra arguments after -- go to pytest (both phases). The VM image is built (or found
# cached) as its own step first. Each phase writes its record (per-test durations,
# attempts, bands, degraded runs, load) to .scratch/test-records/, summarised at the end.
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")"
phase=all
tier=gate
while [ $# -gt 0 ]; do
  case "$1" in
    --host) phase=host; shift ;;
    --vm) phase=vm; shift ;;
    --acceptance) tier=acceptance; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "run_tests.sh: unknown option $1 (valid: --acceptance, --host, --vm, -- PYTEST_ARGS)" >&2; exit 2 ;;
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
t_start=$SECONDS
stamp=$(date +%Y%m%d-%H%M%S)
records=.scratch/test-records
mkdir -p "$records"
export BUFFERBLOAT_TEST_TIER=$tier
# the fault tests' seed: printed here and in each record; set it to replay a run
export BUFFERBLOAT_FAULT_SEED=${BUFFERBLOAT_FAULT_SEED:-$(( $(date +%s) % 1000000 ))}
echo "run_tests.sh: tier $tier, phase(s) $phase, fault seed $BUFFERBLOAT_FAULT_SEED, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$phase" != host ] && [ ! -e /etc/bufferbloat-vm ]; then
  # the VM image as its own step, timed, before any test starts (cached: a second)
  t=$SECONDS
  echo "=== the project VM image (vm/build: cached unless vm/ changed) ==="
  vm/build || { echo "run_tests.sh: the VM image could not be built" >&2; exit 2; }
  echo "vm image: ready in $((SECONDS - t)) s"
fi
rc=0
host_s=0
vm_s=0
if [ "$phase" != vm ]; then
  echo "=== unit and host-kernel tests, tier $tier (host: $(uname -r)) ==="
  t=$SECONDS
  BUFFERBLOAT_TEST_PHASE=host BUFFERBLOAT_TEST_RECORD="$records/$stamp-$tier-host.json" \
    $PY -m pytest -p no:cacheprovider tests/unit tests/host "$@" || rc=1
  host_s=$((SECONDS - t))
fi
if [ "$phase" != host ]; then
  echo "=== full-kernel tests in the project VM, tier $tier ==="
  t=$SECONDS
  # every test's outcome is written to a ledger as it ends (tests/conftest.py): a phase
  # stopped by a guest lockup runs again only the tests that had not ended
  mkdir -p .scratch
  ledger=.scratch/vm-phase-ledger.txt
  rm -f "$ledger"
  # the fault tests run in the host phase of both tiers; again in the VM (with Open
  # vSwitch) in the acceptance tier only: 8 minutes under TCG, a third of the gate
  vm_extra=
  [ "$tier" = acceptance ] && vm_extra=tests/host/test_faults.py
  vm_phase() {
    vm/run --env BUFFERBLOAT_TEST_LEDGER="/bb/$ledger" --env BUFFERBLOAT_TEST_TIER="$tier" \
      --env BUFFERBLOAT_TEST_PHASE=vm --env BUFFERBLOAT_FAULT_SEED="$BUFFERBLOAT_FAULT_SEED" \
      --env BUFFERBLOAT_TEST_RECORD="/bb/$records/$stamp-$tier-vm.json" -- \
      python3 -m pytest -p no:cacheprovider tests/vm $vm_extra "$@"
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
  vm_s=$((SECONDS - t))
fi
# every record is kept in the machine's archive too (a clean clone's .scratch goes with
# it): bench/band_spreads.py computes each band's spread and false-fail rate from them
archive=${BUFFERBLOAT_TEST_ARCHIVE:-/var/lib/bufferbloat/test-records}
if mkdir -p "$archive" 2>/dev/null; then
  cp -p "$records/$stamp-$tier-"*.json "$archive/" 2>/dev/null
else
  echo "run_tests.sh: the records' archive $archive cannot be made: kept in $records only" >&2
fi
echo "=== run_tests.sh: tier $tier $([ $rc -eq 0 ] && echo passed || echo FAILED) in" \
     "$(( (SECONDS - t_start) / 60 )) min $(( (SECONDS - t_start) % 60 )) s" \
     "(host phase ${host_s} s, VM phase ${vm_s} s); records: $records/$stamp-$tier-*.json" \
     "(archived in $archive) ==="
exit $rc
