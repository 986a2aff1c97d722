"""Unit tests of the VM's boot watchdog, run records closed by the host, and the guest's
stop protocol (vm/guest/bb-run's command loop, run here on the host with bash)."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bufferbloat.vm import boot, common, control  # noqa: E402

# console lines as the project VM prints them without `quiet` (abridged, real wording)
KERNEL = "[    0.000000] Linux version 6.1.0-56-amd64 (debian-kernel@lists.debian.org)\n"
INITRAMFS = "[    2.91] Run /init as init process\nLoading, please wait...\n"
SYSTEMD = ("[    9.10] systemd[1]: systemd 252.39-1~deb12u1 running in system mode\n"
           "Welcome to Debian GNU/Linux 12 (bookworm)!\n")
BBRUN = "bb-run: stage bb-run (uptime 18.20)\n"
SHARE = "bb-run: stage share (uptime 18.61)\n"
HELD = ("bb-run: stage held (uptime 19.52: 2 trace instances, the timestamp key by pid 402, "
        "1 CPU(s) offline while patching, from 18.62)\n")
COMMAND = "bb-run: stage command (uptime 18.70)\n"


# ---------------------------------------------------------------------------- stages

def test_boot_stage_follows_the_console():
    text = ""
    assert boot.boot_stage(text) == "qemu"
    expected = ["kernel", "initramfs", "systemd", "bb-run", "share", "held", "command"]
    for chunk, stage in zip([KERNEL, INITRAMFS, SYSTEMD, BBRUN, SHARE, HELD, COMMAND], expected):
        text += chunk
        assert boot.boot_stage(text) == stage
    assert boot.STAGE_NAMES == ("qemu", *expected)


def test_boot_stage_started_file_wins_and_markers_need_their_words():
    assert boot.boot_stage("", started=True) == "command"
    assert boot.boot_stage(KERNEL + "bb-run: cannot mount the 9p share\n") == "kernel"
    assert boot.boot_stage("garbage \x00\xff Linux") == "qemu"


def test_the_guest_prints_the_markers_the_host_looks_for():
    script = (common.VM_DIR / "guest" / "bb-run").read_text()
    assert re.search(r'stage "bb-run ', script)
    assert re.search(r'stage "share ', script)
    assert re.search(r'stage "held ', script)
    assert re.search(r'stage "command ', script)
    assert 'echo "bb-run: stage $*"' in script


# ---------------------------------------------------------------------------- bounds

def test_boot_bounds_defaults_are_the_measured_constants():
    bound, first, attempts = boot.boot_bounds("tcg", {})
    assert bound == boot.BOOT_BOUND_S["tcg"] and first == boot.FIRST_OUTPUT_S["tcg"]
    assert attempts == boot.BOOT_ATTEMPTS == 3
    # 19-27 s measured under TCG: the bound leaves room for the slowest, stays far below
    # the 6 minutes a user waited
    assert 4 * 27 <= bound <= 180 and bound >= 4 * boot.TCG_BOOT_MEDIAN_S
    kbound, kfirst, _ = boot.boot_bounds("kvm", {})
    assert kbound < bound and kfirst <= kbound


def test_boot_bounds_env_overrides_and_refusals():
    env = {boot.BOOT_TIMEOUT_ENV: "15", boot.BOOT_ATTEMPTS_ENV: "2"}
    bound, first, attempts = boot.boot_bounds("tcg", env)
    assert (bound, attempts) == (15.0, 2)
    assert first == 15.0                    # the first-output bound never exceeds it
    for bad in ("0", "-3", "abc", "1e9"):
        with pytest.raises(common.VMError, match=boot.BOOT_TIMEOUT_ENV):
            boot.boot_bounds("tcg", {boot.BOOT_TIMEOUT_ENV: bad})
    for bad in ("0", "x", "21", "1.5"):
        with pytest.raises(common.VMError, match=boot.BOOT_ATTEMPTS_ENV):
            boot.boot_bounds("tcg", {boot.BOOT_ATTEMPTS_ENV: bad})


def test_boot_watch_records_stage_times_and_accepts_a_started_boot():
    w = boot.BootWatch(bound_s=100, first_output_s=30)
    assert w.update(1.0, "") is None
    assert w.update(2.0, KERNEL) is None and w.stage == "kernel"
    assert w.update(9.5, KERNEL + INITRAMFS + SYSTEMD) is None
    assert w.times["initramfs"] == w.times["systemd"] == 9.5   # skipped stages: same time
    assert w.update(22.0, KERNEL + INITRAMFS + SYSTEMD + BBRUN, started=True) is None
    assert w.started and w.times["command"] == 22.0
    assert w.update(5000.0, "") is None                       # started: never hung
    assert "command 22.0s" in w.summary() and "kernel 2.0s" in w.summary()


def test_boot_watch_silent_console_is_hung_early():
    w = boot.BootWatch(bound_s=120, first_output_s=30)
    assert w.update(29.0, "") is None
    why = w.update(31.0, "")
    assert why and "no console output" in why and w.stage == "qemu"


def test_boot_watch_command_not_started_in_time_is_hung_at_its_stage():
    w = boot.BootWatch(bound_s=60, first_output_s=30)
    text = KERNEL + INITRAMFS + SYSTEMD + BBRUN + SHARE
    assert w.update(59.0, text) is None
    why = w.update(61.0, text)
    assert why and "not started after 60s" in why
    assert w.stage == "share"


# ---------------------------------------------------------------------------- kernel cmdline

def test_append_words_are_added_and_checked():
    line = boot.kernel_cmdline("r1", ["bb.delay=60", "systemd.unit=rescue.target"])
    assert line.split()[-2:] == ["bb.delay=60", "systemd.unit=rescue.target"]
    assert boot.parse_append("  bb.delay=5   loglevel=7 ") == ["bb.delay=5", "loglevel=7"]
    assert boot.parse_append(None) == []
    for bad in ("bb.run=other", "a;b", "$(id)", "x`y`"):
        with pytest.raises(common.VMError, match=boot.APPEND_ENV):
            boot.parse_append(bad)


# ---------------------------------------------------------------------------- run records

def _record(path, status="running", in_vm=True, machine=True):
    path.parent.mkdir(parents=True, exist_ok=True)
    rec = {"schema_version": 2, "status": status, "error": None, "scenario": {"name": "x"}}
    if machine:
        rec["machine"] = {"hostname": "bb-vm", "in_project_vm": in_vm}
    path.write_text(json.dumps(rec))
    return path


def test_result_roots_from_out_options(tmp_path):
    share = tmp_path
    roots = control.result_roots(share, ["python3", "-m", "bufferbloat", "run", "a1_fifo",
                                    "--out", "tmp/x", "--out=/bb/y", "--out", "/etc/z"])
    assert roots == [share / "results", share / "tmp/x", share / "y"]
    roots = control.result_roots(share, "python3 -m bufferbloat sweep s --out ../escape")
    assert roots == [share / "results"]          # outside the share: not ours to touch


def test_running_results_are_only_recent_vm_runs(tmp_path):
    since = time.time() - 1
    mine = _record(tmp_path / "results/a1_fifo/s1/result.json")
    fresh_no_machine = _record(tmp_path / "results/a1_fifo/s2/result.json", machine=False)
    done = _record(tmp_path / "results/a1_fifo/s3/result.json", status="ok")
    host_run = _record(tmp_path / "results/a1_fifo/s4/result.json", in_vm=False)
    old = _record(tmp_path / "results/a1_fifo/s5/result.json")
    os.utime(old, (since - 100, since - 100))
    deep = _record(tmp_path / "results/a/b/c/d/e/f/g/result.json")
    found = control.running_results([tmp_path / "results", tmp_path / "missing"], since)
    assert sorted(found) == sorted([mine, fresh_no_machine])
    assert done not in found and host_run not in found and old not in found
    assert deep not in found                      # bounded scan


def test_mark_unfinished_keeps_everything_else(tmp_path):
    path = _record(tmp_path / "r/result.json")
    (path.parent / "series").mkdir()
    (path.parent / "series/qdisc.csv").write_text("t,backlog\n0.01,3\n")
    assert control.mark_unfinished(path, "interrupted", "the host interrupted the VM")
    rec = json.loads(path.read_text())
    assert rec["status"] == "interrupted" and rec["error"] == "the host interrupted the VM"
    assert rec["scenario"] == {"name": "x"} and rec["machine"]["in_project_vm"] is True
    assert rec["closed_by_host"]["by"] == "bufferbloat.vm"
    assert (path.parent / "series/qdisc.csv").read_text().count("\n") == 2
    assert not control.mark_unfinished(path, "failed", "again")      # no longer running
    assert json.loads(path.read_text())["status"] == "interrupted"
    assert not list(path.parent.glob("*.tmp"))


@pytest.mark.parametrize("end,status", [("interrupt", "interrupted"),
                                        ("terminate", "interrupted"),
                                        ("timeout", "interrupted"),
                                        ("crash", "failed"), ("exit", "failed")])
def test_close_unfinished_status_by_how_the_vm_ended(tmp_path, end, status):
    path = _record(tmp_path / "results/s/r/result.json")
    ok = _record(tmp_path / "results/s/q/result.json", status="ok")
    msgs = []
    done = control.close_unfinished([tmp_path / "results"], time.time() - 5, end, msgs.append)
    assert done == [path]
    assert json.loads(path.read_text())["status"] == status
    assert json.loads(ok.read_text())["status"] == "ok"
    assert msgs and str(path) in msgs[0] and status in msgs[0]


def test_the_host_status_is_one_the_results_loader_accepts():
    from bufferbloat.results.records_layout import STATUSES
    assert {s for s, _ in control.END_STATUS.values()} <= set(STATUSES)


# ---------------------------------------------------------------------------- guest stop

def _guest_loop(tmp_path):
    """The command loop of vm/guest/bb-run (from `tick=` to `rc=$?`), with ctl in tmp."""
    script = (common.VM_DIR / "guest" / "bb-run").read_text()
    tick = script[script.index("tick=/run/bb-run.tick"):script.index("read -r uptime _",
                                                                    script.index("tick="))]
    loop = script[script.index("\nenv ") + 1:script.index("rc=$?")]
    assert "pause()" in tick and "setsid" in loop and '"$ctl/stop"' in loop
    body = tick.replace("/run/bb-run.tick", str(tmp_path / "tick")) + loop
    return ("set -u\nexec 3>&2\nstage() { echo \"bb-run: stage $*\" >&3; }\n"
            f"ctl={tmp_path}\n{body}rc=$?\necho rc=$rc\n")


def test_guest_stop_file_interrupts_the_command_with_sigint(tmp_path):
    # the command says when its handler is in place: a SIGINT before that (the
    # interpreter still starting on a loaded machine) would find nothing to print "saved"
    ready = tmp_path / "ready"
    (tmp_path / "cmd").write_text(
        "exec python3 -c \"\nimport sys, time\ntry:\n"
        f"    open('{ready}', 'w').close()\n    time.sleep(60)\n"
        "except KeyboardInterrupt:\n    print('saved'); sys.exit(130)\n\"\n")
    # started in the background as bb-run is by systemd: SIGINT must not stay ignored
    (tmp_path / "loop.sh").write_text(_guest_loop(tmp_path))
    proc = subprocess.Popen(["bash", "-c", f"bash {tmp_path / 'loop.sh'} & wait"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not ready.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert ready.exists(), proc.communicate(timeout=20)
    t0 = time.monotonic()
    (tmp_path / "stop").write_text("SIGINT\n")
    out, err = proc.communicate(timeout=20)
    assert time.monotonic() - t0 < 5
    assert "saved" in out and "rc=130" in out, (out, err)
    assert "stop requested by the host" in err


def test_guest_loop_returns_the_exit_code_promptly_without_stop(tmp_path):
    (tmp_path / "cmd").write_text("sleep 0.3; exit 7\n")
    (tmp_path / "loop.sh").write_text(_guest_loop(tmp_path))
    t0 = time.monotonic()
    out = subprocess.run(["bash", str(tmp_path / "loop.sh")], capture_output=True,
                         text=True, timeout=20)
    assert "rc=7" in out.stdout, out
    assert time.monotonic() - t0 < 3
