"""The pieces of a Dask sweep that need no network: a run sent by a worker is
written only under its own key and never outside its directory, the code identity
changes with the code, the runner keeps the index in the points' order whatever order
they finish in and holds a derived point until its provider is done, and bad cluster
options or an unreachable scheduler are refused (exit 2) before anything is made."""
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile

import pytest

from bufferbloat.core import paths
from bufferbloat.run import cluster, plan, remote, sweep, watch
from bufferbloat.run.executor import SerialExecutor
from bufferbloat.scenarios import catalogue

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run_dir(path, key, status="ok"):
    os.makedirs(os.path.join(path, "raw"))
    with open(os.path.join(path, "result.json"), "w") as f:
        json.dump({"status": status, "run_key": key}, f)
    with open(os.path.join(path, "raw", "iperf.json"), "w") as f:
        f.write("{}")
    with open(os.path.join(path, "metrics.json"), "w") as f:      # what derive.py reads
        json.dump({"metrics": [{"scope": "network", "name": "all",
                                "metric": "goodput_up_mbit", "value": 9.0}]}, f)


def test_a_run_comes_back_whole_under_its_key(tmp_path):
    _run_dir(tmp_path / "worker", "k1")
    archive = remote.pack_run(str(tmp_path / "worker"))
    dest = tmp_path / "tree" / "a1_fifo" / "rep-1"
    cluster.unpack_run(archive, str(dest), "k1")
    assert json.loads((dest / "result.json").read_text())["run_key"] == "k1"
    assert (dest / "raw" / "iperf.json").read_text() == "{}"
    assert [p.name for p in dest.parent.iterdir()] == ["rep-1"]    # nothing beside it


def test_a_run_under_another_key_is_refused_and_nothing_written(tmp_path):
    _run_dir(tmp_path / "worker", "other")
    dest = tmp_path / "tree" / "rep-1"
    with pytest.raises(ValueError, match="run_key other.*expected k1"):
        cluster.unpack_run(remote.pack_run(str(tmp_path / "worker")), str(dest), "k1")
    assert not dest.exists()
    assert list((tmp_path / "tree").iterdir()) == []


def test_a_late_copy_never_replaces_the_recorded_run(tmp_path):
    """A worker cut off and back sends its run after the point was run elsewhere and
    recorded: the recorded run stays, byte for byte, and nothing is left beside it."""
    _run_dir(tmp_path / "rerun", "k1")
    dest = tmp_path / "tree" / "rep-1"
    assert cluster.unpack_run(remote.pack_run(str(tmp_path / "rerun")), str(dest), "k1")
    recorded = (dest / "result.json").read_bytes()
    _run_dir(tmp_path / "late", "k1")
    (tmp_path / "late" / "result.json").write_text('{"status": "ok", "run_key": "k1", '
                                                   '"late": true}')
    assert cluster.unpack_run(remote.pack_run(str(tmp_path / "late")), str(dest),
                              "k1") is False
    assert (dest / "result.json").read_bytes() == recorded
    assert [p.name for p in dest.parent.iterdir()] == ["rep-1"]


def test_what_a_run_costs_on_its_way_back_and_the_limit(monkeypatch):
    res = {"archive": b"x" * 5000, "worker": "pc1"}
    assert cluster.sent(res, limit=10_000) == {"sent_bytes": 5000}
    monkeypatch.setenv(cluster.SEND_LIMIT_ENV, "4000")
    warned = cluster.sent(res)["warning"]
    assert "from worker pc1" in warned and cluster.SEND_LIMIT_ENV in warned


def test_a_worker_that_lost_its_scheduler_ends_its_point():
    class Status:
        def __init__(self, name):
            self.name = name

    class Worker:
        status = Status("running")
    assert not remote._closing(Worker()) and not remote._closing(None)
    Worker.status = Status("closing")
    assert remote._closing(Worker())


def test_a_point_lost_with_its_scheduler_fails_when_it_cannot_be_sent_again():
    ex = object.__new__(cluster.DaskExecutor)
    ex.address, ex.log = None, print           # a local cluster: its scheduler is ours

    class Job:
        label = "a1_fifo rep 1"
    got = ex._scheduler_lost(Job())
    assert got.status == "failed" and "scheduler was lost" in str(got.exc)
    ex.address = "tcp://lab0:8786"
    job = Job()
    job.lost = cluster.LOST_TRIES
    assert "not recorded" in str(ex._scheduler_lost(job).exc)


@pytest.mark.parametrize("name", ["../escape.txt", "/etc/escape.txt"])
def test_an_archive_reaching_outside_its_directory_is_refused(tmp_path, name):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b'{"status": "ok", "run_key": "k"}'
        for n in ("./result.json", name):
            info = tarfile.TarInfo(n)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    dest = tmp_path / "tree" / "rep-1"
    with pytest.raises(ValueError, match="refused a run archive member"):
        cluster.unpack_run(buf.getvalue(), str(dest), "k")
    assert not dest.exists() and not (tmp_path / "escape.txt").exists()


def test_the_code_identity_changes_with_a_scenario_file(tmp_path, monkeypatch):
    copy = tmp_path / "checkout"
    for d in ("bufferbloat", "scenarios", "webserver"):
        shutil.copytree(os.path.join(ROOT, d), copy / d,
                        ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(paths, "PACKAGE_DIR", copy / "bufferbloat")
    monkeypatch.setattr(paths, "SOURCE_ROOT", copy)
    monkeypatch.setattr(paths, "code_identity", lambda: "copy")
    first = paths.code_fingerprint()["hash"]
    names = [n for n, _ in paths._code_files()]
    assert "bufferbloat/scenarios/a1.py" in names or any(
        n.startswith("bufferbloat/scenarios/") for n in names)
    assert not any(n.startswith("bufferbloat/plots/") for n in names)
    assert paths.code_fingerprint()["hash"] == first          # stable
    scn = sorted((copy / "scenarios").glob("*.py"))[-1]
    scn.write_text(scn.read_text() + "\n# changed\n")
    assert paths.code_fingerprint()["hash"] != first


def test_a_worker_with_other_code_refuses_naming_both(monkeypatch):
    monkeypatch.setattr(remote, "code_fingerprint",
                        lambda: {"hash": "aaaa", "text": "git 111"})
    with pytest.raises(remote.CodeMismatch) as err:
        remote.run_remote({"code": {"hash": "bbbb", "text": "git 222"}})
    text = str(err.value)
    assert "aaaa" in text and "bbbb" in text and "git 111" in text and "git 222" in text
    assert "refused, nothing run" in text


class _OutOfOrder:
    """An executor that holds two points and finishes the later one first."""

    def __init__(self):
        self.queue, self.order, self.derived_with_busy = [], [], []
        self.derived, self.derived_together = 0, 0

    def room(self):
        return 2 - len(self.queue)

    def busy(self):
        return len(self.queue)

    def submit(self, job):
        from bufferbloat.run import derive
        scn = catalogue()[job.spec["scenario"]]
        if derive.needs(scn, {k: v for k, v in job.spec["overrides"].items()
                              if k not in scn.derived}):
            self.derived += 1
            self.derived_together += any("stream" in str(o.spec["overrides"].get("load"))
                                         for o in self.queue)
            for other in self.queue:      # its provider must be done, not in flight
                if other.spec["overrides"].get("load") == "bulk" and \
                        other.spec["overrides"]["cca"] == job.spec["overrides"]["cca"]:
                    self.derived_with_busy.append(job.label)
        self.queue.append(job)

    def next_done(self):
        job = self.queue.pop()               # the newest first
        job.go()
        self.order.append(job.pos)
        return job, watch.Outcome("ok", job.path, "healthy")

    def stop(self):
        jobs, self.queue = self.queue, []
        return jobs

    def describe(self):
        return "test"

    def close(self):
        pass


def _fake_run_point(run, run_dir=None, log=None):
    _run_dir(run_dir, run.key)


def test_the_index_keeps_the_points_order_whatever_order_they_finish_in(tmp_path):
    scn = catalogue()["a1_fifo"]
    todo = [(scn, {"buffer_pkts": str(n)}, {"buffer_pkts": str(n)}, 1)
            for n in (20, 30, 40, 50)]
    ex = _OutOfOrder()
    index, failed = sweep.run_points(plan.plan_points(todo, duration_s=5.0), str(tmp_path),
                                     _fake_run_point, str(tmp_path / "index.json"), {},
                                     log=lambda m: None, stall_limit=None, executor=ex)
    assert failed == 0
    assert ex.order != sorted(ex.order)              # they did finish out of order
    assert [e["varied"]["buffer_pkts"] for e in index] == ["20", "30", "40", "50"]
    saved = json.loads((tmp_path / "index.json").read_text())
    assert [e["varied"]["buffer_pkts"] for e in saved["done"]] == ["20", "30", "40", "50"]
    assert saved["executor"] == "test"
    # the same tree as the serial executor's
    serial = tmp_path / "serial"
    sweep.run_points(plan.plan_points(todo, duration_s=5.0), str(serial), _fake_run_point,
                     str(serial / "index.json"), {}, log=lambda m: None, stall_limit=None,
                     executor=SerialExecutor(watch.run_one, lambda m: None))
    def tree(root):
        return sorted(os.path.relpath(os.path.join(d, f), root)
                      for d, _, fs in os.walk(root) for f in fs if f != "index.json")
    assert tree(serial / "a1_fifo") == tree(tmp_path / "a1_fifo")
    assert len(tree(serial / "a1_fifo")) == 12


def test_a_derived_point_waits_for_its_provider(tmp_path):
    scn = catalogue()["d1_cca_paths"]         # streams paced from their bulk run
    vary = {"cca": ["reno", "cubic"], "load": ["bulk", "stream50"]}
    todo = [(scn, dict(v), v, rep) for v, rep in plan.points(vary, 1)]
    ex = _OutOfOrder()
    index, failed = sweep.run_points(plan.plan_points(todo, quick=True, duration_s=5.0),
                                     str(tmp_path), _fake_run_point,
                                     str(tmp_path / "index.json"), {}, log=lambda m: None,
                                     stall_limit=None, executor=ex)
    assert failed == 0 and [e["status"] for e in index] == ["ok"] * 4, index
    assert ex.derived > 0 and ex.order      # derived points ran, after others
    assert ex.derived_with_busy == []
    assert ex.derived_together > 0          # the streams, once paced, run side by side


def _cli(argv, env=None):
    env = dict(os.environ, PYTHONPATH=ROOT, **(env or {}))
    return subprocess.run([sys.executable, "-m", "bufferbloat"] + argv, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("argv, text", [
    (["--cluster", "8786"], "invalid --cluster '8786'"),
    (["--cluster", "tcp://h:1; rm -rf /"], "invalid --cluster"),
    (["--workers", "0"], "--workers"),
    (["--workers", "2", "--cluster", "tcp://a:1"], "not allowed with"),
])
def test_bad_cluster_options_exit_2(tmp_path, argv, text):
    proc = _cli(["sweep", "a1_fifo", "--vary", "buffer_pkts=20,50", "--out",
                 str(tmp_path / "out")] + argv)
    assert proc.returncode == 2, proc.stderr
    assert text in proc.stderr
    assert not (tmp_path / "out").exists()


def test_an_unreachable_scheduler_exits_2_before_anything_is_made(tmp_path):
    with socket.socket() as s:          # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = _cli(["sweep", "a1_fifo", "--vary", "buffer_pkts=20,50", "--out",
                 str(tmp_path / "out"), "--cluster", f"tcp://127.0.0.1:{port}"])
    assert proc.returncode == 2, proc.stderr
    assert f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()
    proc = _cli(["worker", f"tcp://127.0.0.1:{port}", "--name", "t"],
                env={remote.WORKER_DIR_ENV: str(tmp_path / "w")})
    assert proc.returncode == 2 and "cannot reach the Dask scheduler" in proc.stderr
    assert not (tmp_path / "w").exists()
