"""NetPerfMeter: its argument lists, and its parsers on real output captured in the
project VM (tests/fixtures/tools/netperfmeter, made by capture.py there: 10 Mbit/s, 10 ms
each way; flows 1 bulk reno on 0-2 s, 2 on-off 1 s / 1 s on one connection, 3 a
0.4 Mbit/s stream of 1000-byte frames from 1 s with a 64 kB send buffer, 4 a 2 Mbit/s
download 2.5-3.5 s)."""
import json
import os
import re
import subprocess

import pytest
from conftest import FIXTURES

from bufferbloat.core.errors import UsageError
from bufferbloat.core.series import CellRows
from bufferbloat.results.records_csv import format_cell
from bufferbloat.traffic import netperfmeter as npm
from bufferbloat.traffic.kinds import part_class
from bufferbloat.traffic.netperfmeter import flows as npm_flows
from bufferbloat.traffic.netperfmeter import output as npm_output
from bufferbloat.traffic.netperfmeter import run as npm_run

D = os.path.join(FIXTURES, "tools", "netperfmeter")
META = json.load(open(os.path.join(D, "meta.json")))
ONE_WAY_MS = 10.0           # netem delay of each direction in the capture


def read(name):
    with open(os.path.join(D, name)) as f:
        return f.read()


class StubNet:
    def ip(self, host):
        return {"near": "10.0.0.1", "far": "10.0.0.2"}[host]


def fixture_run():
    flows = [npm.NpmFlow(f["id"], f["name"], f["direction"], f["rate_mbit"],
                         f["frame_bytes"], f["onoff"], f["cca"],
                         int(re.search(r"sndbuf=(\d+)", f["spec"])[1]))
             for f in META["flows"]]
    run = npm.NetPerfMeterRun(StubNet(), "near", "far", 9000, flows, META["runtime_s"],
                              name="cap", out_dir=D, t0=META["t0"],
                              realtime_minus_monotonic=META["realtime_minus_monotonic"])
    run.launched_mono = META["launched_mono"]
    return run


# ----------------------------------------------------------------------------- flows

def test_flow_specs_are_what_the_capture_ran():
    run = fixture_run()
    assert [f.spec() for f in run.flows] == [f["spec"] for f in META["flows"]]
    args = run.active_args()

    def same_dir(a):
        return [re.sub(r"=/\S*/cap-npm", "=DIR/cap-npm", x) for x in a]
    assert same_dir(args) == same_dir(META["active_args"])
    assert all(isinstance(a, str) for a in args)   # an argument list, not a shell string
    assert args.count("-tcp") == 4 and "-control-over-tcp" in args


def test_a_lead_delays_every_flows_instants_and_the_start_line_is_recognised():
    onoff = npm.NpmFlow(2, "o", onoff=[1.0, 2.0, 7.0])
    assert onoff.spec(0).endswith(onoff.spec().split(":")[-1])
    # onoff= gives increments: on at 1 + 4, off 1 s later, on 5 s after that
    assert onoff.spec(4.0).split(":")[-1] == "onoff=" + ",".join(
        f"{x:.6g}" for x in npm_flows.onoff_increments([5.0, 6.0, 11.0]))
    bulk = npm.NpmFlow(1, "b")
    assert "onoff" not in bulk.spec() and bulk.spec(4.0).endswith("onoff=4")
    with open(os.path.join(D, "cap-npm.stdout.txt")) as f:
        text = f.read()
    assert npm_output.MEASUREMENT_STARTED.search(text)
    assert not npm_output.MEASUREMENT_STARTED.search(text.split("Starting measurement")[0])


def test_output_files_are_absolute_whatever_the_run_dir(tmp_path, monkeypatch):
    """The tool runs in its out dir: a relative run directory (the default --out
    results) must not be taken relative to it (the tool then fails to create its
    vectors)."""
    monkeypatch.chdir(tmp_path)
    run = npm.NetPerfMeterRun(StubNet(), "near", "far", 9000, [npm.NpmFlow(1, "f")], 5,
                              name="rel", out_dir=os.path.join("results", "raw"))
    assert run.out_dir == str(tmp_path / "results" / "raw")
    for arg in run.active_args():
        if arg.startswith(("-vector=", "-scalar=", "-config=")):
            assert os.path.isabs(arg.split("=", 1)[1]), arg


def test_paced_stream_frame_rate_and_on_off_instants():
    assert npm_flows.frame_rate(4.0, 1000) == 500.0      # 4 Mbit/s in 1000-byte frames
    flow = npm.NpmFlow(3, "s", rate_mbit=4.0, frame_bytes=1000)
    assert flow.spec().startswith("const500:const1000:const0:const0:")
    # a frame above the largest message is n equal messages (the tool pads the last)
    big = npm.NpmFlow(5, "v", rate_mbit=7.0, frame_bytes=35000)
    assert (big.messages, big.msg_bytes, big.frame_bytes) == (3, 11667, 35001)
    assert "maxmsgsize=11667" in big.spec()
    assert npm_flows.frame_rate(7.0, big.frame_bytes) * big.frame_bytes * 8 == pytest.approx(7e6)
    down = npm.NpmFlow(4, "d", direction="down")
    assert down.spec().startswith("const0:const0:const0:const1448:")
    # the study's on-off: on 1 s, off 5 s, on one connection
    assert npm.onoff_times(20, 1, 5) == [0, 1, 6, 7, 12, 13, 18, 19]
    assert npm.onoff_times(13, 1, 5, start_s=0.5) == [0.5, 1.5, 6.5, 7.5, 12.5]
    with pytest.raises(UsageError):
        npm.NpmFlow(1, "bad name")


def test_part_refuses_a_stream_without_its_reference_rate():
    cls = part_class("netperfmeter")
    spec = {"kind": "netperfmeter", "name": "stream", "src": "h1", "dst": "h2",
            "start": 0.0, "stop": 1.0, "rate_scale": 0.5}
    with pytest.raises(UsageError, match="bulk_goodput_mbit"):
        cls.check_spec(spec)
    cls.check_spec(dict(spec, rate_mbit=9.5))
    with pytest.raises(UsageError, match="count 1"):
        cls.check_spec(dict(spec, rate_mbit=1, direction="down", count=2))
    with pytest.raises(UsageError, match="on_off_s"):
        cls.check_spec(dict(spec, rate_mbit=1, on_off_s=(1, -5)))


# ----------------------------------------------------------------------------- parsers

def test_connections_and_socket_ports():
    fds = npm_output.parse_connections(read("cap-npm.stdout.txt"))
    assert sorted(fds) == [1, 2, 3, 4] and len(set(fds.values())) == 4
    links = {int(k): v for k, v in META["fd_links"].items()}
    ports = npm_run.match_sockets(links, [META["proc_net_tcp"]])
    assert ports == {int(k): tuple(v) for k, v in META["sockets"].items()}
    assert {p[1] for p in ports.values()} == {9000}     # the data port, not control 9001
    # independent check: ss shows flow 1's socket with reno and flow 3's with cubic
    ss = {int(m[1]): m[2] for m in re.finditer(r"10\.0\.0\.1:(\d+)\s+10\.0\.0\.2:9000\s*\n"
                                               r"\s+(\w+)", META["ss_near"])}
    assert ss[ports[1][0]] == "reno" and ss[ports[3][0]] == "cubic"


def test_summary_vector_is_consistent():
    for node in ("active", "passive"):
        rows = npm_output.parse_summary_vector(read(f"cap-npm-{node}.vec"))
        assert rows and {r["action"] for r in rows} == {"Sent", "Received", "Lost"}
        keys = {(r["flow_id"], r["action"]) for r in rows}
        for key in keys:
            mine = [r for r in rows if (r["flow_id"], r["action"]) == key]
            # the per-interval bytes add up to the cumulative count
            assert sum(r["rel_bytes"] for r in mine) == mine[-1]["abs_bytes"]
        last = {}
        for r in rows:
            last[(r["flow_id"], r["action"])] = r["abs_bytes"]
        for action in ("Sent", "Received"):
            assert last[(-1, action)] == sum(v for (f, a), v in last.items()
                                             if a == action and f > 0)


def test_flow_vectors_scalars_and_physics():
    active = npm_output.flow_scalars(npm_output.parse_scalars(read("cap-npm-active.sca")),
                                     "active")
    passive = npm_output.flow_scalars(npm_output.parse_scalars(read("cap-npm-passive.sca")),
                                      "passive")
    assert sorted(active) == sorted(passive) == [1, 2, 3, 4]
    for fid, node, scal in ((1, "passive", passive), (2, "passive", passive),
                            (3, "passive", passive), (4, "active", active)):
        msgs = npm_output.parse_flow_vector(read(f"cap-npm-{node}-{fid:08x}-0000.vec"))
        assert msgs
        # the receiver's cumulative bytes end at what its scalar file counted
        assert msgs[-1]["abs_bytes"] == scal[fid]["Received Bytes"]
        assert all(b["abs_bytes"] - a["abs_bytes"] == b["rel_bytes"]
                   for a, b in zip(msgs, msgs[1:]))
        assert [m["seq"] for m in msgs] == sorted(m["seq"] for m in msgs)
        # one clock: no message arrives sooner than the path's one-way delay
        assert min(m["delay_ms"] for m in msgs) >= ONE_WAY_MS
    # the stream's frames: 1000 bytes each, a message per frame
    stream = npm_output.parse_flow_vector(read("cap-npm-passive-00000003-0000.vec"))
    assert {m["rel_bytes"] for m in stream} == {1000}
    # nobody receives what was not sent
    for fid in (1, 2, 3):
        assert passive[fid]["Received Bytes"] <= active[fid]["Transmitted Bytes"]


def test_run_rows_and_summary_on_the_clock():
    run = fixture_run()
    rows = run.rows()
    launched = META["launched_mono"] - META["t0"]
    assert isinstance(rows["npm_msg"], CellRows)
    msgs = npm_output.message_rows(rows["npm_msg"])
    assert {m["flow"] for m in msgs} == {"bulk", "onoff", "stream", "down"}
    assert all(launched < m["t_sent"] < m["t_recv"] < launched + 15 for m in msgs)
    assert all(m["t_recv"] - m["t_sent"] >= ONE_WAY_MS / 1e3 - 1e-6 for m in msgs)
    by_flow = {}
    for m in msgs:
        by_flow[m["flow"]] = by_flow.get(m["flow"], 0) + m["size_bytes"]
    ivs = rows["npm"]
    assert set(ivs[0]) == set(npm_output.COLUMNS) and set(msgs[0]) == set(npm_output.MSG_COLUMNS)
    summary = run.summary()
    flows = {f["flow"]: f for f in summary["flows"]}
    received = npm_output.flow_scalars(npm_output.parse_scalars(read("cap-npm-passive.sca")),
                                "passive")[1]["Received Bytes"]
    assert flows["bulk"]["bytes_received"] == received and flows["down"]["sender"] == "far"
    # neither the passive node's intervals nor the messages recorded after the first
    # statistics event exceed what it received
    got = sum(r["received_bytes"] or 0 for r in ivs
              if r["flow"] == "bulk" and r["node"] == "passive")
    assert 0.9 * received < got <= received
    assert 0.9 * received < by_flow["bulk"] <= received
    sent = sum(r["sent_bytes"] or 0 for r in ivs
               if r["flow"] == "bulk" and r["node"] == "active")
    assert sent == flows["bulk"]["bytes_sent"]
    # the stream was on from 1 s after the measurement's start, the download from 2 s
    start = run.measurement_start_real() - META["realtime_minus_monotonic"] - META["t0"]
    # (the tool's own time base is set a little before its first statistics event)
    assert flows["stream"]["t_start"] - start == pytest.approx(1.0, abs=0.3)
    assert flows["down"]["t_start"] - start == pytest.approx(2.5, abs=0.3)
    assert flows["stream"]["first_on_s"] - start == pytest.approx(1.0)
    # launched with its process (plus its first "on"), before its first transmission
    launched = META["launched_mono"] - META["t0"]
    assert flows["stream"]["t_launch"] == pytest.approx(launched + 1.0)
    assert all(f["t_launch"] <= f["t_start"] for f in flows.values())
    assert summary["error"] is None


def test_on_off_is_one_connection_sending_in_its_windows():
    """onoff=0,1,1,1,1 (increments, see onoff_increments): on 0-1, 2-3, 4-5 s. Every
    message of the on-off flow was written inside an on window, and each window has
    messages: the tool reads the list as increments, as the spec builds it."""
    run = fixture_run()
    start = run.measurement_start_real() - META["realtime_minus_monotonic"] - META["t0"]
    sent = [m["t_sent"] - start for m in npm_output.message_rows(run.rows()["npm_msg"])
            if m["flow"] == "onoff"]
    windows = [(0, 1), (2, 3), (4, 5)]
    slack = 0.2                       # the tool's timers under TCG, and its time base
    assert all(any(a - slack <= t <= b + slack for a, b in windows) for t in sent)
    assert all(any(a - slack <= t <= b + slack for t in sent) for a, b in windows)
    assert len(META["sockets"]) == 4  # one connection per flow, the on-off flow's too


def test_message_cells_are_the_rows_of_the_parser_formatted_cell_by_cell():
    """The one-pass reader (npm_msg.csv's cells) against the parser's dicts converted to
    run time and formatted as every other series' cells are: equal, cell for cell, on
    every captured flow vector (a bulk, an on-off, a stream, a download)."""
    rmm, t0 = META["realtime_minus_monotonic"], META["t0"]
    names = [n for n in sorted(os.listdir(D)) if n.startswith("cap-npm-")
             and n.count("-") == 4 and n.endswith(".vec")]
    assert len(names) == 8    # each flow's vector at both nodes (the sender's: empty)
    nonempty = 0
    for name in names:
        text = read(name)
        want = []
        for r in npm_output.parse_flow_vector(text):
            t_recv = r["abs_time_us"] / 1e6 - rmm - t0
            want.append([format_cell(v) for v in (
                "f", r["seq"], round(t_recv - r["delay_ms"] / 1e3, 6), round(t_recv, 6),
                r["rel_bytes"], r["abs_bytes"])])
        got = npm_output.message_cells(text, "f", rmm, t0)
        assert [list(c) for c in got] == want, name
        if want:
            nonempty += 1
            assert npm_output.message_rows(got)[0]["t_recv"] == float(want[0][3])
    assert nonempty == 4


# ----------------------------------------------------------------------------- processes

def test_flows_are_cut_into_even_groups_of_at_most_the_process_size():
    """The passive side identifies one new flow per active process per 250 ms tick: a
    run's flows go to processes of at most FLOWS_PER_PROCESS, as even as the count
    allows, every flow in exactly one, in order."""
    for n, per, sizes in ((1, 10, [1]), (7, 10, [7]), (10, 10, [10]), (20, 10, [10, 10]),
                          (45, 10, [9, 9, 9, 9, 9]), (80, 10, [10] * 8),
                          (21, 10, [7, 7, 7]), (5, 2, [2, 2, 1])):
        groups = npm_flows.flow_groups(list(range(n)), per)
        assert [len(g) for g in groups] == sizes, (n, per)
        assert [x for g in groups for x in g] == list(range(n))
    flows = [npm.NpmFlow(i + 1, f"f{i + 1}") for i in range(25)]
    run = npm.NetPerfMeterRun(StubNet(), "near", "far", 9000, flows, 5, name="c")
    assert [g.stem for g in run.actives] == ["c-npm", "c-npm-p2", "c-npm-p3"]
    seen = []
    for k, g in enumerate(run.actives):
        args = run.active_args(k)
        assert f"-vector={os.path.join(run.out_dir, g.stem)}.vec" in args
        assert args[1] == "10.0.0.2:9000"        # the one passive side, every process
        seen += [int(re.search(r":id=(\d+):", a)[1]) for a in args if ":id=" in a]
    assert seen == list(range(1, 26))
    run.cleanup()


def test_a_run_split_over_processes_reads_the_same_rows_as_one_process(tmp_path):
    """Two processes' files (the capture's, given to flows 1-2 and 3-4 by name) read
    back to the same interval rows, messages, scalars and summary as the one process
    that wrote them: each process's files count for its own flows only."""
    one = fixture_run()
    for name in os.listdir(D):
        if name.startswith("cap-npm"):
            for stem in ("cap-npm", "cap-npm-p2"):
                with open(os.path.join(D, name)) as src, \
                        open(tmp_path / name.replace("cap-npm", stem, 1), "w") as dst:
                    dst.write(src.read())
    two = npm.NetPerfMeterRun(StubNet(), "near", "far", 9000, one.flows, META["runtime_s"],
                              name="cap", out_dir=str(tmp_path), t0=META["t0"],
                              realtime_minus_monotonic=META["realtime_minus_monotonic"],
                              per_process=2)
    two.launched_mono = META["launched_mono"]
    assert [[f.flow_id for f in g.flows] for g in two.actives] == [[1, 2], [3, 4]]

    def key(rows):
        return sorted(tuple(sorted((k, str(v)) for k, v in r.items())) for r in rows)
    a, b = one.rows(), two.rows()
    assert key(a["npm"]) == key(b["npm"])
    assert sorted(a["npm_msg"]) == sorted(b["npm_msg"]) and len(b["npm_msg"]) > 1000
    assert one.scalars("passive") == two.scalars("passive")
    sa, sb = one.summary(), two.summary()
    assert sa["flows"] == sb["flows"]
    assert [p["flows"] for p in sb["processes"]] == [2, 2]


def test_the_process_size_from_the_environment_is_checked(monkeypatch):
    cls = part_class("netperfmeter")
    spec = {"kind": "netperfmeter", "name": "bulk", "src": "h1", "dst": "h2",
            "start": 0.0, "stop": 1.0, "count": 20}
    monkeypatch.setenv(npm_flows.FLOWS_PER_PROCESS_ENV, "200")     # the old way: one process
    cls.check_spec(spec)
    run = npm.NetPerfMeterRun(StubNet(), "near", "far", 9000,
                              [npm.NpmFlow(i + 1, f"f{i}") for i in range(20)], 5, name="c")
    assert len(run.actives) == 1
    run.cleanup()
    for bad in ("0", "201", "ten", "5; reboot", "-3"):
        monkeypatch.setenv(npm_flows.FLOWS_PER_PROCESS_ENV, bad)
        with pytest.raises(UsageError, match=npm_flows.FLOWS_PER_PROCESS_ENV):
            cls.check_spec(spec)


class _Proc:
    """A process that ignores SIGINT (its wait times out) until stopped."""
    def __init__(self, pid):
        self.pid, self.returncode = pid, None

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        if self.returncode is None:
            raise subprocess.TimeoutExpired("netperfmeter", timeout)
        return self.returncode


def test_stop_ends_every_process_even_when_one_will_not_end(monkeypatch):
    """stop(): every active process and the passive side are ended by PID, and the
    outputs read, even when ending one of them fails (the others are not left running)."""
    run = npm.NetPerfMeterRun(StubNet(), "near", "far", 9000,
                              [npm.NpmFlow(i + 1, f"f{i}") for i in range(20)], 5, name="s")
    assert len(run.actives) == 2
    for k, g in enumerate(run.actives):
        g.proc = _Proc(1000 + k)
    run.passive = _Proc(2000)
    ended, signalled = [], []
    monkeypatch.setattr(npm_run.os, "kill", lambda pid, sig: signalled.append((pid, sig)))
    monkeypatch.setattr(npm_run, "STOP_GRACE_S", 0.01)

    def stop_process(proc):
        ended.append(proc.pid)
        proc.returncode = -9
        if proc.pid == 1000:
            raise subprocess.TimeoutExpired("netperfmeter", 1)
    monkeypatch.setattr(npm_run, "stop_process", stop_process)
    with pytest.raises(subprocess.TimeoutExpired):
        run.stop()
    assert ended == [1000, 1001, 2000]
    assert (1000, 2) in signalled and (1001, 2) in signalled   # SIGINT to each first
    assert run._finished
    run.stop()                                   # idempotent: nothing ended twice
    assert ended == [1000, 1001, 2000]
    run.cleanup()


def test_a_part_stops_its_processes_before_its_timeline_exists():
    """A pre-connected part starts its processes in prepare(); a run that fails before
    the part's timeline starts (the sampler, an interrupt) still stops them."""
    stopped = []

    class Run:
        def stop(self):
            stopped.append(True)
    part = part_class("netperfmeter").__new__(part_class("netperfmeter"))
    part._schedule, part.run = None, Run()
    part.stop()
    assert stopped == [True]


def test_a_part_interrupted_before_its_timeline_still_summarises():
    """Ctrl-C while the flows connect (found in the VM, tmux): the part's timeline never
    started, and its summary must still be recorded (it raised AttributeError on
    scheduled_s, and the record lost the processes and the tool's error)."""
    run = fixture_run()
    assert run.scheduled_s is None
    part = part_class("netperfmeter").__new__(part_class("netperfmeter"))
    part.run, part.name = run, "cap"
    entry = part.summary()[0]
    assert entry["kind"] == "NetPerfMeterRun" and len(entry["flows"]) == 4
    assert all("scheduled_s" not in f for f in entry["flows"])
    assert [p["flows"] for p in entry["processes"]] == [4]
