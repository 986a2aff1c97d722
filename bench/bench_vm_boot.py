"""Benchmark of the project VM's boot (not a test): N consecutive ``vm/run -- true``.

    sudo PYTHONPATH=. /usr/bin/python3 bench/bench_vm_boot.py [-n 20] [--accel tcg]

Each boot is the real command line (``vm/run``, its boot watchdog included); what
``session.run`` records of every boot (BUFFERBLOAT_VM_BOOT_LOG, one JSON line per run) gives
the time from qemu start to each boot stage and to the command, the boots that hung
and were retried, and the failures. Prints the distribution; asserts nothing. The
numbers behind the watchdog's bound (bufferbloat/vm/boot.py BOOT_BOUND_S) come from here.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bufferbloat.core import errors  # noqa: E402
from bufferbloat.vm import boot, image, session  # noqa: E402


def pct(values, q):
    """The q-quantile (0..1) of values, nearest rank."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def dist(values):
    if not values:
        return "-"
    return (f"min {min(values):.1f}  median {statistics.median(values):.1f}  "
            f"p90 {pct(values, 0.9):.1f}  max {max(values):.1f}  "
            f"mean {statistics.mean(values):.1f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", "--boots", type=int, default=20, help="vm/run -- true runs")
    ap.add_argument("--accel", choices=["tcg", "kvm"], help="default: vm/run's choice")
    args = ap.parse_args()
    image.build_image(progress=print)
    fd, log = tempfile.mkstemp(prefix="bb-vm-boots-", suffix=".jsonl")
    os.close(fd)
    env = dict(os.environ, **{session.BOOT_LOG_ENV: log})
    bound, first, attempts = boot.boot_bounds(args.accel or "tcg")
    print(f"# project VM boot benchmark: {args.boots} x `vm/run -- true`"
          f"{' --accel ' + args.accel if args.accel else ''}; watchdog: command within "
          f"{bound:.0f}s, first console output within {first:.0f}s, {attempts} boots")
    print("run | rc | wall s | boots | command started s | stages (s since qemu start)")
    walls, rcs = [], []
    for i in range(1, args.boots + 1):
        argv = [str(ROOT / "vm" / "run"), "-q"]
        if args.accel:
            argv += ["--accel", args.accel]
        t0 = time.monotonic()
        child = subprocess.Popen(argv + ["--", "true"], env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        try:
            rc = child.wait()
        except KeyboardInterrupt:
            # never SIGKILL vm/run (its qemu would outlive it): let it stop its VM
            child.send_signal(signal.SIGINT)
            child.wait()
            print(f"interrupted during run {i}: summary of the runs before it")
            break
        walls.append(time.monotonic() - t0)
        rcs.append(rc)
        recs = [json.loads(ln) for ln in Path(log).read_text().splitlines() if ln.strip()]
        rec = recs[-1] if len(recs) == i else {"boots": []}
        last = rec["boots"][-1] if rec["boots"] else {}
        stages = ", ".join(f"{k} {v:g}" for k, v in (last.get("stages") or {}).items()
                           if k != "qemu")
        started = last.get("boot_s")
        if rec.get("wall_s") is not None:      # without the wait for another VM to end
            walls[-1] = rec["wall_s"]
        print(f"{i:3d} | {rc:3d} | {walls[-1]:6.1f} | {len(rec['boots'])} | "
              f"{'-' if started is None else f'{started:.1f}'} | {stages}", flush=True)
    recs = [json.loads(ln) for ln in Path(log).read_text().splitlines() if ln.strip()]
    recs = recs[:len(rcs)]
    boots = [b for r in recs for b in r["boots"]]
    started = [b["boot_s"] for b in boots if b["outcome"] == "started"]
    failed = [b for b in boots if b["outcome"] != "started"]
    retries = sum(len(r["boots"]) - 1 for r in recs)
    print()
    print(f"runs: {len(recs)}, ok (rc 0): {rcs.count(0)}, "
          f"boot failures (rc {errors.EXIT_BOOT_FAILED}): {rcs.count(errors.EXIT_BOOT_FAILED)}")
    print(f"boots: {len(boots)}, started the command: {len(started)}, hung or died: "
          f"{len(failed)}, retries: {retries}")
    for b in failed:
        print(f"  failed boot: attempt {b['attempt']}, outcome {b['outcome']}, "
              f"stage reached {b['stage']!r}, stages {b['stages']}")
    print(f"qemu start -> command (s): {dist(started)}")
    for stage in boot.STAGE_NAMES[1:]:
        values = [b["stages"][stage] for b in boots
                  if b["outcome"] == "started" and stage in b["stages"]]
        print(f"  -> {stage:9s} (s): {dist(values)}")
    print(f"vm/run -- true, wall from the VM lock to the end (s): {dist(walls)}")
    if started:
        print(f"watchdog bound {bound:.0f}s = {bound / statistics.median(started):.1f}x "
              f"the median boot, {bound / max(started):.1f}x the slowest")
    print(f"(boot records: {log})")


if __name__ == "__main__":
    main()
