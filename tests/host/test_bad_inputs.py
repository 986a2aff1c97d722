"""Bad input at the edge: every case exits with code 2, names the parameter (or option)
in its one-line message, prints no traceback, and creates no network state (no link, no
state file, the network lock not taken, no run directory).

The command line runs in this process (``bufferbloat.cli.main``) for speed; a few cases
also run as a subprocess, exactly as a user types them.
"""
import os
import subprocess

import pytest

from bufferbloat.cleanup import STATE_PATH
from bufferbloat.cli import main
from conftest import ROOT, _links

R = ["run", "a1_fifo", "--set", "delay_ms=0"]
PIE = R + ["--set", "qdisc=pie"]

# (argv, word the message must contain)
CASES = [
    # --time, --repeat, --sample-ms, --out
    (R + ["--time", "0"], "time"),
    (R + ["--time", "-5"], "time"),
    (R + ["--time", "nan"], "time"),
    (R + ["--time", "inf"], "time"),
    (R + ["--time", "abc"], "--time"),
    (R + ["--time", "100000"], "time"),
    (R + ["--repeat", "0"], "--repeat"),
    (R + ["--repeat", "-1"], "--repeat"),
    (R + ["--repeat", "x"], "--repeat"),
    (R + ["--repeat", "5000"], "--repeat"),
    (R + ["--sample-ms", "0"], "sample-ms"),
    (R + ["--sample-ms", "nan"], "sample-ms"),
    (R + ["--sample-ms", "-1"], "sample-ms"),
    (R + ["--sample-ms", "20000"], "sample-ms"),
    (R + ["--out", ""], "--out"),
    (R + ["--out", "/proc/bb"], "--out"),
    (R + ["--out", "/etc/hostname/sub"], "--out"),
    (R + ["--out", "a\nb"], "--out"),
    (R + ["--bogus"], "--bogus"),
    # topology parameters: types, units, ranges
    (R + ["--set", "bottleneck_mbit=0"], "bottleneck_mbit"),
    (R + ["--set", "bottleneck_mbit=-1"], "bottleneck_mbit"),
    (R + ["--set", "bottleneck_mbit=abc"], "bottleneck_mbit"),
    (R + ["--set", "bottleneck_mbit=nan"], "bottleneck_mbit"),
    (R + ["--set", "host_mbit=0"], "host_mbit"),
    (R + ["--set", "loss_pct=101"], "loss_pct"),
    (R + ["--set", "loss_pct=-1"], "loss_pct"),
    (R + ["--set", "buffer_pkts=0"], "buffer_pkts"),
    (R + ["--set", "buffer_pkts=1.5"], "buffer_pkts"),
    (R + ["--set", "buffer_bytes=10"], "buffer_bytes"),
    (R + ["--set", "delay_ms=-1"], "delay_ms"),
    (R + ["--set", "jitter_ms=-1"], "jitter_ms"),
    (R + ["--set", "rcvbuf_bytes=0"], "rcvbuf_bytes"),
    (R + ["--set", "loss_link=nowhere"], "loss_link"),
    (R + ["--set", "loss_dir=sideways"], "loss_dir"),
    (R + ["--set", "aqm_both_ways=maybe"], "aqm_both_ways"),
    (R + ["--set", "switch=hub"], "switch"),
    # unknown qdiscs, CCAs, keys; names that could reach a shell
    (R + ["--set", "qdisc=sfq"], "qdisc"),
    (R + ["--set", "cca=foo"], "cca"),
    (R + ["--set", "cca=cubic;reboot"], "cca"),
    (R + ["--set", "cca=$(id)"], "cca"),
    (R + ["--set", "nosuchkey=1"], "nosuchkey"),
    (R + ["--set", "qdisc.nosuch=1"], "qdisc.nosuch"),
    (R + ["--set", "noequals"], "--set"),
    (R + ["--set", "=1"], "--set"),
    (["run", "a1_fifo;ls"], "scenario"),
    (["run", "nosuch"], "scenario"),
    # qdisc parameters
    (PIE + ["--set", "qdisc.target_ms=0"], "target_ms"),
    (PIE + ["--set", "qdisc.target_ms=-3"], "target_ms"),
    (PIE + ["--set", "qdisc.tupdate_ms=0"], "tupdate_ms"),
    (PIE + ["--set", "qdisc.alpha=x"], "alpha"),
    # scenario knobs
    (R + ["--set", "flows=0"], "flows"),
    (R + ["--set", "flows=abc"], "flows"),
    (R + ["--set", "ping_interval_s=0"], "ping_interval_s"),
    (R + ["--set", "web_every_s=-1"], "web_every_s"),
    (R + ["--set", "web_size_bytes=0"], "web_size_bytes"),
    # sweeps and run-all
    (["sweep", "a1_fifo", "--vary", "buffer_pkts=0,10"], "buffer_pkts"),
    (["sweep", "a1_fifo", "--vary", "buffer_pkts="], "--vary"),
    (["sweep", "a1_fifo", "--vary", "nosuch=1,2"], "nosuch"),
    (["sweep", "a1_fifo", "--vary", "qdisc=fifo,sfq"], "qdisc"),
    (["sweep", "a1_fifo", "--repeat", "0"], "repeat"),
    (["sweep", "a1_fifo", "--time", "0"], "time"),
    (["run-all", "--only", "nosuch"], "scenario"),
    (["show", "/nonexistent-run"], "/nonexistent-run"),
    (["check", "--scenario", "nosuch"], "scenario"),
]


def _lock_free():
    import fcntl
    from bufferbloat.network import LOCK_PATH
    if not os.path.exists(LOCK_PATH):
        return True
    with open(LOCK_PATH) as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False    # someone else's network (another test): not ours to judge
        return True


def test_there_are_enough_cases():
    assert len(CASES) >= 40


@pytest.mark.parametrize("argv,word", CASES, ids=[" ".join(a[1:] if a[0] == "run" else a)
                                                   for a, _ in CASES])
def test_bad_input_exits_2_naming_the_parameter_with_no_network_state(
        argv, word, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)            # a default results/ would land here
    monkeypatch.setenv("BUFFERBLOAT_NETWORK_WAIT_S", "0")
    before = _links()
    state_before = os.path.exists(STATE_PATH)
    try:
        code = main(argv)
    except SystemExit as exc:             # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert word in err, err
    assert "Traceback" not in err
    made = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path) for f in fs]
    assert not made, f"files were written: {made}"
    # no new link (links of someone else's network may come and go meanwhile: only
    # links named like ours count), no state file of ours
    assert {n for n in _links() - before if n.startswith(("s0", "h"))} == set()
    if not state_before:
        assert not os.path.exists(STATE_PATH) or not _lock_free()


@pytest.mark.parametrize("argv,word", [
    (R + ["--time", "-1"], "time"),
    (R + ["--set", "loss_pct=200"], "loss_pct"),
    (R + ["--set", "cca=cubic;reboot"], "cca"),
])
def test_bad_input_as_typed_by_a_user(argv, word, tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, BUFFERBLOAT_NETWORK_WAIT_S="0")
    res = subprocess.run(["/usr/bin/python3", "-m", "bufferbloat", *argv,
                          *(["--out", str(tmp_path / "o")] if argv[0] == "run" else [])],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and word in lines[0] and "invalid value" in lines[0], res.stderr
    assert not (tmp_path / "o").exists()


def test_not_root_is_one_clear_message(tmp_path):
    """Network.check() refuses a non-root user before anything exists (run as nobody)."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    code = ("import os; os.setgid(65534); os.setuid(65534)\n"
            "from bufferbloat.cli import main\n"
            f"raise SystemExit(main(['run', 'a1_fifo', '--set', 'delay_ms=0', '--time', '2',"
            f" '--out', '/tmp/bb-nobody-{os.getpid()}/o']))")
    res = subprocess.run(["/usr/bin/python3", "-c", code], cwd="/", env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    assert "root" in res.stderr and "sudo" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
