#!/usr/bin/python3
"""Plant bugs, one at a time, in a copy of the tree and run the gate on each copy:
does the gate catch every one of them, and with which test?

Usage (as root: the gate needs namespaces, qdiscs and the project VM):

    sudo /usr/bin/python3 bench/plant_bugs.py              # every bug
    sudo /usr/bin/python3 bench/plant_bugs.py --bug NAME   # one (repeatable)
    /usr/bin/python3 bench/plant_bugs.py --list            # list them, check each applies

Each bug is one exact text replacement (name, file, old text, new text). The old text
must occur exactly once in its file (checked in the source tree before anything runs,
and again in the copy): a refactor that moves the code makes this script fail loudly
(exit 2) instead of silently planting nothing.

For each bug: the files ``git ls-files`` lists are copied from the working tree into a
temporary directory, the bug is planted there (this tree is never modified), and the
gate runs on the copy in stages, stopping at the first that fails:

1. ``unit``: ``pytest -x -q tests/unit`` (env BUFFERBLOAT_TEST_TIER=gate,
   PYTHONPATH=<copy>), about 3 minutes;
2. ``host`` (only with ``--all-phases``): ``./run_tests.sh --host -- -x`` in the copy;
   left out by default (a host without every qdisc kind skips most of it);
3. ``vm``: ``./run_tests.sh --vm -- -x`` in the copy, about 10 minutes, holding an
   exclusive ``flock`` on /tmp/bb-vm.lock (one VM at a time on this machine; the VM
   image is found cached: vm/ is copied unchanged).

``--stage unit|host|vm`` runs only that stage. ``--baseline`` first runs the first
stage on an unplanted copy (a failing baseline means the tree itself is red: every bug
would look caught) and stops if it fails. The copy is removed after each bug, and on Ctrl-C
or SIGTERM (the running stage's process group gets SIGINT, then SIGTERM, SIGKILL).

The tests that caught a bug are read from the stage's test record
(``.scratch/test-records/*.json`` in the copy: every test whose outcome is failed or
error), else from pytest's output (FAILED / ERROR lines); each stage's output and
records are kept in /var/tmp/plant-bugs-logs/<stamp>/. Output: a table (bug, where
planted, caught, by which test, time). Exit 0 only if every bug was caught; 1 if one was
not; 2 for a usage error or a bug whose old text is not found exactly once.
"""

import argparse
import fcntl
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))     # tests.record: the records' reader
PY = "/usr/bin/python3"
VM_LOCK = "/tmp/bb-vm.lock"
#: a stage that has not ended by then is stopped and counted as not caught
STAGE_TIMEOUT_S = {"unit": 20 * 60, "host": 60 * 60, "vm": 60 * 60}
STAGES = ("unit", "host", "vm")
HEARTBEAT_S = 60.0
#: each stage's output and test records are kept here (the copy itself is removed)
LOG_ROOT = Path("/var/tmp/plant-bugs-logs")


@dataclass(frozen=True)
class Bug:
    name: str
    file: str
    old: str
    new: str
    what: str


BUGS = (
    Bug("pie_target_unit", "bufferbloat/net/qdiscs/pie.py",
        '"target", ms(p["target_ms"]),',
        '"target", f"{p[\'target_ms\']:g}us",',
        "PIE's target passed to tc in us instead of ms (15 ms becomes 15 us)"),
    Bug("fifo_limit_x10", "bufferbloat/net/qdiscs/fifo.py",
        'return ["pfifo", "limit", str(p["limit_pkts"])]',
        'return ["pfifo", "limit", str(p["limit_pkts"] * 10)]',
        "pfifo's limit off by a factor of ten (100 packets become 1000)"),
    Bug("htb_rate_factor", "bufferbloat/net/bottleneck.py",
        'return f"{int(round(rate_mbit * 1e6))}bit"',
        'return f"{int(round(rate_mbit * 1.024e6))}bit"',
        "HTB rates (the bottleneck's) scaled by 1.024e6 instead of 1e6 bit/s per Mbit/s"),
    Bug("udp_stream_3s_early", "bufferbloat/traffic/udpstream.py",
        "return [(self.stream, self.start_s, None)]",
        "return [(self.stream, max(0.0, self.start_s - 3.0), None)]",
        "a UDP stream part scheduled 3 s before its start"),
    Bug("ecn_not_negotiated", "bufferbloat/net/hosts.py",
        'want["net.ipv4.tcp_ecn"] = "1"',
        "pass  # planted: net.ipv4.tcp_ecn left at the kernel's default",
        "hosts of an ECN topology not asked to negotiate ECN (tcp_ecn not set)"),
    Bug("cca_not_applied", "bufferbloat/net/hosts.py",
        "want[CCA_SYSCTL] = self.topo.ccas[host]",
        "pass  # planted: the sender's congestion control not set",
        "the senders' congestion control (net.ipv4.tcp_congestion_control) not set"),
    Bug("netem_delay_doubled", "bufferbloat/net/bottleneck.py",
        '"delay", f"{imp.delay_ms:g}ms"]',
        '"delay", f"{2 * imp.delay_ms:g}ms"]',
        "netem's delay doubled"),
    Bug("aqm_wrong_interface", "bufferbloat/net/bottleneck.py",
        "steps += shaped(None, bn_out, bnl.rate_mbit, topo.qdisc.tc_args(bnl.rate_mbit),",
        "steps += shaped(None, port_if, bnl.rate_mbit, topo.qdisc.tc_args(bnl.rate_mbit),",
        "the bottleneck's shaper and AQM installed on the switch's port towards a sender "
        "instead of the one towards the receiver"),
    Bug("sampler_period_doubled", "bufferbloat/measure/sampler.py",
        '"out_dir": os.path.abspath(out_dir), "period_s": period_s,',
        '"out_dir": os.path.abspath(out_dir), "period_s": period_s * 2,',
        "the sampler process samples every 2 x period_s (20 ms instead of 10 ms)"),
    Bug("goodput_from_sender_bytes", "bufferbloat/results/metrics_flows.py",
        '_, acked = counter_delta(tcp["t"][mask], tcp["bytes_acked"][mask], cutoff_s)',
        '_, acked = counter_delta(tcp["t"][mask], tcp["bytes_sent"][mask], cutoff_s)',
        "network goodput computed from the senders' bytes_sent, not bytes_acked"),
    # cheap extras
    Bug("red_probability_wrong", "bufferbloat/net/qdiscs/red.py",
        "\"probability\", f\"{p['probability']:g}\"",
        "\"probability\", f\"{p['probability'] / 10:g}\"",
        "RED's max probability passed a tenth of the configured one"),
    Bug("codel_interval_wrong", "bufferbloat/net/qdiscs/codel.py",
        '"interval", ms(p["interval_ms"])',
        '"interval", ms(p["target_ms"])',
        "CoDel's interval set to its target (copy-paste)"),
    Bug("degraded_reported_healthy", "bufferbloat/results/health.py",
        'verdict = ("faulty" if faults else "degraded" if problems',
        'verdict = ("faulty" if faults else "healthy" if problems',
        "a run with (non-fault) health problems reported healthy instead of degraded"),
    Bug("scaling_factor_inverted", "bufferbloat/net/scaling.py",
        "    f = max_rate_mbit / rate\n",
        "    f = rate / max_rate_mbit\n",
        "rate scaling's factor inverted (buffers and traffic rates scaled the wrong way)"),
)
BY_NAME = {b.name: b for b in BUGS}


#: the result of the bug being run (its stages so far), for a report after a stop
CURRENT = []


class Stop(Exception):
    """Ctrl-C or SIGTERM: stop, clean up, report what ended."""


def _on_term(signum, frame):
    raise Stop(f"signal {signum}")


def elapsed(t0):
    s = int(time.monotonic() - t0)
    return f"{s // 60}m{s % 60:02d}s"


def say(msg):
    print(f"[plant_bugs {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ------------------------------------------------------------------------ planting
def locate(text, bug):
    """(line number of bug.old in text) or raise SystemExit: not exactly once."""
    n = text.count(bug.old)
    if n != 1:
        raise SystemExit(f"plant_bugs: bug {bug.name}: the old text occurs {n} times in "
                         f"{bug.file} (must be exactly once; the code moved? update the "
                         f"bug):\n  {bug.old!r}")
    return text[:text.index(bug.old)].count("\n") + 1


def check_bugs(bugs, root=ROOT):
    """{name: 'file:line'} of each bug in the tree at root; exits 2 on the first bug
    whose old text is not there exactly once (or whose file is missing)."""
    where = {}
    for bug in bugs:
        path = root / bug.file
        if not path.is_file():
            raise SystemExit(f"plant_bugs: bug {bug.name}: no file {bug.file}")
        where[bug.name] = f"{bug.file}:{locate(path.read_text(), bug)}"
    return where


def tracked_files():
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], check=True,
                         capture_output=True).stdout.decode()
    return [f for f in out.split("\0") if f]


def make_copy(tag):
    """A temporary copy of the tracked files (as they are in the working tree)."""
    dest = Path(tempfile.mkdtemp(prefix=f"bb-plant-{tag}-", dir="/var/tmp"))
    for rel in tracked_files():
        src = ROOT / rel
        if not os.path.lexists(src):      # deleted in the working tree
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target, follow_symlinks=False)
    return dest


def plant(copy, bug):
    path = copy / bug.file
    text = path.read_text()
    locate(text, bug)
    path.write_text(text.replace(bug.old, bug.new, 1))
    if path.read_text().count(bug.new) < 1:
        raise SystemExit(f"plant_bugs: bug {bug.name}: the new text is not in the copy")


# ------------------------------------------------------------------------ stages
class VmLock:
    """Exclusive flock on /tmp/bb-vm.lock while a VM stage runs."""

    def __enter__(self):
        self.f = open(VM_LOCK, "a+")
        try:
            fcntl.flock(self.f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting for {VM_LOCK} (another VM run holds it)")
            t0 = time.monotonic()
            fcntl.flock(self.f, fcntl.LOCK_EX)
            say(f"got {VM_LOCK} after {elapsed(t0)}")
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


def run_logged(argv, cwd, env, log_path, timeout_s, label, t_bug):
    """Run argv in its own process group with output to log_path, printing a heartbeat;
    returns its exit code (None: timed out). On Stop, the group gets SIGINT (20 s for
    the VM's guest to end), then SIGTERM, then SIGKILL, and Stop is raised again."""
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    t0 = time.monotonic()
    next_beat = t0 + HEARTBEAT_S
    try:
        while True:
            try:
                return proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if now - t0 > timeout_s:
                say(f"  {label}: no end after {timeout_s} s: stopping it")
                _stop_group(proc)
                return None
            if now >= next_beat:
                next_beat += HEARTBEAT_S
                say(f"  {label}: running {elapsed(t0)} (bug {elapsed(t_bug)}); "
                    f"{_last_line(log_path)}")
    except BaseException:
        _stop_group(proc)
        raise


def _stop_group(proc):
    for sig, wait_s in ((signal.SIGINT, 45), (signal.SIGTERM, 15), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)      # the group this script started (its own pid)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue


def _last_line(path):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 2000))
            tail = f.read().decode(errors="replace")
        pct = re.findall(r"\[\s*(\d+%)\]", tail)     # pytest -q's progress
        lines = [ln for ln in tail.splitlines() if ln.strip()]
        if pct and lines and set(lines[-1].strip()) <= set(".sxX"):
            return f"pytest at {pct[-1]}"
        return ("last: " + lines[-1].strip()[:110]) if lines else "(no output yet)"
    except OSError:
        return ""


def failed_tests(record_paths, log_path):
    """The tests that failed (record JSONs, else pytest's FAILED/ERROR lines)."""
    names = []
    from tests import record  # noqa: PLC0415 - the records' reader (this checkout's)
    for path in record_paths:
        data = record.read(path)
        if data is None:
            continue
        for test, e in sorted((data.get("tests") or {}).items()):
            if (e or {}).get("outcome") in ("failed", "error") and test not in names:
                names.append(test)
    try:
        text = Path(log_path).read_text(errors="replace")
    except OSError:
        text = ""
    for m in re.finditer(r"^(?:FAILED|ERROR) (\S+)", text, re.M):
        if m.group(1) not in names and not any(m.group(1) in n for n in names):
            names.append(m.group(1))
    return names


def run_stage(stage, copy, t_bug, tag, keep_dir):
    """Run one stage in the copy: (caught: bool | None for an error, [tests], note).
    Its output and test records are copied to ``keep_dir``."""
    logs = copy / ".scratch" / "plant-logs"
    logs.mkdir(parents=True, exist_ok=True)
    records = copy / ".scratch" / "test-records"
    log_path = logs / f"{stage}.log"
    env = dict(os.environ)
    env.pop("BUFFERBLOAT_TEST_RECORD", None)
    if stage == "unit":
        records.mkdir(parents=True, exist_ok=True)
        record = records / "plant-gate-unit.json"
        env.update(BUFFERBLOAT_TEST_TIER="gate", BUFFERBLOAT_TEST_PHASE="host",
                   PYTHONPATH=str(copy), BUFFERBLOAT_TEST_RECORD=str(record))
        argv = [PY, "-m", "pytest", "-p", "no:cacheprovider", "-x", "-q", "tests/unit"]
        rc = run_logged(argv, copy, env, log_path, STAGE_TIMEOUT_S[stage],
                        f"{tag} unit", t_bug)
        record_paths = [record]
    else:
        env.pop("BUFFERBLOAT_TEST_TIER", None)
        env.pop("PYTHONPATH", None)
        argv = ["./run_tests.sh", f"--{stage}", "--", "-x"]
        if stage == "vm":
            with VmLock():
                rc = run_logged(argv, copy, env, log_path, STAGE_TIMEOUT_S[stage],
                                f"{tag} vm", t_bug)
        else:
            rc = run_logged(argv, copy, env, log_path, STAGE_TIMEOUT_S[stage],
                            f"{tag} host", t_bug)
        record_paths = sorted(glob.glob(str(records / f"*-gate-{stage}.json")))
    tests = failed_tests(record_paths, log_path)
    keep_dir.mkdir(parents=True, exist_ok=True)
    for path in [log_path] + [Path(p) for p in record_paths]:
        if path.is_file():
            shutil.copy2(path, keep_dir / f"{tag}-{stage}-{path.name}")
    if rc == 0:
        return False, [], "passed"
    if rc is None:
        return None, tests, f"timed out after {STAGE_TIMEOUT_S[stage]} s"
    # pytest: 1 tests failed, 2 interrupted / collection errors; run_tests.sh: 1 a phase
    # failed, 2 could not start (deps, sampler build, VM image)
    if rc in (1, 2) and tests:
        return True, tests, f"exit {rc}"
    text = Path(log_path).read_text(errors="replace")
    if rc in (1, 2) and re.search(r"^(E |ERROR|FAILED|Traceback)", text, re.M):
        return True, ["(pytest: " + _first_error(text) + ")"], f"exit {rc}"
    tail = " | ".join(text.strip().splitlines()[-3:])[:300]
    return None, tests, f"exit {rc}, no failing test named: {tail}"


def _first_error(text):
    for line in text.splitlines():
        if line.startswith(("E ", "ERROR", "FAILED")):
            return line.strip()[:150]
    return "error"


# ------------------------------------------------------------------------ main
def run_bug(bug, stages, where, keep_dir):
    """Plant ``bug`` (None: the unplanted baseline) in a fresh copy and run the stages;
    returns a result dict. The copy is removed whatever happens."""
    tag = bug.name if bug else "baseline"
    t_bug = time.monotonic()
    copy = make_copy(tag[:24])
    result = {"bug": tag, "where": where.get(tag, "-"), "caught": False, "by": [],
              "stage": None, "note": "", "time_s": 0.0, "stages": []}
    CURRENT[:] = [result]       # what main reports if a stop comes half-way
    try:
        if bug:
            plant(copy, bug)
        say(f"{tag}: planted in {result['where']} (copy {copy})")
        for stage in stages:
            t_stage = time.monotonic()
            say(f"{tag}: stage {stage} ...")
            caught, tests, note = run_stage(stage, copy, t_bug, tag, keep_dir)
            result["stages"].append(f"{stage} {elapsed(t_stage)} {note}")
            say(f"{tag}: stage {stage}: "
                + ("CAUGHT by " + ", ".join(tests[:3]) if caught
                   else "not caught" if caught is False else "ERROR: " + note)
                + f" ({elapsed(t_stage)})")
            if caught is None:
                result.update(caught=None, note=f"{stage}: {note}", stage=stage)
                break
            if caught:
                result.update(caught=True, by=tests, stage=stage)
                break
    finally:
        shutil.rmtree(copy, ignore_errors=True)
        result["time_s"] = time.monotonic() - t_bug
    return result


def table(results, not_run=()):
    rows = [("bug", "where planted", "caught", "caught by (stage: test)", "time")]
    for r in results:
        caught = {True: "yes", False: "NO", None: "ERROR", "stopped": "stopped"}[r["caught"]]
        if r["caught"] is True:
            by = f"{r['stage']}: " + "; ".join(r["by"][:3])
            if len(r["by"]) > 3:
                by += f" (+{len(r['by']) - 3})"
        elif r["caught"] is None or r["caught"] == "stopped":
            by = r["note"]
        else:
            by = "-"
        s = int(r["time_s"])
        rows.append((r["bug"], r["where"], caught, by, f"{s // 60}m{s % 60:02d}s"))
    for name, where in not_run:
        rows.append((name, where, "not run", "-", "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = []
    for i, row in enumerate(rows):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row[:4], widths)) + "  " + row[4])
        if i == 0:
            lines.append("  ".join("-" * w for w in widths) + "  " + "-----")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Plant bugs one at a time in a copy of the tree and run the gate on "
                    "each. Exit 0 only if every bug was caught.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="bugs:\n" + "\n".join(f"  {b.name:27} {b.what}" for b in BUGS))
    ap.add_argument("--list", action="store_true",
                    help="list the bugs and check each applies to this tree; run nothing")
    ap.add_argument("--bug", action="append", metavar="NAME", choices=sorted(BY_NAME),
                    help="plant only this bug (repeatable)")
    ap.add_argument("--stage", choices=STAGES,
                    help="run only this stage (default: unit, then vm if unit missed it)")
    ap.add_argument("--all-phases", action="store_true",
                    help="also run the gate's host phase (./run_tests.sh --host) between "
                         "the unit and the VM stage")
    ap.add_argument("--baseline", action="store_true",
                    help="first run the first stage on an unplanted copy; stop if it fails")
    args = ap.parse_args(argv)

    bugs = [BY_NAME[n] for n in args.bug] if args.bug else list(BUGS)
    where = check_bugs(bugs)       # exits 2 if a bug's old text is not there exactly once
    if args.list:
        for b in bugs:
            print(f"{b.name:27} {where[b.name]:42} {b.what}")
        print(f"{len(bugs)} bugs; each old text found exactly once")
        return 0
    if os.geteuid() != 0:
        print("plant_bugs: run as root (sudo /usr/bin/python3 bench/plant_bugs.py): the "
              "gate needs namespaces, qdiscs and the VM", file=sys.stderr)
        return 2
    if args.stage:
        stages = [args.stage]
    else:
        stages = ["unit"] + (["host"] if args.all_phases else []) + ["vm"]

    signal.signal(signal.SIGTERM, _on_term)
    # Ctrl-C even when started in the background (where a shell leaves SIGINT ignored)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    t0 = time.monotonic()
    results = []
    keep_dir = LOG_ROOT / time.strftime("%Y%m%d-%H%M%S")
    say(f"stage logs and test records: {keep_dir}")
    say(f"{len(bugs)} bug(s), stages {' -> '.join(stages)} (stop at the first that catches)")
    try:
        if args.baseline:
            base = run_bug(None, stages[:1], where, keep_dir)
            if base["caught"] is not False:
                say("the unplanted copy does not pass: " + "; ".join(base["by"][:5])
                    + " " + base["note"] + ": stopping (every bug would look caught)")
                return 2
            say(f"baseline passed in {elapsed(t0)}")
        for i, bug in enumerate(bugs, 1):
            say(f"=== bug {i}/{len(bugs)}: {bug.name}: {bug.what} (total {elapsed(t0)})")
            results.append(run_bug(bug, stages, where, keep_dir))
    except (KeyboardInterrupt, Stop) as exc:
        say(f"interrupted ({str(exc) or 'Ctrl-C'}): the copy was removed; what ended so far:")
        if CURRENT and CURRENT[0] not in results and CURRENT[0]["bug"] in BY_NAME:
            part = CURRENT[0]
            done = "; ".join(part["stages"]) or "no stage ended"
            part.update(caught="stopped", note=f"stopped half-way ({done})")
            results.append(part)
    done = {r["bug"] for r in results}
    not_run = [(b.name, where[b.name]) for b in bugs if b.name not in done]
    print()
    print(table(results, not_run))
    missed = [r["bug"] for r in results if r["caught"] is not True]
    print(f"\n{sum(r['caught'] is True for r in results)} of {len(bugs)} bugs caught"
          + (f"; not caught: {', '.join(missed)}" if missed else "")
          + (f"; not run: {', '.join(n for n, _ in not_run)}" if not_run else "")
          + f"; wall time {elapsed(t0)}; logs in {keep_dir}")
    return 0 if not missed and not not_run else 1


if __name__ == "__main__":
    sys.exit(main())
