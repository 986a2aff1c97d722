"""``bufferbloat export --flent``: recorded runs written as flent data files, read back
and plotted by flent 2.1 itself (/usr/bin/flent, Debian's package, headless).

flent can exit 0 after an error (it logs it): every plot is checked as a PNG file that
exists and holds an image, not only by the exit code. The values flent reads back are
flent's own computation: ``flent -f stats`` prints the mean of the series it computes on
loading (``TCP download sum``, ``TCP upload sum``: sums over the flows at each step);
over the project's metric window (warm-up cut to the last socket sample, given with
``--data-cutoff``) they equal the run's per-direction goodput (metrics.py
``goodput_{up,down}_mbit``, from bytes_acked) within 1 %.

Fixtures (tests/fixtures/runs/README.md): ``b2_rrul_irtt`` (a B run with ICMP and irtt
probes whose downloads reach tcp.csv), ``b2_rrul`` (an older B run: ICMP only,
downloads known from iperf3 only), ``a1_fifo`` (one upload, ping).
"""
import gzip
import json
import os
import re
import shutil
import subprocess

import pytest
from conftest import FIXTURES

from bufferbloat.cli import main
from bufferbloat.core.errors import UsageError
from bufferbloat.results.flentexport import export_flent, flent_data
from bufferbloat.results.metrics import compute_metrics, traffic_start_s
from bufferbloat.results.records import load_run

RUNS = os.path.join(FIXTURES, "runs")
FLENT = "/usr/bin/flent"
PNG = b"\x89PNG\r\n\x1a\n"


def flent(*args, cwd):
    env = dict(os.environ, MPLBACKEND="Agg")
    env.pop("DISPLAY", None)
    r = subprocess.run([FLENT, *args], capture_output=True, text=True, timeout=180,
                       cwd=cwd, env=env)
    return r


def plot(path, name, tmp_path):
    out = tmp_path / f"{name}.png"
    r = flent("-i", str(path), "-p", name, "-o", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ERROR" not in r.stdout + r.stderr, (r.stdout + r.stderr)[-2000:]
    data = out.read_bytes()
    assert data[:8] == PNG and len(data) > 20_000, (name, len(data), r.stderr[-2000:])


def stats(path, cutoff, tmp_path):
    """{series: mean} from ``flent -f stats`` with ``--data-cutoff START,END``."""
    r = flent("-i", str(path), "-f", "stats", "--data-cutoff", "%g,%g" % cutoff,
              cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    means, name = {}, None
    for line in r.stdout.splitlines():
        m = re.match(r"^ (\S.*):$", line)
        if m:
            name = m.group(1)
        m = re.match(r"^\s+Mean:\s+([-0-9.e]+)", line)
        if m and name:
            means[name] = float(m.group(1))
    return means


def load(path):
    with gzip.open(path, "rt") as f:
        return json.load(f)


def test_flent_is_installed():
    assert shutil.which("flent") == FLENT or os.path.exists(FLENT), \
        "flent (Debian package flent) is a test dependency: scripts/host-packages.txt"


def test_file_format_4_with_what_flent_requires(tmp_path):
    path = export_flent(os.path.join(RUNS, "b2_rrul_irtt"), tmp_path / "b.flent.gz")
    d = load(path)
    assert d["version"] == 4
    md = d["metadata"]
    assert md["NAME"] == "rrul_be_nflows"
    for key in ("TITLE", "HOST", "LOCAL_HOST", "LENGTH", "STEP_SIZE", "TIME", "T0",
                "TEST_PARAMETERS", "TOTAL_LENGTH"):
        assert md.get(key) not in (None, ""), key
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", md["T0"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", md["TIME"])
    assert md["TEST_PARAMETERS"] == {"upload_streams": "4", "download_streams": "4",
                                     "qdisc_stats_hosts": "s0,h2",
                                     "qdisc_stats_interfaces": "s0-eth2,h2-eth0"}
    assert md["LOCAL_HOST"] == "h1" and md["HOST"] == "10.0.0.2"
    n = len(d["x_values"])
    assert all(len(v) == n for v in d["results"].values())
    names = set(d["results"])
    assert {f"TCP upload BE::{i}" for i in range(1, 5)} <= names
    assert {f"TCP download BE::{i}" for i in range(1, 5)} <= names
    assert {"Ping (ms) ICMP", "Ping (ms) UDP BE"} <= names
    assert d["raw_values"] and all(d["raw_values"][k] for k in names if "::" not in k
                                   or k.startswith("TCP"))
    # cwnd and RTT as raw entries of every TCP series, both directions
    for k in names:
        if k.startswith("TCP"):
            raw = d["raw_values"][k]
            assert any("tcp_cwnd" in e and "tcp_rtt" in e for e in raw), k
    # the queues of both directions, as flent's tc runner keeps them
    for host in ("s0", "h2"):
        raw = d["raw_values"][f"qdisc_stats_{host}"]
        assert {"t", "backlog_bytes", "backlog_pkts", "dropped", "delay"} <= set(raw[-1])
    # UDP probes as flent's irtt runner records them
    udp = d["raw_values"]["Ping (ms) UDP BE"]
    assert all({"t", "val", "owd_up", "owd_down", "seq"} <= set(e) for e in udp
               if not e.get("lost"))


def test_b_run_with_irtt_plots_in_flent_and_its_sums_are_the_goodput(tmp_path):
    run_dir = os.path.join(RUNS, "b2_rrul_irtt")
    path = tmp_path / "b2.flent.gz"
    assert main(["export", "--flent", run_dir, "-o", str(path)]) == 0
    for name in ("ping_cdf", "totals", "tcp_cwnd", "backlog"):
        plot(path, name, tmp_path)
    # flent's own sums against the project's per-direction goodput, same window
    run = load_run(run_dir)
    warmup = run.record["warmup_s"]
    rows = {r["metric"]: r["value"] for r in compute_metrics(run, warmup)
            if r["scope"] == "network"}
    origin = traffic_start_s(run)
    step = load(path)["metadata"]["STEP_SIZE"]
    last = float(max(run.series("tcp")["t"])) - origin
    # flent's points stamp the step that ends at them: the window [cut, last] is the
    # points from cut + step to the last grid point before the last sample
    start = round(warmup + step, 6)
    end = round(int(last / step + 1e-9) * step, 6)
    means = stats(path, (start, end), tmp_path)
    for direction, series in (("down", "TCP download sum"), ("up", "TCP upload sum")):
        ours = rows[f"goodput_{direction}_mbit"]
        print(f"{direction}: flent {means[series]:.4f} Mbit/s, ours {ours:.4f} Mbit/s")
        assert means[series] == pytest.approx(ours, rel=0.01)
    # and the probes: flent's mean RTT of each probe kind against ours (all probes)
    all_rows = compute_metrics(run, 0.0)
    icmp = next(r["value"] for r in all_rows if r["scope"] == "ping"
                and r["metric"] == "rtt_mean_ms")
    udp = next(r["value"] for r in all_rows if r["scope"] == "irtt"
               and r["metric"] == "rtt_mean_ms")
    whole = stats(path, (0, load(path)["metadata"]["TOTAL_LENGTH"] + 1), tmp_path)
    assert whole["Ping (ms) ICMP"] == pytest.approx(icmp, rel=0.01)
    assert whole["Ping (ms) UDP BE"] == pytest.approx(udp, rel=0.01)


def test_ping_only_b_run_still_exports_and_plots(tmp_path):
    """An older B run: ICMP probes only, downloads from iperf3's intervals (the sampler
    did not see them then); flent still loads and plots it."""
    path = export_flent(os.path.join(RUNS, "b2_rrul"), tmp_path / "old.flent.gz")
    d = load(path)
    assert d["metadata"]["NAME"] == "rrul_be_nflows"
    assert "Ping (ms) UDP BE" not in d["results"]
    sources = {k: v["BUFFERBLOAT_SOURCE"] for k, v in d["metadata"]["SERIES_META"].items()
               if k.startswith("TCP")}
    assert set(sources[k] for k in sources if "download" in k) == {"iperf3 intervals"}
    assert set(sources[k] for k in sources if "upload" in k) == {"bytes_acked (tcp.csv)"}
    for name in ("ping_cdf", "totals", "tcp_cwnd", "backlog"):
        plot(path, name, tmp_path)


def test_test_name_follows_the_flows():
    one_up = flent_data(load_run(os.path.join(RUNS, "a1_fifo")))
    assert one_up["metadata"]["NAME"] == "tcp_nup"
    assert one_up["metadata"]["TEST_PARAMETERS"]["upload_streams"] == "1"
    assert "TCP upload::1" in one_up["results"] and "Ping (ms) ICMP" in one_up["results"]


def test_bad_export_requests_are_refused(tmp_path):
    with pytest.raises(UsageError, match="not a run"):
        export_flent(str(tmp_path), tmp_path / "x.flent.gz")
    with pytest.raises(UsageError, match=".flent.gz"):
        export_flent(os.path.join(RUNS, "a1_fifo"), tmp_path / "x.json")
    with pytest.raises(UsageError, match="no such directory"):
        export_flent(os.path.join(RUNS, "a1_fifo"), tmp_path / "nope" / "x.flent.gz")
    assert main(["export", "--flent", str(tmp_path)]) == 2
    assert not list(tmp_path.iterdir())
