#!/usr/bin/env bash
# Adds samples to the acceptance bands that still have fewer than --min-n (10: issue 39's
# rule, docs/design/bands.md). Each round runs, phase by phase, the acceptance tier on
# only the tests that still want samples (bench/band_spreads.py --wanting), then the
# gate tier on those of them that only the gate runs (their bands recorded by the gate's
# measure_until_met), so a round skips what is calibrated already and every acceptance
# test that records no band (the Vagrant box, the fault tests, the runs through the VM).
# Every round's records land in the archive like any run of the test command's, and
# their bands' values are added to bench/band-samples.jsonl (band_spreads.py --keep;
# commit it: an archive does not outlive its machine); a missed band is a sample too,
# printed, not a reason to stop.
#
#   sudo bench/calibrate_bands.sh [--rounds N] [--minutes M] [--min-n K] [--host | --vm]
#
# It stops after N rounds (default 1), when no test wants a sample, or before a phase
# that would not end within M minutes of the start (judged by that phase's last
# duration in this call; default: no limit). The VM phases run one at a time: do not
# start anything heavy beside it (the runs' health and timing bands depend on it).
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
rounds=1
minutes=0
min_n=10
phases=(host vm)
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=${2:-}; shift 2 ;;
    --minutes) minutes=${2:-}; shift 2 ;;
    --min-n) min_n=${2:-}; shift 2 ;;
    --host) phases=(host); shift ;;
    --vm) phases=(vm); shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "calibrate_bands.sh: unknown option $1 (valid: --rounds N, --minutes M," \
            "--min-n K, --host, --vm)" >&2; exit 2 ;;
  esac
done
for v in "$rounds" "$minutes" "$min_n"; do
  if ! [[ "$v" =~ ^[0-9]+$ ]]; then
    echo "calibrate_bands.sh: --rounds, --minutes and --min-n take whole numbers (got '$v')" >&2
    exit 2
  fi
done
[ "$rounds" -ge 1 ] || { echo "calibrate_bands.sh: --rounds must be at least 1" >&2; exit 2; }
[ "$min_n" -ge 2 ] || { echo "calibrate_bands.sh: --min-n must be at least 2" >&2; exit 2; }
if [ "$(id -u)" -ne 0 ]; then
  echo "calibrate_bands.sh: needs root, as run_tests.sh does: run it with sudo" >&2
  exit 2
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
t0=$SECONDS
declare -A last=([host]=0 [vm]=0)
missed=0
for ((r = 1; r <= rounds; r++)); do
  any=0
  for ph in "${phases[@]}"; do
    expr=$(/usr/bin/python3 bench/band_spreads.py --min-n "$min_n" --wanting "$ph")
    st=$?
    if [ $st -eq 3 ]; then
      echo "=== calibrate: round $r/$rounds, $ph: every band has $min_n samples ==="
      continue
    fi
    select=(-k "$expr")
    if [ $st -eq 4 ]; then
      # no sample of this phase anywhere (a fresh machine's archive, no kept samples):
      # which of its tests have bands is unknown, so the whole phase runs
      select=()
    elif [ $st -ne 0 ]; then
      echo "calibrate_bands.sh: band_spreads.py failed ($st)" >&2; exit 1
    fi
    any=1
    elapsed=$((SECONDS - t0))
    if [ "$minutes" -gt 0 ] && [ $((elapsed + last[$ph])) -gt $((minutes * 60)) ]; then
      echo "=== calibrate: stopping before round $r's $ph phase: ${elapsed} s gone, its last" \
           "took ${last[$ph]} s, the limit is $((minutes * 60)) s ==="
      break 2
    fi
    if [ ${#select[@]} -eq 0 ]; then
      what="no sample of it yet: the whole phase"
    else
      what="$(awk -F' or ' '{print NF}' <<<"$expr") test functions wanting samples"
    fi
    echo "=== calibrate: round $r/$rounds, $ph phase, $what, ${elapsed} s gone ==="
    t=$SECONDS
    ./run_tests.sh --acceptance "--$ph" -- "${select[@]}" || missed=$((missed + 1))
    # the bands only the gate records: a gate test (marked neither acceptance nor bands)
    # that observes a band, which the acceptance tier leaves out (2026-11-30: three such
    # bands stayed at 5 samples through four rounds); the gate tier runs them, when the
    # selection holds any (collected here, without booting a VM for nothing)
    if [ ${#select[@]} -gt 0 ]; then
      dirs=(tests/unit tests/host)
      [ "$ph" = vm ] && dirs=(tests/vm)
      gate_only=(-k "$expr" -m "not acceptance and not bands")
      if BUFFERBLOAT_TEST_TIER=gate /usr/bin/python3 -m pytest --collect-only -q \
           -p no:cacheprovider "${dirs[@]}" "${gate_only[@]}" > /dev/null 2>&1; then
        echo "=== calibrate: round $r/$rounds, $ph phase, the gate tier for its own bands ==="
        ./run_tests.sh "--$ph" -- "${gate_only[@]}" || missed=$((missed + 1))
      fi
    fi
    last[$ph]=$((SECONDS - t))
    echo "=== calibrate: round $r/$rounds, $ph phase took ${last[$ph]} s ==="
    # the phase's samples kept with the code (bench/band-samples.jsonl: commit it), so
    # that they outlive this machine's archive
    /usr/bin/python3 bench/band_spreads.py --keep
  done
  [ $any -eq 1 ] || break
done
echo "=== calibrate: done in $((SECONDS - t0)) s; $missed phase(s) had a missed band or" \
     "failed test (each is in its record); the table: bench/band_spreads.py ==="
/usr/bin/python3 bench/band_spreads.py --min-n "$min_n" | tail -n 9
