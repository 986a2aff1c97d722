#!/usr/bin/env bash
# Run the whole scenario catalogue, record every run under results/ and write
# results/report.html.
#   sudo ./run_all.sh            on this host if its kernel has what the scenarios need,
#                                otherwise inside the project VM (built on first use)
#   sudo ./run_all.sh --host     force the host     sudo ./run_all.sh --vm   force the VM
#   sudo ./run_all.sh --quick    short durations (any option after -- goes to run-all)
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")"
where=auto
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --host) where=host; shift ;;
    --vm) where=vm; shift ;;
    --quick) args+=(--quick); shift ;;
    --) shift; args+=("$@"); break ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "run_all.sh: unknown option $1 (valid: --host, --vm, --quick, -- RUN_ALL_ARGS)" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" -ne 0 ]; then
  echo "run_all.sh: needs root (network namespaces, qdiscs, the VM): run it with sudo" >&2
  exit 2
fi
if [ -e /etc/bufferbloat-vm ]; then   # the marker vm/provision.sh writes (bufferbloat.run.where.VM_MARKER)
  # inside the course VM (vagrant) or the project VM: provisioned from vm/packages.txt;
  # the host's list adds what builds and boots VMs, which is not needed in there
  :
else
  ./scripts/install-deps.sh || exit 2
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# the compiled 10 ms queue sampler (static): built here before any VM boots, so that no
# run in the guest waits for a compiler under TCG; a failed build stops us
scripts/build-csampler.sh || exit 2
PY=/usr/bin/python3
if [ "$where" = auto ]; then
  if $PY -m bufferbloat check --scenario all --quiet; then
    where=host
  else
    echo "This kernel ($(uname -r)) lacks what some scenarios need:"
    $PY -m bufferbloat check --scenario all | sed -n '/cannot run/,$p'
    echo "=> running the catalogue inside the project VM (./run_all.sh --host to refuse)"
    where=vm
  fi
fi
# The catalogue (here or in the VM: `run-all --vm` boots it, the checkout shared, so the
# results land in results/ here), then one HTML report of everything recorded, rendered
# on this host (plotting needs no special kernel, and runs at native speed here). The
# report is written even when some runs failed; the exit status says whether all of
# them succeeded: 1 if a run failed, 5 if a run was degraded, i.e. the emulator fell
# behind, docs/design/health.md.
$PY -m bufferbloat run-all "${args[@]}" "--$where"
rc=$?
case $rc in 2|4|130|143) exit $rc ;; esac   # bad input, no VM boot, Ctrl-C, SIGTERM: no report
$PY -m bufferbloat report results || rc=1
echo "run_all.sh: ${SECONDS} s in all ($((SECONDS / 60)) min $((SECONDS % 60)) s: set-up, image, runs, report)"
exit $rc
