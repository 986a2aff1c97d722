"""The VM phase's session-wide budget of degraded reruns (tests/retries.py): printed at
the end of the session; exceeding it fails the session even when every test passed."""
from retries import SESSION


def pytest_terminal_summary(terminalreporter):
    terminalreporter.section("degraded reruns")
    for line in SESSION.report():
        terminalreporter.write_line(line)


def pytest_sessionfinish(session, exitstatus):
    SESSION.finish(session)
