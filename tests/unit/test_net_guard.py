"""tests/conftest.py's net guard counts the tool processes this test session started,
not another job's on the same machine (another engineer's iperf3 once failed a test
here as "left behind")."""
import os
import subprocess

from tests import conftest


def test_only_this_sessions_processes_are_counted():
    token = f"{conftest.SESSION_ENV}={os.environ[conftest.SESSION_ENV]}"
    assert os.environ[conftest.SESSION_ENV]
    ours = subprocess.Popen(["sleep", "30"])
    other_env = dict(os.environ, **{conftest.SESSION_ENV: "another-job"})
    other = subprocess.Popen(["sleep", "30"], env=other_env)
    bare = subprocess.Popen(["sleep", "30"], env={"PATH": os.environ.get("PATH", "")})
    try:
        got = conftest._pids("sleep")
        assert str(ours.pid) in got, token
        assert str(other.pid) not in got and str(bare.pid) not in got
    finally:
        for p in (ours, other, bare):
            p.kill()
            p.wait()
    assert str(ours.pid) not in conftest._pids("sleep")
