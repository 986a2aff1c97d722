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
    from scenarios import catalogue
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name, scn in catalogue().items():
        assert name in out and scn.description in out
