"""Where run, sweep and run-all build their networks (bufferbloat/run/where.py)."""
import os

import pytest

from bufferbloat.cli import main
from bufferbloat.net.capabilities import assess
from bufferbloat.run import where
from bufferbloat.scenarios import catalogue

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERNELS = os.path.join(ROOT, "tests", "fixtures", "kernels")


def _caps(name):
    import gzip
    with gzip.open(os.path.join(KERNELS, name), "rt") as f:
        config = f.read()
    tools = {t: f"/usr/bin/{t}" for t in ("iperf3", "ping", "curl", "tc", "ip", "ethtool",
                                          "mnexec", "nsenter", "brctl", "ovs-vsctl")}
    return assess(config, available_ccas="reno cubic bbr", tools=tools,
                  python_modules={"mininet": True, "numpy": True, "matplotlib": True})


def test_the_kernel_pieces_a_run_needs_decide():
    host = _caps("host-6.18-config.gz")        # this machine kind: no netem, no PIE
    a1 = catalogue()["a1_fifo"]
    assert where.missing_kernel_pieces([a1.build()[0]], host) == ["sch_netem"]
    assert where.missing_kernel_pieces([a1.build({"delay_ms": 0})[0]], host) == []
    pie = catalogue()["a2_pie"].build({"delay_ms": 0})[0]
    assert where.missing_kernel_pieces([pie], host) == ["sch_pie"]


def test_choose_moves_only_when_a_piece_is_missing(monkeypatch):
    host = _caps("host-6.18-config.gz")
    monkeypatch.setattr("bufferbloat.net.capabilities.probe", lambda refresh=False: host)
    monkeypatch.setattr(where, "in_project_vm", lambda: False)
    a1 = catalogue()["a1_fifo"]
    said = []
    assert where.choose("auto", [a1.build()[0]], said.append) == "vm"
    assert "sch_netem" in said[0] and "--host" in said[0]
    assert where.choose("auto", [a1.build({"delay_ms": 0})[0]], said.append) == "host"
    assert where.choose("host", [a1.build()[0]], said.append) == "host"
    assert where.choose("vm", [a1.build({"delay_ms": 0})[0]], said.append) == "vm"
    monkeypatch.setattr(where, "in_project_vm", lambda: True)
    assert where.choose("vm", [a1.build()[0]], said.append) == "host"   # already there


def test_the_guest_runs_the_same_command_with_out_seen_from_the_share():
    out = os.path.join(ROOT, "results")
    argv = ["run", "a1_fifo", "--quick", "--vm", "--out", "elsewhere", "--set", "flows=2"]
    assert where.guest_argv(argv, out) == [
        "python3", "-m", "bufferbloat", "run", "a1_fifo", "--quick", "--set", "flows=2",
        "--out", "/bb/results", "--host"]
    assert where.guest_argv(["sweep", "x", "--out=r", "--ou", "r"], ROOT, ["--no-figures"]) \
        == ["python3", "-m", "bufferbloat", "sweep", "x", "--out", "/bb", "--host",
            "--no-figures"]
    assert where.host_path("/bb/results/a1_fifo/x") == os.path.join(ROOT, "results",
                                                                   "a1_fifo", "x")


def test_an_out_outside_the_checkout_cannot_go_to_the_vm(tmp_path, capsys):
    with pytest.raises(Exception, match="sees only the checkout"):
        where.guest_out(str(tmp_path))
    # the command says so before booting anything (exit 2, nothing written)
    assert main(["run", "a1_fifo", "--vm", "--time", "3", "--out", str(tmp_path)]) == 2
    assert "sees only the checkout" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_the_guest_lists_its_runs_for_the_host(tmp_path, monkeypatch):
    listing = tmp_path / "runs.txt"
    monkeypatch.delenv(where.RUNS_FILE_ENV, raising=False)
    assert where.note_run("/bb/results/a") is False
    monkeypatch.setenv(where.RUNS_FILE_ENV, str(listing))
    assert where.note_run("/bb/results/a") and where.note_run("/bb/results/b")
    assert where.recorded_runs(str(listing)) == [os.path.join(ROOT, "results", "a"),
                                                 os.path.join(ROOT, "results", "b")]
