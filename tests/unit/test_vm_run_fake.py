"""session.run's host side against a fake qemu (no VM is booted): the boot watchdog's retries,
SIGINT/SIGTERM asking the guest command to stop, run records closed by the host.

The fake ``qemu-system-x86_64`` (first on PATH) reads the run id, the share and the two
serial files from its arguments like qemu would, prints console lines like the project
VM does, and then plays the guest's bb-run: ``started``, the command in its own process
group, SIGINT to it when ``stop`` appears, ``rc``. FAKE_QEMU_MODE: ok, hang (stops after
systemd), silent (no console byte), die (exits while the command runs), lockup (its
kernel reports a soft lockup, longer each time, and the command never ends)."""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bufferbloat.core import errors  # noqa: E402
from bufferbloat.vm import boot, common, image, session  # noqa: E402

FAKE_QEMU = r'''#!/usr/bin/python3
import os, re, signal, subprocess, sys, time
from pathlib import Path
args = sys.argv[1:]
run_id = re.search(r"bb\.run=(\S+)", args[args.index("-append") + 1]).group(1)
share = re.search(r"path=(.*?),mount_tag", args[args.index("-virtfs") + 1]).group(1)
console, out = [args[i + 1][len("file:"):] for i, a in enumerate(args) if a == "-serial"]
Path(os.environ["FAKE_QEMU_PIDS"]).open("a").write(f"{os.getpid()}\n")
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
mode = os.environ.get("FAKE_QEMU_MODE", "ok")
con = open(console, "a", buffering=1)
if mode == "silent":
    time.sleep(3600)
con.write("[    0.0] Linux version 6.1.0-fake\nRun /init as init process\n"
          "[   10.0] systemd[1]: systemd 252 running in system mode\n")
if mode == "hang":
    time.sleep(3600)
ctl = Path(share) / ".vm-run" / run_id
con.write("bb-run: stage bb-run\nbb-run: stage share\nbb-run: stage held\n")
(ctl / "started").write_text("1.0\n")
con.write("bb-run: stage command\n")
import ctypes
# the guest's command ends with its VM, as it would in a real one
p = subprocess.Popen(["bash", str(ctl / "cmd")], cwd=share, stdout=open(out, "ab"),
                     stderr=subprocess.STDOUT, start_new_session=True,
                     preexec_fn=lambda: ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0))
if mode == "lockup":      # the kernel reports its CPU stuck, longer each time
    for stuck in (22, 45, 71, 105, 131, 164):
        time.sleep(0.5)
        con.write(f"[  {stuck + 60}.73] watchdog: BUG: soft lockup - CPU#0 stuck for "
                  f"{stuck}s! [python3:449]\n")
    time.sleep(3600)
stopped = False
while p.poll() is None:
    if mode == "die" and (Path(share) / "results").exists():
        time.sleep(0.5)
        os.killpg(p.pid, signal.SIGKILL)
        sys.exit(0)
    if not stopped and (ctl / "stop").exists():
        stopped = True
        os.killpg(p.pid, signal.SIGINT)
    time.sleep(0.1)
(ctl / "rc").write_text(f"{p.returncode if p.returncode >= 0 else 128 - p.returncode}\n")
'''

# the guest command: a run record "running" under results/, then wait; on SIGINT it
# records "interrupted" itself (cooperative) or ignores it (stubborn)
COMMAND = textwrap.dedent('''\
    import json, os, signal, sys, time
    path = "results/a1_fifo/r1/result.json"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    def save(status, error=None):
        with open(path + ".tmp", "w") as f:
            json.dump({"status": status, "error": error,
                       "machine": {"in_project_vm": True}}, f)
        os.replace(path + ".tmp", path)
    save("running")
    if sys.argv[1] == "stubborn":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    print("running", flush=True)
    try:
        time.sleep(60)
    except KeyboardInterrupt:
        save("interrupted", "KeyboardInterrupt (by the command)")
        sys.exit(130)
    ''')


@pytest.fixture
def fake(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    qemu = bin_dir / "qemu-system-x86_64"
    qemu.write_text(FAKE_QEMU)
    qemu.chmod(0o755)
    cache = tmp_path / "cache"
    cache.mkdir()
    for name in ("image-f.ext4", "vmlinuz-f", "initrd-f"):
        (cache / name).write_bytes(b"fake")
    (cache / "image.json").write_text(json.dumps(
        {"key": image.compute_cache_key(), "image": "image-f.ext4", "kernel": "vmlinuz-f",
         "initrd": "initrd-f"}))
    share = tmp_path / "share"
    share.mkdir()
    (share / "cmd.py").write_text(COMMAND)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv(common.CACHE_ENV, str(cache))
    monkeypatch.setenv(session.BOOT_LOG_ENV, str(tmp_path / "boots.jsonl"))
    monkeypatch.setenv("FAKE_QEMU_PIDS", str(tmp_path / "pids"))
    for name in (boot.BOOT_TIMEOUT_ENV, boot.BOOT_ATTEMPTS_ENV, boot.APPEND_ENV,
                 session.STOP_GRACE_ENV, boot.LOCKUP_ENV):
        monkeypatch.delenv(name, raising=False)

    class Fake:
        pass
    f = Fake()
    f.share, f.tmp, f.msgs = share, tmp_path, []
    f.record = share / "results/a1_fifo/r1/result.json"

    def run(command=("python3", "cmd.py", "cooperative"), **kw):
        out = (tmp_path / "out.log").open("wb")
        try:
            return session.run(list(command), share=share, accel="tcg", progress=f.msgs.append,
                          output=out, **kw)
        finally:
            out.close()
    f.run = run
    f.text = lambda: "\n".join(f.msgs)
    f.boots = lambda: json.loads((tmp_path / "boots.jsonl").read_text().splitlines()[-1])
    f.status = lambda: json.loads(f.record.read_text())
    yield f
    for pid in (tmp_path / "pids").read_text().split() if (tmp_path / "pids").exists() \
            else []:
        assert not _alive(int(pid)), f"fake qemu {pid} left running"


def _alive(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _signal_when_started(fake, sig, after_s=0.5):
    """Send ``sig`` to this process once the guest command printed 'running'."""
    def go():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            log = fake.tmp / "out.log"
            if log.exists() and b"running" in log.read_bytes():
                time.sleep(after_s)
                os.kill(os.getpid(), sig)
                return
            time.sleep(0.05)
    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


def test_ok_run_returns_the_command_rc_and_records_one_boot(fake):
    assert fake.run(["bash", "-c", "echo hi; exit 5"]) == 5
    assert (fake.tmp / "out.log").read_bytes() == b"hi\n"
    rec = fake.boots()
    assert rec["rc"] == 5 and rec["end"] == "exit" and 0 < rec["wall_s"] < 30
    assert [b["outcome"] for b in rec["boots"]] == ["started"]
    assert list(rec["boots"][0]["stages"]) == list(boot.STAGE_NAMES)
    assert "command started" in fake.text() and "0 retries" in fake.text()


def test_hung_boots_are_retried_then_rc_boot_failed(fake, monkeypatch):
    monkeypatch.setenv("FAKE_QEMU_MODE", "hang")
    monkeypatch.setenv(boot.BOOT_TIMEOUT_ENV, "2")
    monkeypatch.setenv(boot.BOOT_ATTEMPTS_ENV, "3")
    t0 = time.monotonic()
    assert fake.run(["true"]) == errors.EXIT_BOOT_FAILED
    assert time.monotonic() - t0 < 3 * 2 + 10
    text = fake.text()
    for i in (1, 2, 3):
        assert f"boot {i}/3 failed at stage 'systemd'" in text
    assert text.count("booting a fresh copy") == 2
    assert "console| [   10.0] systemd[1]" in text
    assert "did not start the command in 3 boot(s)" in text
    rec = fake.boots()
    assert rec["rc"] == 4 and rec["end"] == "boot"
    assert [b["outcome"] for b in rec["boots"]] == ["hung"] * 3
    assert len((fake.tmp / "pids").read_text().split()) == 3
    # each failed boot's logs outlive the run, beside the boots' log
    for b in rec["boots"]:
        kept = Path(b["logs"])
        assert kept.parent == fake.tmp / "failed-boots", kept
        assert "systemd[1]" in (kept / "console.log").read_text()
        assert (kept / "qemu.log").is_file()
        assert f"logs kept in {kept}" in text


def test_only_the_newest_failed_boots_logs_are_kept(tmp_path, monkeypatch):
    monkeypatch.setenv(session.BOOT_LOG_ENV, str(tmp_path / "boots.jsonl"))
    monkeypatch.setattr(session, "FAILED_BOOTS_KEPT", 3)
    attempt = tmp_path / "boot-1"
    attempt.mkdir()
    for i in range(5):
        (attempt / "console.log").write_text(f"boot {i}\n")
        kept = session.keep_failed_boot(attempt, f"run{i}-boot1")
        os.utime(kept, (1000 + i, 1000 + i))
    left = sorted(d.name for d in (tmp_path / "failed-boots").iterdir())
    # the 4th call removed run0; the 5th, run1 (run4 copied before the oldest went)
    assert left == ["run2-boot1", "run3-boot1", "run4-boot1"], left
    assert (tmp_path / "failed-boots/run4-boot1/console.log").read_text() == "boot 4\n"
    assert not (tmp_path / "failed-boots/run4-boot1/out.log").exists()


def test_silent_console_is_caught_by_the_first_output_bound(fake, monkeypatch):
    monkeypatch.setenv("FAKE_QEMU_MODE", "silent")
    monkeypatch.setattr(boot, "FIRST_OUTPUT_S", {"tcg": 1.0})
    monkeypatch.setenv(boot.BOOT_TIMEOUT_ENV, "60")
    monkeypatch.setenv(boot.BOOT_ATTEMPTS_ENV, "1")
    t0 = time.monotonic()
    assert fake.run(["true"]) == errors.EXIT_BOOT_FAILED
    assert time.monotonic() - t0 < 15
    assert "no console output after 1s" in fake.text()
    assert fake.boots()["boots"][0]["stage"] == "qemu"


def test_sigterm_asks_the_command_to_stop_and_exits_143(fake):
    _signal_when_started(fake, signal.SIGTERM)
    with pytest.raises(SystemExit) as e:
        fake.run()
    assert e.value.code == errors.EXIT_TERMINATED == 143
    assert "asking the guest command to stop" in fake.text()
    rec = fake.status()
    assert rec["status"] == "interrupted"
    assert rec["error"] == "KeyboardInterrupt (by the command)"    # its own record
    assert "closed_by_host" not in rec
    boots = fake.boots()
    assert boots["end"] == "terminate" and boots["rc"] == 143
    assert signal.getsignal(signal.SIGTERM) is not None          # handler restored


def test_sigint_with_a_stubborn_command_the_host_closes_the_record(fake, monkeypatch):
    monkeypatch.setenv(session.STOP_GRACE_ENV, "1.5")
    handler = signal.getsignal(signal.SIGINT)
    _signal_when_started(fake, signal.SIGINT)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        fake.run(["python3", "cmd.py", "stubborn"])
    assert time.monotonic() - t0 < 15
    assert "did not stop within 2s" in fake.text()
    rec = fake.status()
    assert rec["status"] == "interrupted" and "SIGINT" in rec["error"]
    assert rec["closed_by_host"]["by"] == "bufferbloat.vm"
    assert fake.boots()["end"] == "interrupt"
    assert signal.getsignal(signal.SIGINT) is handler


def test_a_guest_that_dies_mid_run_leaves_a_failed_record_and_rc_3(fake, monkeypatch):
    monkeypatch.setenv("FAKE_QEMU_MODE", "die")
    assert fake.run() == errors.EXIT_NO_RESULT
    rec = fake.status()
    assert rec["status"] == "failed" and "guest crash" in rec["error"]
    assert fake.boots()["end"] == "crash"


def test_sighup_asks_the_command_to_stop_and_exits_129(fake):
    """Closing the terminal (tmux kill-session) sends SIGHUP: handled as SIGTERM is."""
    _signal_when_started(fake, signal.SIGHUP)
    with pytest.raises(SystemExit) as e:
        fake.run()
    assert e.value.code == 128 + signal.SIGHUP == 129
    assert "SIGHUP: asking the guest command to stop" in fake.text()
    assert fake.status()["status"] == "interrupted"
    boots = fake.boots()
    assert boots["end"] == "hangup" and boots["rc"] == 129


def test_a_closed_output_pipe_is_dropped_and_the_run_completes(fake):
    """``run ... | head -3``: the reader goes away; the run goes on to its end, its
    record and its boots line are written, nothing of the VM is left."""
    r, w = os.pipe()
    os.close(r)
    out = os.fdopen(w, "wb")

    def progress(msg):
        raise BrokenPipeError(32, "Broken pipe")
    try:
        rc = session.run(["bash", "-c", "for i in 1 2 3 4 5; do echo line $i; done; exit 7"],
                         share=fake.share, accel="tcg", progress=progress, output=out)
    finally:
        out.close()
    assert rc == 7
    boots = fake.boots()
    assert boots["rc"] == 7 and boots["end"] == "exit" and boots["output_dropped"] is True
    assert not list((fake.share / ".vm-run").iterdir())
    assert not list(fake.tmp.glob("cache/live/*.json"))


# a host command run in a child process (this process must survive what it meets)
HOST_COMMAND = textwrap.dedent('''\
    import os, sys
    sys.path.insert(0, {repo!r})
    from bufferbloat.vm import session
    rc = "?"
    try:
        rc = session.run(["python3", "cmd.py", "cooperative"], share={share!r}, accel="tcg",
                         output=open({out!r}, "wb"), progress=lambda m: None)
    except SystemExit as e:
        rc = e.code
    finally:
        open({rc_file!r}, "w").write(str(rc))
    ''')


def _host_command(fake):
    script = fake.tmp / "host.py"
    script.write_text(HOST_COMMAND.format(repo=str(REPO), share=str(fake.share),
                                          out=str(fake.tmp / "out.log"),
                                          rc_file=str(fake.tmp / "rc")))
    return script


def _wait_for(cond, timeout_s=30, what="condition"):
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _guest_running(fake):
    log = fake.tmp / "out.log"
    return log.exists() and b"running" in log.read_bytes()


def test_sigkill_of_the_host_command_stops_qemu_and_the_next_command_cleans_up(fake):
    """SIGKILL leaves no handler to run: qemu dies with its parent (PR_SET_PDEATHSIG),
    and the next VM command finds the live file, closes the run record, records the
    boots and removes the folders."""
    proc = subprocess.Popen([sys.executable, str(_host_command(fake))])
    _wait_for(lambda: _guest_running(fake), what="the guest command")
    live = list((fake.tmp / "cache" / "live").glob("*.json"))
    assert len(live) == 1
    data = json.loads(live[0].read_text())
    proc.kill()
    proc.wait()
    _wait_for(lambda: not _alive(data["qemu_pid"]), 10, "qemu to die with its parent")
    assert fake.status()["status"] == "running"          # nobody closed it yet
    assert Path(data["tmp"]).is_dir() and Path(data["ctl"]).is_dir()
    msgs = []
    assert session.recover_killed(msgs.append) == [data["run_id"]]
    rec = fake.status()
    assert rec["status"] == "interrupted" and "SIGKILL" in rec["error"]
    boots = fake.boots()
    assert boots["end"] == "killed" and boots["run_id"] == data["run_id"]
    assert boots["boots"] == [] or boots["boots"][0]["attempt"] == 1
    assert not Path(data["tmp"]).exists() and not Path(data["ctl"]).exists()
    assert not live[0].exists()
    assert f"killed command (pid {proc.pid})" in "\n".join(msgs)
    assert session.recover_killed(msgs.append) == []     # once


def test_the_parents_death_stops_the_vm_as_sighup(fake):
    """The process that started the command dies (its terminal's shell, a pipeline):
    the command is re-parented, notices, and stops its VM as on SIGHUP."""
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f'''\
        import subprocess, sys, time
        subprocess.Popen([sys.executable, {str(_host_command(fake))!r}])
        time.sleep(3600)
        ''')])
    _wait_for(lambda: _guest_running(fake), what="the guest command")
    parent.kill()
    parent.wait()
    _wait_for(lambda: (fake.tmp / "rc").exists(), 40, "the orphaned command to end")
    assert (fake.tmp / "rc").read_text() == "129"
    assert fake.status()["status"] == "interrupted"
    assert fake.boots()["end"] == "hangup"
    assert not list((fake.tmp / "cache" / "live").glob("*.json"))


def test_a_guest_kernel_that_locks_up_is_stopped_with_exit_6(fake, monkeypatch):
    """A soft lockup reported for LOCKUP_ENV seconds or more stops the VM (by PID) with
    EXIT_LOCKUP, names the stuck CPU and task, and closes the run it left running as
    failed; a shorter one (the kernel's first reports) does not."""
    monkeypatch.setenv("FAKE_QEMU_MODE", "lockup")
    monkeypatch.setenv(boot.LOCKUP_ENV, "100")
    t0 = time.monotonic()
    assert fake.run() == errors.EXIT_LOCKUP
    assert time.monotonic() - t0 < 30
    text = fake.text()
    # checked every 5 s: the report names a stuck time at the bound or beyond it
    stuck = re.search(r"locked up: CPU#0 stuck for (\d+)s in python3:449", text)
    assert stuck and int(stuck[1]) >= 100, text
    assert "exit code 6" in text
    rec = fake.boots()
    assert rec["rc"] == errors.EXIT_LOCKUP and rec["end"] == "lockup"
    status = fake.status()
    assert status["status"] == "failed" and "locked up" in status["error"]


def test_the_lockup_bound_reads_the_kernels_report():
    console = (REPO / "tests/fixtures/vm/console-soft-lockup.txt").read_text()
    assert boot.guest_lockup(console, 120) == (
        "the guest kernel locked up: CPU#0 stuck for 131s in python3:449 (soft lockup, "
        "bound 120s)")
    assert boot.guest_lockup(console, 132) is None          # its longest: 131 s
    assert boot.guest_lockup("bb-run: stage command\n", 30) is None
    with pytest.raises(common.VMError):
        os.environ[boot.LOCKUP_ENV] = "5"
        try:
            boot.lockup_bound()
        finally:
            del os.environ[boot.LOCKUP_ENV]
