"""A finished run judged by the host that started its VM command (bufferbloat/run/judge.py):
the guest's request and the host's server, here with two directories standing for the
guest's /bb and the host's share. The host's answer is what the guest would have
computed; a host that does not take the request, fails, or runs other code leaves the
judgement to the guest, which says why."""
import json
import shutil
import threading
import time
from pathlib import Path

import pytest

from bufferbloat.run import judge

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "runs"


@pytest.fixture
def share(tmp_path, monkeypatch):
    """A share holding a copy of a stored run; the guest's /bb is the same directory."""
    root = tmp_path / "share"
    shutil.copytree(FIXTURES / "a2_pie", root / "results" / "a2_pie" / "run1")
    monkeypatch.setattr(judge, "GUEST_SHARE", str(root))
    return root


def _strip_timings(fields):
    return {k: v for k, v in fields.items() if k != "judged"}


def _roundtrip(obj):
    from bufferbloat.results.records_writer import json_safe
    return json.loads(json.dumps(json_safe(obj)))


def test_the_host_answers_what_the_guest_would_have_computed(share):
    run_dir = share / "results" / "a2_pie" / "run1"
    here, _ = judge.judge(str(run_dir), 5.0)
    metrics_here = (run_dir / "metrics.json").read_text()
    (run_dir / "metrics.json").unlink()
    server = judge.JudgeServer(share / ".vm-run" / "x" / "judge", share).start()
    try:
        env = server.guest_env()
        assert env == {judge.JUDGE_ENV: f"{share}/.vm-run/x/judge"}
        fields, timings = judge.judge_here_or_on_host(str(run_dir), 5.0, environ=env)
    finally:
        server.stop()
    assert fields["judged"]["where"] == "host" and server.served == 1
    assert fields["judged"]["wait_s"] >= fields["judged"]["metrics_s"] > 0
    assert set(timings) == {"metrics", "health"}
    assert _strip_timings(fields) == _roundtrip(here)
    assert fields["health"]["verdict"] in ("healthy", "degraded")
    assert (run_dir / "metrics.json").read_text() == metrics_here   # written by the host
    assert list((share / ".vm-run" / "x" / "judge").iterdir()) == []  # nothing left


def test_without_a_host_the_run_is_judged_here(share):
    run_dir = share / "results" / "a2_pie" / "run1"
    fields, _ = judge.judge_here_or_on_host(str(run_dir), 5.0, environ={})
    assert fields["judged"]["where"] == "here" and "host_refused" not in fields["judged"]
    assert fields["steady_state"]["warmup_s"] >= 5.0 and "health" in fields


def test_a_host_that_does_not_take_it_leaves_it_to_the_guest(share, monkeypatch):
    run_dir = share / "results" / "a2_pie" / "run1"
    logged = []
    monkeypatch.setattr(judge, "TAKE_S", 0.3)
    env = {judge.JUDGE_ENV: str(share / ".vm-run" / "x" / "judge")}
    t = time.monotonic()
    fields, _ = judge.judge_here_or_on_host(str(run_dir), 5.0, logged.append, environ=env)
    assert time.monotonic() - t < 5              # 0.3 s for the host, then judged here
    assert fields["judged"]["where"] == "here"
    assert "did not take the request within" in fields["judged"]["host_refused"]
    assert logged and "judged in the guest" in logged[0]
    assert list((share / ".vm-run" / "x" / "judge").iterdir()) == []  # request withdrawn


def _one_request_answered(req_dir, answer):
    """A stand-in for the host: a thread that hands the first request that comes into
    ``req_dir`` to ``answer(req)``, then ends (within 5 s in any case)."""
    def host():
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            for req in req_dir.glob("*.req"):
                answer(req)
                return
            time.sleep(0.01)
    req_dir.mkdir(parents=True, exist_ok=True)
    thread = threading.Thread(target=host, daemon=True)
    thread.start()
    return thread


def test_a_host_with_other_code_refuses_and_the_guest_judges(share, monkeypatch):
    run_dir = share / "results" / "a2_pie" / "run1"
    req_dir = share / ".vm-run" / "x" / "judge"
    server = judge.JudgeServer(req_dir, share)
    monkeypatch.setattr(judge, "_HASH", "guest-code")
    # the host's code hash differs from the guest's
    thread = _one_request_answered(req_dir, lambda req: server.serve(req, "host-code"))
    fields, _ = judge.judge_here_or_on_host(str(run_dir), 5.0, environ={
        judge.JUDGE_ENV: str(req_dir)})
    thread.join(5)
    assert fields["judged"]["where"] == "here"
    assert "code differs" in fields["judged"]["host_refused"]
    assert server.served == 0


def test_a_request_outside_the_share_is_judged_here(share, tmp_path):
    other = tmp_path / "elsewhere"
    shutil.copytree(FIXTURES / "a2_pie", other)
    fields, _ = judge.judge_here_or_on_host(str(other), 5.0, environ={
        judge.JUDGE_ENV: str(share / ".vm-run" / "x" / "judge")})
    assert fields["judged"]["where"] == "here"
    assert "is not under the share" in fields["judged"]["host_refused"]


def test_a_host_that_fails_answers_why_and_keeps_serving(share, monkeypatch):
    run_dir = share / "results" / "a2_pie" / "run1"
    calls = []

    def broken(*args):
        calls.append(args)
        if len(calls) == 1:
            raise RuntimeError("planted")
        return real(*args)
    real = judge.judge
    monkeypatch.setattr(judge, "judge", broken)
    server = judge.JudgeServer(share / ".vm-run" / "y" / "judge", share).start()
    try:
        env = server.guest_env()
        first, _ = judge.ask_host(judge.Path(env[judge.JUDGE_ENV]), str(run_dir), 5.0)
        assert first is None
        again, why = judge.ask_host(judge.Path(env[judge.JUDGE_ENV]), str(run_dir), 5.0)
    finally:
        server.stop()
    assert why is None and again[0]["judged"]["where"] == "host" and server.served == 1
    assert len(calls) == 2


def test_a_malformed_answer_is_judged_here(share):
    run_dir = share / "results" / "a2_pie" / "run1"
    req_dir = share / ".vm-run" / "z" / "judge"

    def malformed(req):
        req.rename(req.with_suffix(".taken"))
        req.with_suffix(".done").write_text('{"fields": [1, 2]}')
    thread = _one_request_answered(req_dir, malformed)
    fields, _ = judge.judge_here_or_on_host(str(run_dir), 5.0, environ={
        judge.JUDGE_ENV: str(req_dir)})
    thread.join(5)
    assert fields["judged"]["where"] == "here"
    assert "the answer could not be read" in fields["judged"]["host_refused"]
    assert "health" in fields and list(req_dir.iterdir()) == []
