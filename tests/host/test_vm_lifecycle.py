"""The project VM's life under control, with real qemu (TCG) boots from the host:

* a boot made to hang on purpose (``bb.delay=600`` on the kernel command line: the
  guest's bb-run waits before starting the command) with a short boot bound is ended
  by the watchdog, booted again, and finally fails with EXIT_BOOT_FAILED and a clear
  message, in bounded time, no qemu left behind;
* a VM run interrupted mid-way by SIGINT to its process group (what a terminal's
  Ctrl-C does) exits 130, its run record says ``interrupted``, its series are kept,
  no qemu is left behind.

Each test boots the VM (one VM per machine: they wait for another one to end) and
reads what ``session.run`` recorded of its boots (BUFFERBLOAT_VM_BOOT_LOG).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import ROOT, run_attempts

from bufferbloat.core import errors
from bufferbloat.core.errors import EXIT_DEGRADED
from bufferbloat.vm import boot, common, control, image, session

VM_RUN = os.path.join(ROOT, "vm", "run")


def _need_vm():
    assert os.geteuid() == 0, "VM tests need root: run them through ./run_tests.sh"
    common.check_tools()
    image.build_image(progress=None)


class _VMRun:
    """``vm/run`` in its own session (as a terminal's foreground job), its stderr lines
    kept with the time they arrived."""

    def __init__(self, args, env, stdout=subprocess.DEVNULL):
        self.lines: list[tuple[float, str]] = []
        self.proc = subprocess.Popen([VM_RUN, *args], env=env, stdout=stdout,
                                     stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def text(self):
        return "\n".join(line for _, line in self.lines)

    def first(self, needle):
        return next((t for t, line in self.lines if needle in line), None)

    def wait_for(self, needle, timeout_s):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.proc.poll() is None:
            if self.first(needle) is not None:
                return True
            time.sleep(0.2)
        return self.first(needle) is not None

    def finish(self, timeout_s=3600):
        """wait(), then (exit code, the command's stdout, vm/run's stderr lines), printed;
        the default bound includes waiting for another VM to end."""
        rc = self.wait(timeout_s)
        out = self.proc.stdout.read()
        text = self.text()
        print(text)
        return rc, out, text

    def wait(self, timeout_s):
        try:
            rc = self.proc.wait(timeout_s)
        finally:
            if self.proc.poll() is None:        # only what this test started, by PID
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._reader.join(10)
        return rc


def _boots(log_path):
    records = [json.loads(line) for line in Path(log_path).read_text().splitlines()
               if line.strip()]
    assert len(records) == 1, records
    return records[0]


def _qemu_alive(run_id):
    """Processes whose command line names this run's qemu (-name bb-vm-<run id>)."""
    alive = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"bb-vm-{run_id}".encode() in cmd:
            alive.append(int(entry))
    return alive


def test_hung_boot_is_ended_retried_and_fails_clearly(tmp_path):
    _need_vm()
    bound_s, attempts = 15, 2
    env = dict(os.environ, **{boot.APPEND_ENV: "bb.delay=600",
                              boot.BOOT_TIMEOUT_ENV: str(bound_s),
                              boot.BOOT_ATTEMPTS_ENV: str(attempts),
                              session.BOOT_LOG_ENV: str(tmp_path / "boots.jsonl")})
    run = _VMRun(["--", "echo", "the command must never start"], env,
                 stdout=subprocess.PIPE)
    rc, out, text = run.finish()
    assert rc == errors.EXIT_BOOT_FAILED == 4, text
    assert "the command must never start" not in out
    t_boot = run.first("boot 1/2")
    assert t_boot is not None, text
    # bound per boot + stopping qemu (<= 10 s) + a second boot: bounded, not 4 hours
    assert run.lines[-1][0] - t_boot < attempts * (bound_s + 15) + 15, text
    assert "boot 1/2 failed at stage" in text and "booting a fresh copy" in text
    assert "boot 2/2 failed at stage" in text
    assert "did not start the command in 2 boot(s)" in text and "exit code 4" in text
    assert "console|" in text                       # the console says where it stopped
    rec = _boots(tmp_path / "boots.jsonl")
    assert rec["rc"] == 4 and rec["end"] == "boot" and rec["boot_bound_s"] == bound_s
    assert [b["outcome"] for b in rec["boots"]] == ["hung", "hung"]
    assert all(b["stage"] in boot.STAGE_NAMES and b["stage"] != "command"
               for b in rec["boots"])
    assert len({b["qemu_pid"] for b in rec["boots"]}) == 2      # two distinct qemus
    assert _qemu_alive(rec["run_id"]) == []
    assert not (Path(ROOT) / control.CONTROL_DIR / rec["run_id"]).exists()


def test_timeout_stops_a_running_command_with_exit_124(tmp_path):
    """``vm/run --timeout S``: a command still running S seconds after vm/run got the
    VM (boot included) is stopped with its VM; exit 124 (as timeout(1)), in bounded
    time, recorded as such, no qemu left."""
    _need_vm()
    timeout_s = 60      # a TCG boot starts the command after 12-21 s (82 boots in
    #                     boots.jsonl; ~45 s once beside another qemu): the command runs
    #                     ~40 s into the deadline. A boot that hangs (~1 in 50) is stopped
    #                     at the boot bound, lowered to 50 s, and the deadline then stops
    #                     the second boot: the record says so (below)
    env = dict(os.environ, **{session.BOOT_LOG_ENV: str(tmp_path / "boots.jsonl"),
                              boot.BOOT_TIMEOUT_ENV: "50"})
    run = _VMRun(["--timeout", str(timeout_s), "--", "sh", "-c",
                  "echo the command ran; sleep 600; echo it was not stopped"], env,
                 stdout=subprocess.PIPE)
    rc, out, text = run.finish()
    assert rc == session.EXIT_TIMEOUT == 124, text
    assert "it was not stopped" not in out
    t_boot = run.first("boot 1/")
    assert t_boot is not None, text
    # the deadline, then stopping qemu (<= 10 s): not the command's 600 s
    assert timeout_s - 5 <= run.lines[-1][0] - t_boot <= timeout_s + 20, text
    assert "timeout: stopping qemu" in text
    rec = _boots(tmp_path / "boots.jsonl")
    assert rec["rc"] == 124 and rec["end"] == "timeout", rec
    # the deadline stops what runs then: the command (its boot "started"); or, after a
    # boot that hung (50 s) and a slow second one (up to ~45 s), that boot ("timeout")
    last = rec["boots"][-1]["outcome"]
    assert last in ("started", "timeout"), rec
    assert all(b["outcome"] == "hung" for b in rec["boots"][:-1]), rec
    if last == "started":
        assert "the command ran" in out, text
    else:
        assert len(rec["boots"]) > 1 and "the command ran" not in out, rec
    assert _qemu_alive(rec["run_id"]) == []
    assert not (Path(ROOT) / control.CONTROL_DIR / rec["run_id"]).exists()


def test_ctrl_c_interrupts_a_vm_run_and_its_record_says_so(tmp_path):
    _need_vm()
    out_rel = f".scratch/test-vm-interrupt-{os.getpid()}"
    out_dir = Path(ROOT) / out_rel
    shutil.rmtree(out_dir, ignore_errors=True)
    env = dict(os.environ, **{session.BOOT_LOG_ENV: str(tmp_path / "boots.jsonl")})
    try:
        run = _VMRun(["--", "python3", "-m", "bufferbloat", "run", "a1_fifo", "--time", "60",
                      "--out", out_rel], env, stdout=open(tmp_path / "out.log", "w"))
        assert run.wait_for("guest command started", 3600), run.text()
        # into the traffic: the run record exists and the sampler has written rows
        deadline = time.monotonic() + 240
        qdisc = None
        while time.monotonic() < deadline and run.proc.poll() is None:
            found = list(out_dir.glob("a1_fifo/*/series/qdisc.csv"))
            if found and found[0].stat().st_size > 2000:
                qdisc = found[0]
                break
            time.sleep(1)
        assert qdisc is not None, (run.text(), (tmp_path / "out.log").read_text())
        time.sleep(5)
        t_int = time.monotonic()
        os.killpg(run.proc.pid, signal.SIGINT)            # a terminal's Ctrl-C
        rc = run.wait(300)
        text = run.text()
        print(text)
        print((tmp_path / "out.log").read_text()[-3000:])
        assert rc == 130, text
        assert time.monotonic() - t_int < session.STOP_GRACE_S + 30, text
        assert "asking the guest command to stop" in text
        rec_path = qdisc.parent.parent / "result.json"
        rec = json.loads(rec_path.read_text())
        assert rec["status"] == "interrupted", rec.get("error")
        rows = qdisc.read_text().splitlines()
        assert len(rows) > 10, rows[:3]                   # the series up to the interrupt
        assert (qdisc.parent / "ping.csv").stat().st_size > 0
        boots = _boots(tmp_path / "boots.jsonl")
        assert boots["end"] == "interrupt" and boots["rc"] == 130
        assert boots["boots"][-1]["outcome"] == "started"
        assert _qemu_alive(boots["run_id"]) == []
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


# ---------------------------------------------------------------- a VM never outlives its command
def _run_id(boots_log):
    return _boots(boots_log)["run_id"]


def _nothing_left(run_id):
    """No qemu, no temporary folder, no control folder, no live file of ``run_id``."""
    import tempfile
    deadline = time.monotonic() + 15      # the boots line is written just before the rest
    while time.monotonic() < deadline and (
            _qemu_alive(run_id) or (common.cache_dir() / "live" / f"{run_id}.json").exists()):
        time.sleep(0.2)
    assert _qemu_alive(run_id) == []
    assert list(Path(tempfile.gettempdir()).glob(f"bb-vm-{run_id}-*")) == []
    assert not (Path(ROOT) / control.CONTROL_DIR / run_id).exists()
    assert not (common.cache_dir() / "live" / f"{run_id}.json").exists()


def _series_rows(out_dir, scenario):
    found = list(out_dir.glob(f"{scenario}/*/series/qdisc.csv"))
    return found[0] if found and found[0].stat().st_size > 2000 else None


def _wait_series(out_dir, scenario, alive, timeout_s=400):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and alive():
        found = _series_rows(out_dir, scenario)
        if found:
            return found
        time.sleep(1)
    return None


@pytest.fixture
def scratch(tmp_path):
    rel = f".scratch/test-vm-life-{os.getpid()}-{tmp_path.name}"
    out_dir = Path(ROOT) / rel
    shutil.rmtree(out_dir, ignore_errors=True)
    yield rel, out_dir
    shutil.rmtree(out_dir, ignore_errors=True)


def test_a_reader_that_goes_away_never_ends_the_run_nor_leaves_the_vm(tmp_path, scratch):
    """``bufferbloat run ... 2>&1 | head -3``: head exits after three lines; the run goes
    on in the VM to its end (output dropped), its record and series are kept, its boots
    are recorded and nothing of the VM is left (the host process used to die of a
    BrokenPipeError before stopping qemu)."""
    _need_vm()
    rel, out_dir = scratch
    boots_log = tmp_path / "boots.jsonl"
    script = ('"$4" -m bufferbloat run a2_pie --quick --time 5 --vm --out "$1" 2>&1 '
              '| head -3 > "$2"; echo "${PIPESTATUS[0]}" > "$3"')
    proc = subprocess.run(["bash", "-c", script, "bash", rel, str(tmp_path / "head.txt"),
                           str(tmp_path / "rc"), sys.executable], cwd=ROOT, timeout=1200,
                          env=dict(os.environ, PYTHONPATH=ROOT,
                                   **{session.BOOT_LOG_ENV: str(boots_log)}))
    assert proc.returncode == 0
    assert len((tmp_path / "head.txt").read_text().splitlines()) == 3
    # the run's own exit: 0, or EXIT_DEGRADED when the emulator fell behind (not this
    # test's subject: it asserts nothing on the run's timing)
    rc = int((tmp_path / "rc").read_text().strip())
    assert rc in (0, EXIT_DEGRADED)
    boots = _boots(boots_log)
    assert boots["end"] == "exit" and boots["rc"] == rc and boots["output_dropped"] is True
    # the run's last attempt (a degraded first one is run again in the same VM)
    run_dir, rec = run_attempts(out_dir.glob("a2_pie/*/result.json"))[-1]
    assert rec["status"] == "ok", rec.get("error")
    assert (Path(run_dir) / "series" / "qdisc.csv").stat().st_size > 2000
    _nothing_left(boots["run_id"])


def test_closing_the_terminal_stops_the_vm_and_closes_the_run(tmp_path, scratch):
    """tmux kill-session: the command gets SIGHUP (its terminal is gone); the guest
    command is asked to stop, the run is recorded ``interrupted`` with its series, qemu
    is stopped, exit 129 in the boots record, nothing left."""
    _need_vm()
    assert shutil.which("tmux"), "tmux is a test dependency (scripts/host-packages.txt)"
    rel, out_dir = scratch
    boots_log = tmp_path / "boots.jsonl"
    name = f"bb-test-{os.getpid()}"
    command = ["env", f"PYTHONPATH={ROOT}", f"{session.BOOT_LOG_ENV}={boots_log}",
               sys.executable, "-m", "bufferbloat", "run", "a1_fifo", "--time", "60", "--vm",
               "--out", rel]
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "200", "-y", "50",
                    "-c", ROOT, *command], check=True)
    try:
        def alive():
            return subprocess.run(["tmux", "has-session", "-t", name],
                                  capture_output=True).returncode == 0
        qdisc = _wait_series(out_dir, "a1_fifo", alive)
        assert qdisc is not None, "the run never reached its traffic"
        time.sleep(3)
        subprocess.run(["tmux", "kill-session", "-t", name], check=True)
        deadline = time.monotonic() + session.STOP_GRACE_S + 60
        while time.monotonic() < deadline and not (boots_log.exists()
                                                  and boots_log.read_text().strip()):
            time.sleep(0.5)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
    boots = _boots(boots_log)
    assert boots["end"] == "hangup" and boots["rc"] == 129, boots
    rec = json.loads((qdisc.parent.parent / "result.json").read_text())
    assert rec["status"] == "interrupted", rec.get("error")
    assert len(qdisc.read_text().splitlines()) > 10
    _nothing_left(boots["run_id"])


def test_sigkill_of_the_command_stops_qemu_and_the_next_command_cleans_up(tmp_path,
                                                                         scratch):
    """SIGKILL of the host process: its qemu dies with it (PR_SET_PDEATHSIG); the next
    VM command finds what it left (its live file, by PID), closes its run record
    (``interrupted``), records its boots (end ``killed``) and removes its folders."""
    _need_vm()
    rel, out_dir = scratch
    boots_log = tmp_path / "boots.jsonl"
    env = dict(os.environ, PYTHONPATH=ROOT, **{session.BOOT_LOG_ENV: str(boots_log)})
    proc = subprocess.Popen([sys.executable, "-m", "bufferbloat", "run", "a1_fifo",
                             "--time", "60", "--vm", "--out", rel], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        qdisc = _wait_series(out_dir, "a1_fifo", lambda: proc.poll() is None)
        assert qdisc is not None, "the run never reached its traffic"
        live = [json.loads(p.read_text()) for p in (common.cache_dir() / "live").glob("*.json")
                if json.loads(p.read_text()).get("host_pid") == proc.pid]
        assert len(live) == 1
        run_id = live[0]["run_id"]
    finally:
        os.kill(proc.pid, signal.SIGKILL)           # the host process alone, by PID
        proc.wait()
    deadline = time.monotonic() + 15
    while _qemu_alive(run_id) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _qemu_alive(run_id) == [], "qemu outlived its command"
    rec_path = qdisc.parent.parent / "result.json"
    assert json.loads(rec_path.read_text())["status"] == "running"
    nxt = subprocess.run([VM_RUN, "--", "true"], env=env, capture_output=True, text=True,
                         timeout=1200)
    assert nxt.returncode == 0, nxt.stderr[-3000:]
    assert f"killed command (pid {proc.pid})" in nxt.stderr
    rec = json.loads(rec_path.read_text())
    assert rec["status"] == "interrupted" and "SIGKILL" in rec["error"]
    assert len(qdisc.read_text().splitlines()) > 10            # its series kept
    lines = [json.loads(x) for x in boots_log.read_text().splitlines()]
    assert [x["end"] for x in lines] == ["killed", "exit"]
    assert lines[0]["run_id"] == run_id
    _nothing_left(run_id)
