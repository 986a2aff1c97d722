"""The command line refuses bad input with exit code 2 and a message naming it."""
import pytest

from bufferbloat.cli import main


@pytest.mark.parametrize("argv,needle", [
    (["run", "nosuch"], "unknown scenario"),
    (["run", "a1_fifo", "--set", "loss_pct=150"], "loss_pct"),
    (["run", "a1_fifo", "--set", "bottleneck_mbit=-1.5"], "bottleneck_mbit"),
    (["run", "a1_fifo", "--set", "bandwidth=10"], "bandwidth"),
    (["run", "a1_fifo", "--set", "qdisc=sfq"], "qdisc"),
    (["run", "a1_fifo", "--set", "buffer_pkts=0"], "buffer_pkts"),
    (["run", "a1_fifo", "--set", "cca=westwood"], "cca"),
    (["run", "a1_fifo", "--set", "novalue"], "key=value"),
    (["run", "a2_pie", "--set", "qdisc.target_ms=-1"], "target_ms"),
    (["run", "a2_pie", "--set", "qdisc.tupdate=30"], "tupdate_ms"),
    (["run", "a2_pie", "--set", "buffer_bytes=50000"], "packets"),
    (["run", "a1_fifo", "--time", "-5"], "time"),
    (["check", "--scenario", "nosuch"], "unknown scenario"),
    (["run-all", "--only", "nosuch"], "unknown scenario"),
])
def test_bad_input_exits_2_naming_it(argv, needle, capsys, tmp_path):
    if argv[0] == "run":
        argv = argv + ["--out", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err
    assert list(tmp_path.iterdir()) == []  # nothing recorded, nothing created


def test_list_names_every_scenario(capsys):
    from bufferbloat.scenarios import catalogue
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name, scn in catalogue().items():
        assert name in out and scn.description in out


def test_a_signal_after_the_command_has_finished_does_not_kill_it():
    """A SIGTERM that lands once the command has returned (all recorded) but before the
    interpreter has exited must not turn a complete run into 'killed by signal 15'."""
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # a thread is alive (as the traffic tools' watcher threads may be): the kernel may
    # hand it the signal; a daemon thread sends one more while the interpreter exits
    code = ("import os, signal, sys, threading, time\n"
            "from bufferbloat.cli import console\n"
            "sys.argv = ['bufferbloat', 'list']\n"
            "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
            "rc = console()\n"
            "os.kill(os.getpid(), signal.SIGTERM)\n"
            "os.kill(os.getpid(), signal.SIGINT)\n"
            "time.sleep(0.2)\n"
            "def late():\n"
            "    time.sleep(0.05)\n"
            "    for s in (signal.SIGTERM, signal.SIGINT) * 50:\n"
            "        os.kill(os.getpid(), s)\n"
            "        time.sleep(0.001)\n"
            "threading.Thread(target=late, daemon=True).start()\n"
            "time.sleep(0.1)\n"
            "sys.exit(rc)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=root), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "a1_fifo" in proc.stdout and "Traceback" not in proc.stderr
