"""Bad input at the edge: every case exits with code 2, names the parameter (or option,
or the corrupt file) in its one-line message, prints no traceback, and creates no
network state (no link, no state file, the network lock not taken, no run directory).

The command line runs in this process (``bufferbloat.cli.main``) for speed; a few cases
also run as a subprocess, exactly as a user types them. Corrupted records (a run's
result.json, a sweep's index.json) are copies of the fixtures, made once in a folder of
their own and named ``@NAME`` in the cases; the commands reading them must leave them
as they were.
"""
import json
import os
import shutil
import subprocess

import pytest
from conftest import FIXTURES, ROOT, _links

from bufferbloat.cli import main
from bufferbloat.net.cleanup import STATE_PATH

R = ["run", "a1_fifo", "--set", "delay_ms=0"]
PIE = R + ["--set", "qdisc=pie"]
SW = ["sweep", "a1_fifo", "--set", "delay_ms=0"]
A5 = ["run", "a5_video", "--set", "delay_ms=0"]
D1 = ["run", "d1_cca_paths"]
E1 = ["run", "e1_aqm_kflows"]
V100 = "buffer_pkts=" + ",".join(str(n) for n in range(1, 101))
V101 = "delay_ms=" + ",".join(str(n) for n in range(0, 101))
V1000 = "buffer_pkts=" + ",".join(str(n) for n in range(1, 1001))
V1000B = "delay_ms=" + ",".join(str(n) for n in range(0, 1000))

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
    (R + ["--set", "reverse_qdisc=nosuch"], "reverse_qdisc"),
    (PIE + ["--set", "reverse_qdisc=fq_codel", "--set", "aqm_both_ways=true"],
     "reverse_qdisc"),
    (R + ["--set", "reverse_qdisc=fq_codel", "--set", "loss_pct=1", "--set",
          "loss_link=bottleneck", "--set", "loss_dir=reverse"], "reverse_qdisc"),
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
    # sweeps and run-all on Dask workers
    (["sweep", "a1_fifo", "--cluster", "8786"], "--cluster"),
    (["sweep", "a1_fifo", "--cluster", "tcp://h:1;id"], "--cluster"),
    (["sweep", "a1_fifo", "--workers", "0"], "--workers"),
    (["sweep", "a1_fifo", "--workers", "65"], "--workers"),
    (["sweep", "a1_fifo", "--workers", "2", "--vm"], "--workers"),
    (["run-all", "--quick", "--cluster", "http://h:8786"], "--cluster"),
    (["run-all", "--quick", "--workers", "-1"], "--workers"),
    (["worker", "h:8786"], "scheduler address"),
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

    # rates below what HTB expresses (bufferbloat/core/params.py: MIN_RATE_MBIT, 1 kbit/s)
    (R + ["--set", "bottleneck_mbit=1e-300"], "bottleneck_mbit"),
    (R + ["--set", "bottleneck_mbit=0.0009"], "bottleneck_mbit"),
    (R + ["--set", "bottleneck_mbit=inf"], "bottleneck_mbit"),
    (R + ["--set", "bottleneck_mbit=-inf"], "bottleneck_mbit"),
    (R + ["--set", "bottleneck_mbit=1e400"], "bottleneck_mbit"),
    (R + ["--set", "bottleneck_mbit="], "bottleneck_mbit"),
    (R + ["--set", "bottleneck_mbit=10Mbit"], "bottleneck_mbit"),
    (R + ["--set", "host_mbit=1e-300"], "host_mbit"),
    (R + ["--set", "host_mbit=0.0001"], "host_mbit"),
    (R + ["--set", "reverse_mbit=0"], "reverse_mbit"),
    (R + ["--set", "reverse_mbit=0.0005"], "reverse_mbit"),
    (R + ["--set", "reverse_mbit=nan"], "reverse_mbit"),
    (A5 + ["--set", "udp_rate_kbit=0.5"], "udp_rate_kbit"),
    (A5 + ["--set", "udp_rate_kbit=nan"], "udp_rate_kbit"),
    (A5 + ["--set", "udp_rate_kbit=-1"], "udp_rate_kbit"),
    (A5 + ["--set", "udp_size_bytes=1"], "udp_size_bytes"),
    (D1 + ["--set", "bulk_goodput_mbit=0"], "bulk_goodput_mbit"),
    (D1 + ["--set", "bulk_goodput_mbit=1e-300"], "bulk_goodput_mbit"),
    # 25 % of 0.002 Mbit/s: the stream itself would be below the floor
    (D1 + ["--set", "load=stream25", "--set", "bulk_goodput_mbit=0.002"],
     "bulk_goodput_mbit"),
    (D1 + ["--set", "load=trickle"], "load"),
    # other values: nan/inf, empty, type, range, conflicts
    (R + ["--set", "delay_ms=inf"], "delay_ms"),
    (R + ["--set", "delay_ms=nan"], "delay_ms"),
    (R + ["--set", "jitter_ms=nan"], "jitter_ms"),
    (R + ["--set", "jitter_ms=5"], "jitter_ms"),        # more than the links' delay (0)
    (R + ["--set", "loss_pct=inf"], "loss_pct"),
    (R + ["--set", "loss_pct="], "loss_pct"),
    (R + ["--set", "buffer_pkts="], "buffer_pkts"),
    (R + ["--set", "buffer_pkts=1e400"], "buffer_pkts"),
    (R + ["--set", "buffer_pkts=2000000"], "buffer_pkts"),
    (R + ["--set", "buffer_pkts=true"], "buffer_pkts"),
    (R + ["--set", "qdisc="], "qdisc"),
    (R + ["--set", "qdisc=FIFO"], "qdisc"),
    (R + ["--set", "cca="], "cca"),
    (R + ["--set", "sndbuf_bytes=100"], "sndbuf_bytes"),
    (R + ["--set", "advmss_bytes=10"], "advmss_bytes"),
    (R + ["--set", "slow_start_after_idle=2"], "slow_start_after_idle"),
    (R + ["--set", "ecn=maybe"], "ecn"),
    (R + ["--set", "bottleneck_delay_ms=-1"], "bottleneck_delay_ms"),
    (R + ["--set", "web_server=h3"], "web_server"),
    (R + ["--set", "ping_interval_s=inf"], "ping_interval_s"),
    (R + ["--set", "k=2"], "k"),                        # a kdumbbell key, not a1's
    (R + ["--set", "udp_rate_kbit=100"], "udp_rate_kbit"),  # not a knob of a1
    (R + ["--set", "variant=pie"], "variant"),          # a1 has no variants
    (R + ["--set", "qdisc.target_ms=5"], "target_ms"),  # not a fifo parameter
    (PIE + ["--set", "qdisc.target_ms=nan"], "target_ms"),
    (PIE + ["--set", "qdisc.target_ms=inf"], "target_ms"),
    (PIE + ["--set", "qdisc.limit_pkts=0"], "limit_pkts"),
    (["run", "a4_wifi_loss", "--set", "variant=nosuch"], "variant"),
    (E1 + ["--set", "k=0"], "k"),
    (E1 + ["--set", "k=500"], "k"),
    (E1 + ["--set", "rtt_ms=abc"], "rtt_ms"),
    (E1 + ["--set", "rtt_ms=10,20,30"], "rtt_ms"),      # neither one value nor k
    (E1 + ["--set", "ccas=cubic,foo"], "ccas"),
    # shell metacharacters in names
    (R + ["--set", "cca=cubic&&ls"], "cca"),
    (R + ["--set", "cca=`id`"], "cca"),
    (R + ["--set", "cca=cubic|cat"], "cca"),
    (R + ["--set", "cca=cubic reno"], "cca"),
    (R + ["--set", "qdisc=pie;rm -rf /"], "qdisc"),
    (R + ["--set", "switch=$(reboot)"], "switch"),
    (R + ["--set", "loss_link=h1;id"], "loss_link"),
    (E1 + ["--set", "ccas=cubic;id"], "ccas"),
    (["run", "../a1_fifo"], "scenario"),
    (["run", "$(id)"], "scenario"),
    # options of run
    (R + ["--time", ""], "--time"),
    (R + ["--time", "1e400"], "time"),
    (R + ["--repeat", "1.5"], "--repeat"),
    (R + ["--sample-ms", "inf"], "sample-ms"),
    (R + ["--sample-ms", "abc"], "--sample-ms"),
    (R + ["--retry-degraded", "-1"], "--retry-degraded"),
    (R + ["--retry-degraded", "11"], "--retry-degraded"),
    (R + ["--retry-degraded", "x"], "--retry-degraded"),
    (R + ["--host", "--vm"], "--vm"),
    (["run"], "scenario"),
    (["frobnicate"], "frobnicate"),
    # output folders that are not allowed: a repository's own .git
    (R + ["--out", ".git"], "--out"),
    (R + ["--out", ".git/results"], "--out"),
    (R + ["--out", os.path.join(ROOT, ".git")], "--out"),
    (R + ["--out", os.path.join(ROOT, ".git", "objects", "bb")], "--out"),
    (R + ["--out", "/dev/null"], "--out"),
    (R + ["--out", "/sys/bb"], "--out"),
    (R + ["--out", "a\rb"], "--out"),
    (SW + ["--vary", "buffer_pkts=20,100", "--out", ".git"], "--out"),
    (["run-all", "--out", ".git/x"], "--out"),
    # sweeps: empty values, duplicates, conflicts, oversize, bad values
    (SW + ["--vary", "buffer_pkts=20,,100"], "buffer_pkts"),
    (SW + ["--vary", "buffer_pkts=20,"], "buffer_pkts"),
    (SW + ["--vary", "buffer_pkts=,20"], "buffer_pkts"),
    (SW + ["--vary", "buffer_pkts=20, ,100"], "buffer_pkts"),
    (SW + ["--vary", "buffer_pkts=20,20"], "buffer_pkts"),
    (SW + ["--vary", "buffer_pkts=20,20.0"], "buffer_pkts"),
    (SW + ["--vary", "buffer_pkts=20,100,2e1"], "buffer_pkts"),
    (SW + ["--vary", "qdisc=pie,pie"], "qdisc"),
    (SW + ["--vary", "loss_pct=1,1.0"], "loss_pct"),
    (SW + ["--vary", "aqm_both_ways=true,yes"], "aqm_both_ways"),
    (SW + ["--vary", "buffer_pkts=20,30", "--set", "buffer_pkts=5"], "buffer_pkts"),
    (SW + ["--vary", "qdisc=fifo,pie", "--set", "qdisc=pie"], "qdisc"),
    (SW + ["--vary", "delay_ms=1,2"], "delay_ms"),      # also --set by SW
    (SW + ["--set", "buffer_pkts=50"], "buffer_pkts"),  # a1's own sweep varies it
    (SW + ["--vary", "buffer_pkts=10", "--vary", "buffer_pkts=20"], "buffer_pkts"),
    (SW + ["--vary", "=1,2"], "--vary"),
    (SW + ["--vary", "buffer_pkts"], "--vary"),
    (SW + ["--vary", ","], "--vary"),
    (SW + ["--vary", V1000, "--vary", V1000B], "--vary"),   # 1,000,000 runs
    (SW + ["--vary", V100, "--vary", V101], "--vary"),      # 10,100 runs
    (SW + ["--vary", V100, "--repeat", "101"], "--vary"),   # 10,100 with repetitions
    (SW + ["--vary", "buffer_pkts=nan,10"], "buffer_pkts"),
    (SW + ["--vary", "buffer_pkts=10,abc"], "buffer_pkts"),
    (SW + ["--vary", "buffer_pkts=10,inf"], "buffer_pkts"),
    (SW + ["--vary", "bottleneck_mbit=1e-300,10"], "bottleneck_mbit"),
    (SW + ["--vary", "host_mbit=10,0.0001"], "host_mbit"),
    (SW + ["--vary", "cca=cubic,$(id)"], "cca"),
    (SW + ["--vary", "qdisc.target_ms=5,10"], "target_ms"),  # fifo has none
    (["sweep", "a4_wifi_loss", "--vary", "variant=fifo,nosuch"], "variant"),
    (["sweep", "a2_pie"], "--vary"),                     # declares no sweep
    (SW + ["--vary", "buffer_pkts=20,100", "--set", "nosuch=1"], "nosuch"),
    (SW + ["--vary", "buffer_pkts=20,100", "--repeat", "5000"], "repeat"),
    (SW + ["--vary", "buffer_pkts=20,100", "--time", "nan"], "time"),
    (SW + ["--vary", "buffer_pkts=20,100", "--retry-degraded", "99"], "--retry-degraded"),
    (["sweep", "nosuch", "--vary", "buffer_pkts=1,2"], "scenario"),
    (["sweep"], "scenario"),
    # run-all
    (["run-all", "--only", "a1_fifo;ls"], "scenario"),
    (["run-all", "--only", ""], "scenario"),
    (["run-all", "--out", ""], "--out"),
    (["run-all", "--retry-degraded", "-1"], "--retry-degraded"),
    (["run-all", "--bogus"], "--bogus"),
    # describe, check, list
    # bufferbloat trace: its numbers, its files
    (["trace", "constant", "-o", "/tmp/bb-bad-trace", "--seconds", "0"], "--seconds"),
    (["trace", "constant", "-o", "/tmp/bb-bad-trace", "--mbit", "-1"], "Mbit/s"),
    (["trace", "square", "-o", "/tmp/bb-bad-trace", "--low", "nan"], "Mbit/s"),
    (["trace", "steps", "-o", "/tmp/bb-bad-trace", "--steps", "2:5;rm"], "--steps"),
    (["trace", "csv", "-o", "/tmp/bb-bad-trace", "--csv", "/nonexistent.csv"], "--csv"),
    (["trace", "walk", "-o", "/nonexistent-dir/x"], "--output"),
    (["describe", "nosuch"], "scenario"),
    (["describe", "a1_fifo;ls"], "scenario"),
    (["describe", ""], "scenario"),
    (["describe"], "scenario"),
    (["check", "--scenario", ""], "scenario"),
    (["check", "--scenario", "a1_fifo;id"], "scenario"),
    (["check", "--bogus"], "--bogus"),
    (["list", "--bogus"], "--bogus"),
    (["list", "extra"], "extra"),
    # show, plot, report, compare, export: missing paths, bad options
    (["show", "/nonexistent-run", "--bogus"], "--bogus"),
    (["show"], "run_dir"),
    (["show", "/"], "/"),                               # not a run directory
    (["plot", "/nonexistent-run"], "/nonexistent-run"),
    (["plot", "@run-notjson", "--format", "gif"], "--format"),
    (["plot", "/nonexistent-run", "--format", "$(id)"], "--format"),
    (["report", "/nonexistent-run"], "/nonexistent-run"),
    (["report"], "path"),
    (["cost", "/nonexistent-run"], "/nonexistent-run"),
    (["cost"], "path"),
    (["cost", "@run-notjson"], "@run-notjson/result.json"),
    (["cost", "@run-phases-list"], "@run-phases-list/result.json"),
    (["compare", "/nonexistent-a", "/nonexistent-b"], "/nonexistent-a"),
    (["compare"], "PATH"),
    (["export", "--flent", "/nonexistent-run"], "/nonexistent-run"),
    (["export", "/nonexistent-run"], "--flent"),
    (["export", "--flent", "--csv", "/nonexistent-run"], "--csv"),
    # corrupted records (made by the corrupt fixture below): exit 2 naming the file
    (["show", "@run-notjson"], "@run-notjson/result.json"),
    (["show", "@run-empty"], "@run-empty/result.json"),
    (["show", "@run-array"], "@run-array/result.json"),
    (["show", "@run-binary"], "@run-binary/result.json"),
    (["show", "@run-no-status"], "@run-no-status/result.json"),
    (["show", "@run-no-schema"], "@run-no-schema/result.json"),    # schema 1: gone
    (["show", "@run-series-int"], "@run-series-int/result.json"),
    (["show", "@run-scenario-text"], "@run-scenario-text/result.json"),
    (["show", "@run-status-int"], "@run-status-int/result.json"),
    (["show", "@run-status-unknown"], "@run-status-unknown/result.json"),
    (["show", "@run-schema-new"], "@run-schema-new/result.json"),
    (["show", "--recompute", "@run-duration-text"], "@run-duration-text/result.json"),
    (["plot", "@run-notjson"], "@run-notjson/result.json"),
    (["plot", "@run-params-array"], "@run-params-array/result.json"),
    (["plot", "@sweep-notjson"], "@sweep-notjson/index.json"),
    (["plot", "@sweep-done-int"], "@sweep-done-int/index.json"),
    (["plot", "@sweep-vary-array"], "@sweep-vary-array/index.json"),
    (["plot", "@sweep-run-notjson"], "buffer_pkts=20/rep-1/result.json"),
    (["report", "@run-series-list"], "@run-series-list/result.json"),
    (["report", "@run-summary-text"], "@run-summary-text/result.json"),
    (["report", "@sweep-array"], "@sweep-array/index.json"),
    (["report", "@sweep-done-strings"], "@sweep-done-strings/index.json"),
    (["report", "@sweep-no-done"], "@sweep-no-done/index.json"),
    (["report", "@sweep-entry-overrides-text"], "@sweep-entry-overrides-text/index.json"),
    (["compare", "@run-notjson", FIXTURES + "/runs/a1_fifo"], "@run-notjson/result.json"),
    (["compare", FIXTURES + "/runs/a1_fifo", "@run-scenario-text"],
     "@run-scenario-text/result.json"),
    (["compare", "@sweep-done-int", FIXTURES + "/runs/sweep_fifo_buffer"],
     "@sweep-done-int/index.json"),
    (["compare", "@sweep-entry-run-dir-int", FIXTURES + "/runs/sweep_fifo_buffer"],
     "@sweep-entry-run-dir-int/index.json"),
    (["export", "--flent", "@run-notjson"], "@run-notjson/result.json"),
    (["export", "--flent", "@run-duration-text"], "@run-duration-text/result.json"),
    (["export", "--flent", "@run-scenario-text"], "@run-scenario-text/result.json"),
    (["export", "--flent", "@run-no-clock"], "t0_realtime"),
]

# (argv, environment, word): numbers from the environment, checked like the others
ENV_CASES = [
    (SW + ["--vary", "buffer_pkts=20,100"], {"BUFFERBLOAT_MAX_SWEEP_RUNS": "abc"},
     "BUFFERBLOAT_MAX_SWEEP_RUNS"),
    (SW + ["--vary", "buffer_pkts=20,100"], {"BUFFERBLOAT_MAX_SWEEP_RUNS": "0"},
     "BUFFERBLOAT_MAX_SWEEP_RUNS"),
    (SW + ["--vary", "buffer_pkts=20,100"], {"BUFFERBLOAT_MAX_SWEEP_RUNS": "-5"},
     "BUFFERBLOAT_MAX_SWEEP_RUNS"),
    (SW + ["--vary", "buffer_pkts=20,100"], {"BUFFERBLOAT_MAX_SWEEP_RUNS": "1.5"},
     "BUFFERBLOAT_MAX_SWEEP_RUNS"),
    (SW + ["--vary", "buffer_pkts=20,100"], {"BUFFERBLOAT_MAX_SWEEP_RUNS": "1"}, "--vary"),
    (SW + ["--vary", "buffer_pkts=20,100", "--repeat", "2"],
     {"BUFFERBLOAT_MAX_SWEEP_RUNS": "3"}, "--vary"),
    (R, {"BUFFERBLOAT_MAX_MBIT": "1e-300"}, "BUFFERBLOAT_MAX_MBIT"),
    (R, {"BUFFERBLOAT_MAX_MBIT": "-1"}, "BUFFERBLOAT_MAX_MBIT"),
    (R, {"BUFFERBLOAT_MAX_MBIT": "nan"}, "BUFFERBLOAT_MAX_MBIT"),
    # 1 kbit/s scaled by 20/10000: 0.002 kbit/s, below the floor
    (A5 + ["--set", "bottleneck_mbit=10000", "--set", "udp_rate_kbit=1"],
     {"BUFFERBLOAT_MAX_MBIT": "20"}, "udp_rate_kbit"),
    (D1 + ["--set", "bottleneck_mbit=10000", "--set", "load=stream25",
           "--set", "bulk_goodput_mbit=1"], {"BUFFERBLOAT_MAX_MBIT": "20"},
     "bulk_goodput_mbit"),
    # under a rate cap (the TCG VM's), a bad rate is named before scaling reads it: it
    # was a ValueError traceback there (found running the host tier inside the VM)
    (R + ["--set", "bottleneck_mbit=abc"], {"BUFFERBLOAT_MAX_MBIT": "20"}, "bottleneck_mbit"),
    (R + ["--set", "bottleneck_mbit=10Mbit"], {"BUFFERBLOAT_MAX_MBIT": "20"},
     "bottleneck_mbit"),
    (R + ["--set", "bottleneck_mbit="], {"BUFFERBLOAT_MAX_MBIT": "20"}, "bottleneck_mbit"),
    (R, {"BUFFERBLOAT_RETRY_DEGRADED": "x"}, "BUFFERBLOAT_RETRY_DEGRADED"),
    (R, {"BUFFERBLOAT_RETRY_DEGRADED": "11"}, "BUFFERBLOAT_RETRY_DEGRADED"),
    (D1, {"BUFFERBLOAT_NPM_FLOWS_PER_PROCESS": "ten"}, "BUFFERBLOAT_NPM_FLOWS_PER_PROCESS"),
    (D1, {"BUFFERBLOAT_NPM_FLOWS_PER_PROCESS": "0"}, "BUFFERBLOAT_NPM_FLOWS_PER_PROCESS"),
]


def _write_json(path, obj):
    with open(path, "w") as f:
        f.write(obj if isinstance(obj, str) else json.dumps(obj))


def _edit(path, **fields):
    with open(path) as f:
        obj = json.load(f)
    for key, value in fields.items():
        if value is KeyError:
            obj.pop(key, None)
        else:
            obj[key] = value
    _write_json(path, obj)


def _edit_entries(path, **fields):
    with open(path) as f:
        obj = json.load(f)
    _edit(path, done=[dict(e, **fields) for e in obj["done"]])


#: corrupted copies of the fixtures: name -> (fixture, file, how it is spoiled)
CORRUPT = {
    "run-notjson": ("a1_fifo", "result.json", lambda p: _write_json(p, "{not json")),
    "run-empty": ("a1_fifo", "result.json", lambda p: _write_json(p, "")),
    "run-array": ("a1_fifo", "result.json", lambda p: _write_json(p, [1, 2])),
    "run-binary": ("a1_fifo", "result.json",
                   lambda p: open(p, "wb").write(b"\xff\xfe\x00garbage")),
    "run-no-status": ("a1_fifo", "result.json", lambda p: _edit(p, status=KeyError)),
    "run-no-schema": ("a1_fifo", "result.json", lambda p: _edit(p, schema_version=KeyError)),
    "run-series-int": ("a1_fifo", "result.json", lambda p: _edit(p, series=5)),
    "run-series-list": ("a1_fifo", "result.json", lambda p: _edit(p, series=["tcp"])),
    "run-phases-list": ("a1_fifo", "result.json", lambda p: _edit(p, phases_s=["build"])),
    "run-scenario-text": ("a1_fifo", "result.json", lambda p: _edit(p, scenario="a1")),
    "run-params-array": ("a1_fifo", "result.json", lambda p: _edit(p, params=[1])),
    "run-status-int": ("a1_fifo", "result.json", lambda p: _edit(p, status=3)),
    "run-status-unknown": ("a1_fifo", "result.json", lambda p: _edit(p, status="great")),
    "run-schema-new": ("a1_fifo", "result.json", lambda p: _edit(p, schema_version=99)),
    "run-duration-text": ("a1_fifo", "result.json", lambda p: _edit(p, duration_s="long")),
    "run-summary-text": ("a1_fifo", "result.json", lambda p: _edit(p, summary="fine")),
    "run-no-clock": ("a1_fifo", "result.json", lambda p: _edit(p, t0_realtime=KeyError)),
    "sweep-notjson": ("sweep_fifo_buffer", "index.json", lambda p: _write_json(p, "{x")),
    "sweep-array": ("sweep_fifo_buffer", "index.json", lambda p: _write_json(p, [])),
    "sweep-no-done": ("sweep_fifo_buffer", "index.json", lambda p: _edit(p, done=KeyError)),
    "sweep-done-int": ("sweep_fifo_buffer", "index.json", lambda p: _edit(p, done=5)),
    "sweep-done-strings": ("sweep_fifo_buffer", "index.json",
                           lambda p: _edit(p, done=["a", "b"])),
    "sweep-vary-array": ("sweep_fifo_buffer", "index.json", lambda p: _edit(p, vary=[1])),
    "sweep-entry-overrides-text": ("sweep_fifo_buffer", "index.json",
                                   lambda p: _edit_entries(p, overrides="x")),
    "sweep-entry-run-dir-int": ("sweep_fifo_buffer", "index.json",
                                lambda p: _edit_entries(p, run_dir=5)),
    "sweep-run-notjson": ("sweep_fifo_buffer", "buffer_pkts=20/rep-1/result.json",
                          lambda p: _write_json(p, "{not json")),
}


@pytest.fixture(scope="module")
def corrupt(tmp_path_factory):
    """The corrupted copies, each in its own folder (outside the cases' working
    directory), made once: {name: path}."""
    root = tmp_path_factory.mktemp("corrupt")
    out = {}
    for name, (fixture, rel, spoil) in CORRUPT.items():
        target = root / name
        shutil.copytree(os.path.join(FIXTURES, "runs", fixture), target)
        spoil(str(target / rel))
        out[name] = str(target)
    return out


def _files(root):
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)


def _resolve(text, corrupt):
    """``@NAME`` -> the path of that corrupted copy."""
    if "@" not in text:
        return text
    for name in sorted(corrupt, key=len, reverse=True):
        text = text.replace(f"@{name}", corrupt[name])
    return text


def _lock_free():
    import fcntl

    from bufferbloat.net.network import LOCK_PATH
    if not os.path.exists(LOCK_PATH):
        return True
    with open(LOCK_PATH) as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False    # someone else's network (another test): not ours to judge
        return True


def test_every_command_that_takes_input_has_bad_cases():
    """Each command that reads user values is tried with bad ones here (a command added
    without its cases fails this)."""
    from bufferbloat.cli import parser
    commands = {argv[0] for argv, _ in CASES} | {argv[0] for argv, _, _ in ENV_CASES}
    reading_only = {"list", "check"}         # no value a user gives reaches a tool
    (sub,) = [a for a in parser()._actions if hasattr(a, "choices") and
              isinstance(a.choices, dict)]
    assert set(sub.choices) - reading_only <= commands


def _case_id(argv):
    text = " ".join(argv[1:] if argv[0] == "run" else argv)
    return text if len(text) <= 90 else text[:60] + f"...({len(text)} chars)"


@pytest.mark.parametrize("argv,word", CASES, ids=[_case_id(a) for a, _ in CASES])
def test_bad_input_exits_2_naming_the_parameter_with_no_network_state(
        argv, word, tmp_path, capsys, monkeypatch, corrupt):
    _refused(argv, word, {}, tmp_path, capsys, monkeypatch, corrupt)


@pytest.mark.parametrize("argv,env,word", ENV_CASES,
                         ids=[" ".join(f"{k}={v}" for k, v in e.items()) + " " + _case_id(a)
                              for a, e, _ in ENV_CASES])
def test_bad_environment_exits_2_naming_it_with_no_network_state(
        argv, env, word, tmp_path, capsys, monkeypatch, corrupt):
    _refused(argv, word, env, tmp_path, capsys, monkeypatch, corrupt)


def _refused(argv, word, env, tmp_path, capsys, monkeypatch, corrupt):
    """Run ``argv`` here with ``env``: exit 2, ``word`` in the message, no traceback,
    no file, no network state; a corrupted copy it reads left as it was."""
    monkeypatch.chdir(tmp_path)            # a default results/ would land here
    monkeypatch.setenv("BUFFERBLOAT_NETWORK_WAIT_S", "0")
    for key in ("BUFFERBLOAT_MAX_SWEEP_RUNS", "BUFFERBLOAT_MAX_MBIT",
                "BUFFERBLOAT_RETRY_DEGRADED"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    argv = [_resolve(a, corrupt) for a in argv]
    word = _resolve(word, corrupt)
    copies_before = {name: _files(path) for name, path in corrupt.items()}
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
    assert {name: _files(path) for name, path in corrupt.items()} == copies_before
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
