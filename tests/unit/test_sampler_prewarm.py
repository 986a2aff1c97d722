"""The sampler's process started before its run knows what it samples
(:class:`bufferbloat.measure.sampler.Prewarmed`): handed its spec it samples as a cold
start does, from the same series directory; never handed one it exits by itself; one that
ended is replaced by a cold start. Real processes in this namespace: no qdisc, no flow."""
import json
import subprocess
import time

import pytest

from bufferbloat.measure.sampler import AWAIT, Prewarmed, Sampler, main
from bufferbloat.run import engine


class _Net:
    """The network's popen: a process of ours, recorded."""

    def __init__(self):
        self.procs = []

    def popen(self, ns, argv, **kwargs):
        assert ns is None          # the sampler runs in the root namespace
        proc = subprocess.Popen([str(a) for a in argv], text=True, start_new_session=True,
                                **kwargs)
        self.procs.append(proc)
        return proc


def _sampler(net, run_dir):
    return Sampler(net, str(run_dir), time.monotonic(), qdisc_devs=[], flows=[],
                   duration_s=0.3, rt_priority=0)


def test_a_prewarmed_process_handed_its_spec_samples_and_writes_its_stats(tmp_path):
    net = _Net()
    warm = Prewarmed(net, str(tmp_path))
    sampler = _sampler(net, tmp_path).launch(warm)
    assert sampler.prewarmed is True and sampler.proc is warm.proc
    assert len(net.procs) == 1                  # no second process
    sampler.wait_ready()
    assert sampler.proc.wait(timeout=30) == 0
    stats = sampler.stats()
    assert stats is not None and stats["samples"] > 0 and stats["stopped_by"] == "duration"
    assert (tmp_path / "series" / "tcp.csv").read_text().startswith("t,")
    warm.end()                                  # used: nothing to do
    assert warm.proc.returncode == 0


def test_a_prewarmed_process_never_handed_a_spec_exits_by_itself(tmp_path):
    net = _Net()
    warm = Prewarmed(net, str(tmp_path))
    t = time.monotonic()
    warm.end()
    assert warm.proc.returncode == 0            # it exited: its input closed, no signal
    assert time.monotonic() - t < 10
    warm.end()                                  # idempotent


def test_an_ended_prewarmed_process_is_replaced_by_a_cold_start(tmp_path):
    net = _Net()
    warm = Prewarmed(net, str(tmp_path))
    warm.proc.kill()
    warm.proc.wait()
    sampler = _sampler(net, tmp_path).launch(warm)
    assert sampler.prewarmed is False and sampler.proc is not warm.proc
    sampler.wait_ready()
    assert sampler.proc.wait(timeout=30) == 0 and sampler.stats() is not None


def test_a_prewarmed_process_of_another_run_is_not_used(tmp_path):
    net = _Net()
    warm = Prewarmed(net, str(tmp_path / "other"))
    sampler = _sampler(net, tmp_path).launch(warm)
    assert sampler.prewarmed is False
    assert warm.proc.returncode == 0            # ended, not left behind
    sampler.wait_ready()
    sampler.proc.wait(timeout=30)


def test_the_awaiting_entry_reads_the_spec_path_from_its_input(tmp_path, monkeypatch):
    import io
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main([AWAIT]) == 0                   # no path: nothing to sample
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"t0": time.monotonic(), "out_dir": str(tmp_path),
                                "period_s": 0.01, "duration_s": 0.1, "rt_priority": 0,
                                "qdisc_devs": [], "flows": []}))
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{spec}\n"))
    assert main([AWAIT]) == 0
    assert (tmp_path / "series" / "sampler.json").exists()


@pytest.mark.parametrize("value", ["yes", "", "0"])
def test_a_bad_prewarm_setting_is_a_usage_error(value, monkeypatch):
    monkeypatch.setenv(engine.PREWARM_ENV, value)
    with pytest.raises(engine.UsageError, match=engine.PREWARM_ENV):
        engine.prewarm_wanted()
    monkeypatch.setenv(engine.PREWARM_ENV, "off")
    assert engine.prewarm_wanted() is False
