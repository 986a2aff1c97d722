"""Shared pytest setup: the repository root on sys.path and the fixture directory."""
import os
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
# Started as a background job of a non-interactive shell, the suite inherits SIGINT
# ignored, and so would every run it starts (an ignored signal stays ignored across exec):
# the Ctrl-C tests would then test nothing. A terminal's Ctrl-C always reaches a run, so the
# suite restores the default (a caught signal is reset to default in the children).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# one network per machine: a test waits for another one's network rather than failing
os.environ.setdefault("BUFFERBLOAT_NETWORK_WAIT_S", "1800")


def _links():
    """Interface names of the root namespace. ``ovs-system`` is left out: it is Open
    vSwitch's own datapath device, created by ovs-vswitchd with the first bridge and
    kept by it."""
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()} - {
        "ovs-system"}


def run_attempts(paths):
    """One run's attempts from their result.json ``paths``, oldest first, as (directory,
    record). A run that comes out degraded is run again (watch.retry_degraded_default:
    its attempts keep their own directories): every attempt but the last must be
    degraded, and there are no more than the reruns allow."""
    import json  # noqa: PLC0415 - only the tests that read runs need it

    from bufferbloat.results.health import verdict_of  # noqa: PLC0415
    from bufferbloat.run.watch import retry_degraded_default  # noqa: PLC0415
    paths = sorted(str(p) for p in paths)
    assert 1 <= len(paths) <= 1 + retry_degraded_default(), paths
    found = []
    for path in paths:
        with open(path) as f:
            found.append((os.path.dirname(path), json.load(f)))
    for run_dir, rec in found[:-1]:
        assert verdict_of(rec) == "degraded", f"{run_dir} was run again but was {verdict_of(rec)}"
    return found


#: every process the suite starts inherits this from os.environ (its runs, their tools,
#: Mininet's host shells), orphans too: the net guard counts only the suite's own tools,
#: never another job's iperf3 or ping on the same machine
SESSION_ENV = "BUFFERBLOAT_TEST_SESSION"
os.environ.setdefault(SESSION_ENV, f"{os.getpid()}-{time.time_ns()}")


def _pids(name):
    """The PIDs of processes named ``name`` that this test session started (their
    environment holds its SESSION_ENV token)."""
    out = subprocess.run(["pgrep", "-x", name], capture_output=True, text=True).stdout
    token = f"{SESSION_ENV}={os.environ[SESSION_ENV]}".encode()
    mine = set()
    for pid in out.split():
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:          # ended since, or not ours to read
            continue
        if token in env:
            mine.add(pid)
    return mine


@pytest.fixture
def net_guard():
    """Require root; after the test, assert no new links, bridges or tool processes
    (of this session's: :func:`_pids`)."""
    assert os.geteuid() == 0, "network tests need root: run them through ./run_tests.sh"
    before = (_links(), _pids("iperf3"), _pids("ping"))
    yield
    after = (_links(), _pids("iperf3"), _pids("ping"))
    assert after[0] - before[0] == set(), f"links left behind: {after[0] - before[0]}"
    assert after[1] - before[1] == set(), "iperf3 processes left behind"
    assert after[2] - before[2] == set(), "ping processes left behind"


#: host tests that boot the project VM themselves: they cannot run inside it (no nested
#: virtualisation under TCG); the host phase runs them, the VM's own tests cover its kernel
BOOTS_A_VM = ("test_vm_lifecycle.py", "test_run_through_vm.py", "test_cluster_vm_worker.py",
              "test_vagrant_box.py")


#: env: a file to which every test appends "passed|failed NODEID" as it ends (flushed and
#: synced: it survives a guest that dies next). run_tests.sh gives it to the VM phase,
#: so that a phase stopped by a guest kernel's lockup runs again only the tests that had
#: not ended; one that had failed stays failed.
LEDGER_ENV = "BUFFERBLOAT_TEST_LEDGER"
_FAILED = set()


def pytest_runtest_logreport(report):
    from tests import record  # noqa: PLC0415
    record.note_report(report)
    if report.when == "teardown":
        from tests.retries import SESSION  # noqa: PLC0415
        record.write(SESSION)
    path = os.environ.get(LEDGER_ENV)
    if not path:
        return
    if report.failed:
        _FAILED.add(report.nodeid)
    if report.when != "teardown":
        return
    outcome = "failed" if report.nodeid in _FAILED else "passed"
    with open(path, "a") as f:
        f.write(f"{outcome} {report.nodeid}\n")
        f.flush()
        os.fsync(f.fileno())


#: the tiers (tests/retries.py, docs/design/testing.md): a test marked ``acceptance`` judges a
#: physics or timing band on emulated runs; the gate runs every other test. A test
#: marked ``bands`` runs in both: its contracts fail it in either, its bands
#: (tests.retries.measure_until_met) are recorded in the gate and judged in acceptance
ACCEPTANCE = "acceptance"
BANDS = "bands"


def pytest_configure(config):
    config.addinivalue_line(
        "markers", f"{ACCEPTANCE}: judges a physics or timing band (the acceptance tier, "
        "sudo ./run_tests.sh --acceptance); the gate leaves it out")
    config.addinivalue_line(
        "markers", f"{BANDS}: contracts and bands: runs in both tiers, its bands "
        "(tests.retries.measure_until_met) judged in the acceptance tier only")
    from tests import record  # noqa: PLC0415
    from tests.retries import tier  # noqa: PLC0415
    record.start(tier(), os.environ.get("BUFFERBLOAT_TEST_PHASE", "?"))


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """In the acceptance tier, a test marked ``acceptance`` is judged by the sequential
    rule as a whole (tests.retries.judge_test): after a failed assert it runs again,
    and passes only if the next two attempts pass. Its module's ``reset_for_retry()``
    (when it has one) drops what the test cached between attempts. Elsewhere pytest
    calls the test once.

    In either tier, a test whose run stayed degraded through its reruns
    (tests.retries.NotJudged) is not judged: it is reported as skipped with the reason,
    and recorded (``not_judged``); its degraded attempts are in the session's ledger,
    whose per-family test judges them in the acceptance tier."""
    from tests import record  # noqa: PLC0415
    from tests.retries import NotJudged, judge_test, tier  # noqa: PLC0415
    args = {a: pyfuncitem.funcargs[a] for a in pyfuncitem._fixtureinfo.argnames}
    try:
        if tier() != "acceptance" or pyfuncitem.get_closest_marker(ACCEPTANCE) is None:
            pyfuncitem.obj(**args)
        else:
            reset = getattr(pyfuncitem.module, "reset_for_retry", lambda: None)
            judge_test(lambda: pyfuncitem.obj(**args), reset, "its asserts, as a whole")
    except NotJudged as exc:
        record.entry(pyfuncitem.nodeid)["not_judged"] = str(exc)
        pytest.skip(f"not judged: {exc}")
    return True


def pytest_runtest_logstart(nodeid, location):
    from tests import record  # noqa: PLC0415
    record.begin(nodeid)


def pytest_terminal_summary(terminalreporter):
    from tests import record  # noqa: PLC0415
    from tests.retries import SESSION  # noqa: PLC0415
    terminalreporter.section("degraded runs")
    for line in SESSION.report():
        terminalreporter.write_line(line)
    terminalreporter.section("test record")
    for line in record.summary():
        terminalreporter.write_line(line)
    path = record.write(SESSION)
    if path:
        terminalreporter.write_line(f"record: {path}")


def pytest_sessionfinish(session, exitstatus):
    from tests.retries import SESSION  # noqa: PLC0415
    SESSION.finish(session)


def pytest_collection_modifyitems(config, items):
    """Select the tier's tests (env BUFFERBLOAT_TEST_TIER: the gate deselects the tests
    marked ``acceptance``, the acceptance tier keeps only them and those marked
    ``bands``); inside the project VM,
    skip the host tests that boot it."""
    from tests.retries import tier  # noqa: PLC0415
    want = tier() == "acceptance"
    keep = [i for i in items if i.get_closest_marker(BANDS) is not None
            or (i.get_closest_marker(ACCEPTANCE) is not None) == want]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep
    from bufferbloat.run.where import in_project_vm
    if not in_project_vm():
        return
    skip = pytest.mark.skip(reason="boots the project VM: runs on the host, not inside the "
                                   "VM (sudo ./run_tests.sh --host on the host)")
    for item in items:
        if os.path.basename(str(item.fspath)) in BOOTS_A_VM:
            item.add_marker(skip)
