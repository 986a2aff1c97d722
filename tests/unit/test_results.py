"""Run directories: RunWriter -> load_run round trips, interruption, atomic saves, schema 1 refused."""
import json
import math
import os
import time

import numpy as np
import pytest

from bufferbloat.core.atomic import write_json_atomic
from bufferbloat.core.errors import UsageError
from bufferbloat.core.series import SERIES_COLUMNS, CellRows
from bufferbloat.results.records import find_runs, is_run_dir, label_groups, load_run
from bufferbloat.results.records_csv import format_cell, read_series_csv
from bufferbloat.results.records_layout import SCHEMA_VERSION, ResultsError
from bufferbloat.results.records_writer import RunWriter


def test_cell_rows_are_written_as_they_are_and_a_tools_own_raw_file_is_listed(tmp_path):
    """A CellRows batch (cells already formatted: NetPerfMeter's messages) reads back as
    the same rows written as dicts; a row of another length is refused. A raw file the
    tool wrote into raw/ itself is listed (data None), not rewritten; one that is not
    there is an error, not a listed name."""
    w = RunWriter(tmp_path / "r")
    cols = SERIES_COLUMNS["npm_msg"]
    rows = [{"flow": "bulk", "seq": 1, "t_sent": 0.1, "t_recv": 0.1 + 1 / 3, "size_bytes": 9,
             "abs_bytes": 9}, {"flow": "bulk", "seq": 2, "t_sent": 0.2, "t_recv": float("nan"),
                               "size_bytes": 8, "abs_bytes": 17}]
    w.add_rows("msg_dicts", cols, rows)
    cells = CellRows(tuple(format_cell(r[c]) for c in cols) for r in rows)
    w.add_rows("npm_msg", cols, cells)
    with pytest.raises(ValueError, match="row has 5 cells, expected 6"):
        w.add_rows("npm_msg", cols, CellRows([cells[0][:5]]))
    (tmp_path / "r" / "raw" / "bulk.vec").write_text("tool's own\n")
    w.raw("bulk.vec", None)
    with pytest.raises(FileNotFoundError, match="raw/gone.vec"):
        w.raw("gone.vec", None)
    w.close("ok")
    assert (tmp_path / "r" / "series" / "npm_msg.csv").read_text() == \
        (tmp_path / "r" / "series" / "msg_dicts.csv").read_text()
    assert (tmp_path / "r" / "raw" / "bulk.vec").read_text() == "tool's own\n"
    assert load_run(tmp_path / "r").record["raw"] == ["bulk.vec"]


def test_round_trip_of_series_raw_and_record(tmp_path):
    run_dir = tmp_path / "a1_fifo" / "stamp"
    w = RunWriter(run_dir)
    assert (run_dir / "series").is_dir() and (run_dir / "raw").is_dir()
    w.record.update(scenario={"name": "a1_fifo"}, params={"bottleneck_mbit": 1.5},
                    t0_realtime=1.7e9, realtime_minus_monotonic=1.6e9)
    w.save()
    assert json.loads((run_dir / "result.json").read_text())["status"] == "running"
    ping = w.series("ping", SERIES_COLUMNS["ping"])
    ping.append({"probe": "h1", "t": 0.1, "seq": 1, "rtt_ms": 20.123456789012345})
    ping.append(["h1", 0.2, 2, None])          # a sequence; None = lost
    ping({"probe": "h1", "t": 0.3, "seq": 3})  # missing key = empty cell
    assert w.series("ping", SERIES_COLUMNS["ping"]) is ping
    w.add_rows("web", ["fetch", "t", "total_s", "ok"],
               [("f1", 1.0, 0.25, True), {"fetch": "2", "t": 2.0, "total_s": 0.5, "ok": False}])
    w.raw("ping-h1.txt", "PING 10.0.0.2\n")
    w.raw("blob.bin", b"\x00\x01")
    w.close("ok")

    run = load_run(run_dir)
    assert run.record["schema_version"] == SCHEMA_VERSION == 2
    assert run.record["status"] == "ok" and run.record["error"] is None
    assert run.record["series"]["ping"] == {"file": "series/ping.csv",
                                            "columns": ["probe", "t", "seq", "rtt_ms"],
                                            "rows": 3}
    assert run.record["raw"] == ["ping-h1.txt", "blob.bin"]
    p = run.series("ping")
    assert p["probe"].tolist() == ["h1"] * 3
    assert p["t"].dtype == float and p["t"].tolist() == [0.1, 0.2, 0.3]
    assert p["rtt_ms"][0] == 20.123456789012345  # full float precision
    assert math.isnan(p["rtt_ms"][1]) and math.isnan(p["rtt_ms"][2])
    web = run.series("web")
    assert web["fetch"].tolist() == ["f1", "2"]  # a label column stays str
    assert web["ok"].tolist() == [1.0, 0.0]
    assert run.has("ping") and run.has("web") and not run.has("tcp")
    assert run.series_names() == ["ping", "web"]
    assert run.raw("ping-h1.txt") == "PING 10.0.0.2\n"
    assert run.raw("blob.bin", binary=True) == b"\x00\x01"
    assert run.bottleneck_mbit == 1.5
    with pytest.raises(KeyError, match="has: ping, web"):
        run.series("tcp")


def test_start_clock_records_the_one_clock(tmp_path):
    w = RunWriter(tmp_path / "r")
    with pytest.raises(ValueError):
        w.now()
    before = time.monotonic()
    t0 = w.start_clock()
    assert before <= t0 <= time.monotonic() and w.t0 == t0
    rec = w.record
    assert rec["t0_realtime"] - rec["realtime_minus_monotonic"] == pytest.approx(t0)
    assert abs(rec["t0_realtime"] - time.time()) < 5 and "started" in rec
    assert 0 <= w.now() < 5
    w.close("ok")


def test_bad_rows_names_and_statuses_are_refused(tmp_path):
    w = RunWriter(tmp_path / "r")
    s = w.series("x", ["a", "b"])
    with pytest.raises(ValueError, match="unknown column"):
        s.append({"a": 1, "c": 2})
    with pytest.raises(ValueError, match="3 values, expected 2"):
        s.append([1, 2, 3])
    with pytest.raises(ValueError, match="already has columns"):
        w.series("x", ["a"])
    for bad in ("../x", "a/b", ".hidden", ""):
        with pytest.raises(ValueError):
            w.raw(bad, "x")
    for bad in ("../x", ".x", "a b"):
        with pytest.raises(ValueError):
            w.series(bad, ["a"])
    with pytest.raises(ValueError, match="final status"):
        w.close("running")
    w.close("ok")
    with pytest.raises(ValueError, match="closed"):
        s.append([1, 2])


def test_rows_are_flushed_while_the_run_goes_on(tmp_path):
    w = RunWriter(tmp_path / "r", flush_rows=1000, flush_interval_s=0.2)
    s = w.series("tcp", ["t", "flow"])
    s.append([0.0, "f"])  # no further append: the background flusher must write it
    path = tmp_path / "r" / "series" / "tcp.csv"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and path.read_text().count("\n") < 2:
        time.sleep(0.05)
    assert path.read_text() == "t,flow\n0.0,f\n"
    w2 = RunWriter(tmp_path / "r2", flush_rows=3, flush_interval_s=3600)
    s2 = w2.series("x", ["a"])
    for i in range(3):
        s2.append([i])
    assert (tmp_path / "r2" / "series" / "x.csv").read_text() == "a\n0\n1\n2\n"
    w.close("ok")
    w2.close("ok")


def test_an_interrupted_run_keeps_what_was_recorded(tmp_path):
    run_dir = tmp_path / "r"
    with pytest.raises(KeyboardInterrupt):
        with RunWriter(run_dir, flush_rows=10) as w:
            w.save()
            s = w.series("ping", ["probe", "t", "seq", "rtt_ms"])
            for i in range(25):
                s.append(["h1", i * 0.1, i + 1, 20.0 + i])
            raise KeyboardInterrupt
    run = load_run(run_dir)  # valid JSON
    assert run.record["status"] == "interrupted"
    assert run.record["error"] == "KeyboardInterrupt"
    assert run.series("ping")["seq"].tolist() == list(range(1, 26))
    assert run.record["series"]["ping"]["rows"] == 25


def test_a_failed_run_records_its_error(tmp_path):
    with pytest.raises(RuntimeError):
        with RunWriter(tmp_path / "r"):
            raise RuntimeError("iperf3 died")
    rec = load_run(tmp_path / "r").record
    assert rec["status"] == "failed" and rec["error"] == "RuntimeError: iperf3 died"


def test_a_killed_run_keeps_flushed_rows_and_its_running_record(tmp_path):
    """A process killed mid-write: result.json from the start, rows up to the last
    complete line (a torn last line is ignored)."""
    w = RunWriter(tmp_path / "r", flush_rows=1)
    w.record["t0_realtime"] = 1.0
    w.save()
    s = w.series("udp", ["stream", "seq", "t_sent", "t_recv", "size_bytes"])
    for i in range(5):
        s.append(["u", i, i * 0.01, i * 0.01 + 0.02, 1200])
    with open(tmp_path / "r" / "series" / "udp.csv", "a") as f:
        f.write("u,5,0.05,0.0")  # torn: the writer died in the middle of this row
    run = load_run(tmp_path / "r")
    assert run.record["status"] == "running"
    assert run.series("udp")["seq"].tolist() == [0, 1, 2, 3, 4]
    w.close("ok")


def test_a_malformed_row_in_the_middle_is_an_error(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("a,b\n1,2\n3\n4,5\n")
    with pytest.raises(ResultsError, match=":3:"):
        read_series_csv(str(path))


def test_a_failed_save_leaves_the_previous_result_intact(tmp_path, monkeypatch):
    w = RunWriter(tmp_path / "r")
    w.record["scenario"] = "a1"
    w.save()
    before = (tmp_path / "r" / "result.json").read_text()
    # a failure while serializing must not touch the file
    real_dumps = json.dumps

    def failing_dumps(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(json, "dumps", failing_dumps)
    w.record["scenario"] = "changed"
    with pytest.raises(OSError):
        w.save()
    monkeypatch.setattr(json, "dumps", real_dumps)
    assert (tmp_path / "r" / "result.json").read_text() == before

    # a failure while writing the temporary file: the old file stays, no temp remains
    def failing_fsync(fd):
        raise OSError("I/O error")
    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError):
        w.save()
    monkeypatch.undo()
    assert (tmp_path / "r" / "result.json").read_text() == before
    assert sorted(os.listdir(tmp_path / "r")) == ["raw", "result.json", "series"]
    w.record["nan"] = float("nan")
    w.save()  # strict JSON: NaN saved as null
    assert json.loads((tmp_path / "r" / "result.json").read_text())["nan"] is None
    assert json.loads((tmp_path / "r" / "result.json").read_text())["scenario"] == "changed"


def test_write_json_atomic_replaces_whole_documents(tmp_path):
    path = str(tmp_path / "x.json")
    for i in range(3):
        write_json_atomic(path, {"i": i, "pad": "x" * (1000 * (3 - i))})
        assert json.loads(open(path).read())["i"] == i
    assert os.listdir(tmp_path) == ["x.json"]


def test_load_errors_are_clear(tmp_path):
    with pytest.raises(ResultsError, match="no result.json"):
        load_run(tmp_path)
    (tmp_path / "result.json").write_text("{not json")
    with pytest.raises(ResultsError, match="not valid JSON"):
        load_run(tmp_path)
    (tmp_path / "result.json").write_text(json.dumps({"schema_version": 3}))
    with pytest.raises(ResultsError, match="schema_version 3 is newer"):
        load_run(tmp_path)
    assert issubclass(ResultsError, UsageError)  # the CLI prints it, exit code 2


def test_find_runs(tmp_path):
    for rel in ("a/1", "a/2", "b/x/1"):
        w = RunWriter(tmp_path / rel)
        w.close("ok")
    (tmp_path / "a" / "notarun").mkdir()
    (tmp_path / "index.json").write_text("{}")
    assert find_runs(tmp_path) == [str(tmp_path / r) for r in ("a/1", "a/2", "b/x/1")]
    assert find_runs(tmp_path / "a" / "1") == [str(tmp_path / "a" / "1")]


def test_schema_1_runs_are_refused_with_a_reason(tmp_path):
    """The first runner's records (schema 1: measurements, no series) are not read."""
    for record in ({"schema_version": 1, "status": "ok", "measurements": {}},
                   {"status": "failed"}):
        (tmp_path / "result.json").write_text(json.dumps(record))
        with pytest.raises(ResultsError, match="schema_version 1 .* no longer read"):
            load_run(tmp_path)


CHILD = r"""
import sys, time
sys.path.insert(0, sys.argv[2])
from bufferbloat.results.records_writer import RunWriter
w = RunWriter(sys.argv[1], flush_rows=1000, flush_interval_s=0.5)
w.save()
s = w.series("ping", ["probe", "t", "seq", "rtt_ms"])
i = 0
while True:
    s.append(["h1", i * 0.02, i, 20.0])
    print(i, flush=True)
    i += 1
    time.sleep(0.02)
"""


def test_a_process_killed_mid_run_leaves_its_rows(tmp_path):
    """SIGKILL (no cleanup at all): every row appended more than 0.5 s before is on disk."""
    import signal
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path / "r"), root],
                            stdout=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:
            if int(line) >= 30:
                break
        time.sleep(0.8)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    run = load_run(tmp_path / "r")
    assert run.record["status"] == "running"
    seqs = run.series("ping")["seq"].tolist()
    assert len(seqs) >= 31 and seqs == list(range(len(seqs)))


def test_run_accessors_read_the_record_once_for_everyone(tmp_path):
    w = RunWriter(tmp_path / "r")
    w.record.update(scenario={"name": "a2_pie", "figures": ["queue"]},
                    overrides={"flows": "2", "bottleneck_mbit": "5"},
                    params={"bottleneck_mbit": 5.0, "delay_ms": 5},
                    qdisc={"kind": "pie", "params": {"target_ms": 20}},
                    traffic=[{"kind": "iperf"}, {"kind": "ping", "interval_s": 0.1}],
                    warmup_s=2, bottleneck_dev=["s0", "s0-eth2"],
                    health={"verdict": "degraded", "problems": ["x"]},
                    traffic_results=[{"name": "f"}, "junk"])
    w.close("ok")
    run = load_run(tmp_path / "r")
    assert run.scenario_name == "a2_pie" and run.scenario["figures"] == ["queue"]
    assert run.label == "a2_pie bottleneck_mbit=5 flows=2"
    assert run.qdisc == ("pie", {"target_ms": 20}) and run.aqm_target_ms == 20.0
    assert run.base_rtt_ms == 20.0                      # 4 x delay_ms when not recorded
    assert run.ping_interval_s == 0.1 and run.warmup_s == 2.0
    assert run.bottleneck_dev == "s0-eth2"               # an older record's (ns, dev) pair
    assert run.verdict == "degraded" and run.traffic_results == [{"name": "f"}]
    assert run.error is None and run.bottleneck_mbit == 5.0
    assert is_run_dir(tmp_path / "r") and not is_run_dir(tmp_path)
    data = {"flow": np.array(["a", "b", "a"])}
    assert {k: v.tolist() for k, v in label_groups(data, "flow").items()} == \
        {"a": [True, False, True], "b": [False, True, False]}
    assert label_groups(data, "probe") == {}


def _series_files():
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fixtures", "runs")
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs
                  if f.endswith(".csv") and os.path.basename(d) == "series")


def test_the_fast_csv_path_reads_what_the_general_reader_does(monkeypatch, tmp_path):
    """Every recorded series of the fixture runs (and a departures series): numpy's
    compiled reader, where it takes the file, gives the general reader's columns,
    dtypes and values (NaN where NaN); a file it must not take (an empty cell, a
    quoted cell, a cut last line) goes to the general reader."""
    from bufferbloat.core.series import STRING_COLUMNS
    from bufferbloat.results import records_csv
    dep = tmp_path / "departures.csv"
    dep.write_text("t,dev,len_bytes,sojourn_ms,backlogged\n0.5,s0-eth2,1514,1.2,0\n"
                   "0.501211,s0-eth2,1514,2.4,1\n0.502,h2-eth0,66,0.01,0\n")
    files = _series_files() + [str(dep)]
    taken = 0
    for path in files:
        name = os.path.basename(path)[:-4]
        strings = STRING_COLUMNS.get(name, ())
        with monkeypatch.context() as m:
            m.setattr(records_csv, "_read_plain_csv", lambda text, sc: None)
            general = records_csv.read_series_csv(path, strings)
        with open(path) as f:
            taken += records_csv._read_plain_csv(f.read(), strings) is not None
        fast = records_csv.read_series_csv(path, strings)
        assert list(fast) == list(general), path
        for col in general:
            assert fast[col].dtype.kind == general[col].dtype.kind, (path, col)
            if general[col].dtype.kind == "f":
                np.testing.assert_array_equal(fast[col], general[col], err_msg=path)
            else:
                assert fast[col].tolist() == general[col].tolist(), (path, col)
    # every complete fixture series (empty cells, text columns) takes the fast path
    assert taken == len(files)
    # empty cells (NaN, or "" in a text column) and text columns found from the first
    # row read as the general reader reads them
    for text in ("t,a\n1,\n2,3\n", "t,a,b\n,x,\n2,,5\n", "a,b,c,d\n,,,\n1,,,2\n",
                 "t,flow,x\n1,f1,\n2,f2,7\n"):
        path = tmp_path / "cells.csv"
        path.write_text(text)
        fast = records_csv._read_plain_csv(text, ())
        assert fast is not None, text
        with monkeypatch.context() as m:
            m.setattr(records_csv, "_read_plain_csv", lambda text, sc: None)
            general = records_csv.read_series_csv(str(path))
        assert list(fast) == list(general), text
        for k, col in general.items():
            assert fast[k].dtype.kind == col.dtype.kind, (text, k)
            assert np.array_equal(fast[k], col, equal_nan=col.dtype.kind == "f"), (text, k)
    # quoted, cut short, or a column whose type changes after the first row: the
    # general reader's
    for text in ('t,flow\n1,"a,b"\n', "t,a\n1,2\n3", "t,a\n1,2\n2,abc\n",
                 "t,dev\n1,\n2,s0\n"):
        assert records_csv._read_plain_csv(text, ()) is None, text
