"""The guest lockup under TCG, reproduced (docs/design/health.md, "kernel code patched").

Run in the project VM, as root:

    BUFFERBLOAT_VM_LOCKUP_S=30 vm/run --timeout 700 -- \
        python3 bench/bench_trace_toggle.py plain 300

Turns the departure trace's two events (bufferbloat.measure.departures.EVENTS) on and
off in a tracefs instance every 10 ms while a ping runs, and prints the toggles done.
``plain``: as a run does; ``keepers``: with two idle instances of its own holding the
events first (the guest's boot script, vm/guest/bb-run, now does that for every boot,
so ``plain`` there measures the fix). Measured before the fix: locked up (exit 6)
after ~500 toggles; with the events held, 24,893 toggles in 300 s and none.
``unheld``: the boot's holds released first, so that every toggle patches code again
(as before the fix); ``unheld-1cpu``: the same with every CPU but the first offline
while toggling, as bb-run now makes its own patches at boot.
"""
import os
import subprocess
import sys
import time

from bufferbloat.measure.departures import EVENTS, HOLD_PREFIX, mount_tracefs


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def main():
    modes = ("plain", "keepers", "unheld", "unheld-1cpu")
    if len(sys.argv) != 3 or sys.argv[1] not in modes:
        print(f"usage: bench_trace_toggle.py {'|'.join(modes)} SECONDS", file=sys.stderr)
        return 2
    mode, secs = sys.argv[1], float(sys.argv[2])
    # the kernel's own backtraces on the console, should it lock up
    subprocess.run(["dmesg", "-n", "8"], check=False)
    subprocess.run(["sysctl", "-qw", "kernel.softlockup_all_cpu_backtrace=1"], check=False)
    root, why = mount_tracefs()
    if root is None:
        print(f"bench_trace_toggle: {why}", file=sys.stderr)
        return 2
    keepers = []
    if mode == "keepers":
        for i in range(2):
            k = os.path.join(root, "instances", f"{HOLD_PREFIX}bench-{i}")
            os.mkdir(k)
            keepers.append(k)
            write(os.path.join(k, "tracing_on"), "0")
            for ev in EVENTS:
                write(os.path.join(k, "events", ev, "enable"), "1")
    held, offline = [], []
    if mode.startswith("unheld"):
        for name in sorted(os.listdir(os.path.join(root, "instances"))):
            if name.startswith(HOLD_PREFIX):
                for ev in EVENTS:
                    write(os.path.join(root, "instances", name, "events", ev, "enable"),
                          "0")
                held.append(name)
        print(f"released the boot's holds: {held}", flush=True)
    if mode == "unheld-1cpu":
        cpus = "/sys/devices/system/cpu"
        for name in sorted(os.listdir(cpus)):
            online = os.path.join(cpus, name, "online")
            if name[3:].isdigit() and name != "cpu0" and os.path.isfile(online):
                write(online, "0")
                offline.append(online)
        with open(os.path.join(cpus, "online")) as f:
            print(f"CPUs online while toggling: {f.read().strip()}", flush=True)
    inst = os.path.join(root, "instances", "bench-trace-toggle")
    os.mkdir(inst)
    ping = subprocess.Popen(["ping", "-q", "-i", "0.002", "127.0.0.1"],
                            stdout=subprocess.DEVNULL)
    t0, n = time.monotonic(), 0
    try:
        while time.monotonic() - t0 < secs:
            for ev in EVENTS:
                write(os.path.join(inst, "events", ev, "enable"), "1")
            time.sleep(0.01)
            for ev in EVENTS:
                write(os.path.join(inst, "events", ev, "enable"), "0")
            n += 1
            if n % 1000 == 0:
                print(f"{time.monotonic() - t0:7.1f} s: {n} toggles", flush=True)
    finally:
        ping.terminate()
        ping.wait()
        os.rmdir(inst)
        for k in keepers:
            for ev in EVENTS:
                write(os.path.join(k, "events", ev, "enable"), "0")
            os.rmdir(k)
        for online in offline:
            write(online, "1")
    print(f"mode {mode}: {n} toggles in {time.monotonic() - t0:.1f} s, no lockup",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
