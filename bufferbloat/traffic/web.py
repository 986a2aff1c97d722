"""Web fetches: a page server (``python3 -m bufferbloat.webserver``), a curl fetch loop, and the
``web`` traffic kind (one server, one fetch loop).

:class:`WebServer` serves an index.html of exactly ``size_bytes`` on one host;
:class:`WebFetcher` fetches it with curl from another host every ``every_s`` seconds and
records every fetch (web.csv rows, bufferbloat/core/series.py). The loop is a thread of the calling
process; each curl runs in the client's namespace as an argument list.
"""

import subprocess
import sys
import tempfile
import threading
import time

from bufferbloat.core.errors import ParameterError
from bufferbloat.core.params import Param, check_number, check_port
from bufferbloat.core.paths import IMPORT_ROOT
from bufferbloat.core.series import SERIES_COLUMNS
from bufferbloat.core.signals import stop_process
from bufferbloat.core.stats import percentile
from bufferbloat.traffic.base import Timed, TrafficPart, exit_problem, register

CURL_FORMAT = "%{time_connect} %{time_starttransfer} %{time_total} %{http_code} " \
              "%{size_download}\n"
REPO_ROOT = str(IMPORT_ROOT)   # a child's working directory: it imports bufferbloat


class WebServer:
    """``python3 -m bufferbloat.webserver --port PORT --size SIZE`` on ``host``; :meth:`start` returns
    once it printed its ready line and listens."""

    def __init__(self, net, host, port=8080, size_bytes=100_000, *, name=None):
        self.net, self.host = net, host
        self.port = check_port(port)
        self.size_bytes = check_number("size_bytes", size_bytes, 1, 1 << 30, int)
        self.name = name or f"web-{host}-{self.port}"
        self.proc = None
        self.raw = ""

    def start(self):
        """Start the server and wait until it listens."""
        self._log = _tempfile()
        self.proc = self.net.popen(self.host, [sys.executable, "-m", "bufferbloat.webserver", "--port",
                                               self.port, "--size", self.size_bytes],
                                   stdout=subprocess.PIPE, stderr=self._log, cwd=REPO_ROOT)
        line = self.proc.stdout.readline()
        if not line.startswith("READY"):
            try:       # its output ended: it is exiting (e.g. killed), and says how
                self.proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                pass
            how = exit_problem("the web server", self.proc, expect_running=True)
            self.stop()
            raise RuntimeError(f"web server on {self.host}:{self.port} did not start"
                               f"{': ' + how if how else ''}: {self.raw.strip()[:500]}")
        self.raw = line
        return self

    def stop(self):
        """End the server (by PID)."""
        if self.proc is not None:
            # a signal may interrupt this and the run's cleanup call it again: every
            # step is skipped once done (a closed file read again ended a run "failed:
            # I/O operation on closed file", its record left "running")
            stop_process(self.proc)
            if not self.proc.stdout.closed:
                rest = self.proc.stdout.read()
                self.proc.stdout.close()
                self.raw = self.raw + rest
            if not self._log.closed:
                self._log.seek(0)
                self.raw = self.raw + self._log.read()
                self._log.close()
            self.proc = None

    def raw_outputs(self):
        """{NAME.server.txt: the server's output}."""
        return {f"{self.name}.server.txt": self.raw}


def parse_curl_w(text):
    """One line of :data:`CURL_FORMAT` output -> dict (connect_s, ttfb_s, total_s,
    http_code, size_bytes), or None if the line is not that."""
    parts = text.strip().split()
    if len(parts) != 5:
        return None
    try:
        return {"connect_s": float(parts[0]), "ttfb_s": float(parts[1]),
                "total_s": float(parts[2]), "http_code": int(parts[3]),
                "size_bytes": int(parts[4])}
    except ValueError:
        return None


class WebFetcher(Timed):
    """Fetches ``http://SERVER:PORT/`` from ``client`` with curl every ``every_s`` s.

    server: a host name of the network or an IP address. Fetch ``i`` is due at
    ``t_first + i * every_s``; if a fetch outlasts the period, the next one starts as soon
    as it ends (no overlapping fetches, the schedule is not shifted: later fetches catch
    up with their due times). ``t_first`` is the due time its schedule gave it
    (``scheduled_s``, run time, set by the part before :meth:`start`) plus ``start_s``,
    or, used on its own, :meth:`start`'s time plus ``start_s``: a thread that wakes late
    makes the first fetch late, never the grid. ``window_s``: fetches are due, and
    start, only before ``t_first + window_s`` (the part's stop; None: until
    :meth:`stop`), so that no fetch due at the stop races the schedule's stop (a loaded
    host once started one there: 6 fetches in a 15 s run at 3 s). ``timeout_s``
    (default max(every_s, 10) x 3) bounds a fetch (curl ``--max-time``).
    ``expected_size``: a fetch counts as ok only if curl exited 0, the code is 200 and
    (when given) that many bytes came.

    Every fetch is recorded: a fetch still running at :meth:`stop` is ended and recorded
    with ``ok`` = False, ``cut`` = 1 and ``http_code`` empty (its total_s = how long it
    had run): cut by the run's end, not failed.
    ``t`` = run time when the fetch started. ``start_s``: delay of the first fetch after
    :meth:`start`.
    """

    def __init__(self, net, client, server, port=8080, every_s=1.0, *, name=None,
                 timeout_s=None, expected_size=None, start_s=0.0, t0=None,
                 realtime_minus_monotonic=None, path="/", window_s=None):
        self.net, self.client, self.server = net, client, server
        self.port = check_port(port)
        self.every_s = check_number("every_s", every_s, 0.01, 86_400)
        self.timeout_s = check_number("timeout_s", timeout_s or max(self.every_s, 10) * 3,
                                      0.1, 86_400)
        self.expected_size = None if expected_size is None else check_number(
            "expected_size", expected_size, 0, 1 << 40, int)
        self.start_s = check_number("start_s", start_s, 0, 86_400)
        self.window_s = None if window_s is None else check_number(
            "window_s", window_s, 0, 86_400)
        self.scheduled_s = None   # its due time (run time s), given by its schedule
        if not isinstance(path, str) or not path.startswith("/"):
            raise ParameterError("path", path, "an absolute URL path")
        self.name = name or f"web-{client}"
        self._init_clock(t0, realtime_minus_monotonic)
        self.fetches = []      # dicts: see rows(); plus exit, stderr
        self.raw_lines = []
        self._halt = threading.Event()
        self._thread = None
        self._current = None
        self._killed = None
        self._lock = threading.Lock()
        self.path = path
        self.launched_mono = None   # when its first fetch was launched (monotonic s)

    @property
    def url(self):
        """The URL fetched."""
        try:
            host = self.net.ip(self.server)
        except KeyError:
            host = self.server
        return f"http://{host}:{self.port}{self.path}"

    def argv(self):
        """curl's argument list."""
        return ["curl", "-s", "-S", "-o", "/dev/null", "--max-time", f"{self.timeout_s:g}",
                "-H", "Cache-Control: no-cache", "-w", CURL_FORMAT, self.url]

    def start(self):
        """Start the fetch loop (a thread)."""
        self._url = self.url
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name=f"web-{self.name}")
        self._thread.start()
        return self

    def first_due_mono(self):
        """When fetch 0 is due (monotonic s): the schedule's due time, else now; plus
        ``start_s``."""
        base = (time.monotonic() if self.scheduled_s is None
                else self.t0 + self.scheduled_s)
        return base + self.start_s

    def _loop(self):
        first = self.first_due_mono()
        i = 0
        while True:
            if self.window_s is not None and i * self.every_s >= self.window_s - 1e-9:
                return       # every fetch of the window started; stop() ends the last
            due = first + i * self.every_s
            if self._halt.wait(max(0.0, due - time.monotonic())):
                return
            if self.window_s is not None and time.monotonic() >= first + self.window_s:
                return       # held past the window by the fetch before it: not started
            self._fetch(i)
            i += 1

    def _fetch(self, i):
        with self._lock:
            if self._halt.is_set():
                return
            t_start = time.monotonic()
            if self.launched_mono is None:
                self.launched_mono = t_start
            err = _tempfile()
            proc = self.net.popen(self.client, self.argv(), stdout=subprocess.PIPE,
                                  stderr=err)
            self._current = (proc, t_start)
        out, _ = proc.communicate()
        t_end = time.monotonic()
        err.seek(0)
        errtext = err.read().strip()
        err.close()
        with self._lock:
            self._current = None
            self._record(i, t_start, t_end, proc.returncode, out, errtext,
                         incomplete=proc.pid == self._killed and proc.returncode != 0)

    def _record(self, i, t_start, t_end, exit_code, out, errtext, incomplete=False):
        parsed = None if incomplete else parse_curl_w(out or "")
        rec = {"fetch": self.name, "t": round(t_start - self.t0, 6), "index": i,
               "exit": exit_code, "incomplete": incomplete, "error": errtext}
        if parsed:
            rec.update(parsed)
        else:
            rec.update(connect_s="", ttfb_s="", total_s=round(t_end - t_start, 6),
                       http_code="", size_bytes="")
        rec["ok"] = bool(parsed and exit_code == 0 and parsed["http_code"] == 200 and (
            self.expected_size is None or parsed["size_bytes"] == self.expected_size))
        rec["cut"] = int(incomplete and not rec["ok"])   # ended by the run's end
        self.fetches.append(rec)
        self.raw_lines.append(f"# fetch {i} t={rec['t']} exit={exit_code}"
                              f"{' incomplete' if incomplete else ''}"
                              f"{' stderr=' + errtext if errtext else ''}\n{out or ''}")

    def stop(self):
        """End the loop; a fetch in progress is ended and recorded as incomplete."""
        self._halt.set()
        with self._lock:
            current = self._current
            if current is not None:  # its thread records it, as incomplete, once it ends
                self._killed = current[0].pid
        if current is not None:
            stop_process(current[0])
        if self._thread is not None:
            self._thread.join()
        return self.summary()

    def wait(self, timeout_s=None):
        """There is no natural end: same as :meth:`stop`."""
        return self.stop()

    def rows(self):
        """web.csv rows, one per fetch."""
        return [{k: r[k] for k in SERIES_COLUMNS["web"]} for r in self.fetches]

    def raw_outputs(self):
        """{NAME.curl.txt: every fetch's curl output, each after a '# fetch' line}."""
        return {f"{self.name}.curl.txt": "".join(self.raw_lines)}

    def summary(self):
        """Fetch count, failures, total time statistics (s) of the successful fetches;
        when the first fetch was launched (``t_launch``, s since t0: health judges it
        against the time its schedule gave the loop)."""
        ok = sorted(r["total_s"] for r in self.fetches if r["ok"])
        return {"fetch": self.name, "client": self.client, "url": getattr(self, "_url", None),
                "t_launch": (None if self.launched_mono is None
                             else self.launched_mono - self.t0),
                "every_s": self.every_s, "fetches": len(self.fetches), "ok": len(ok),
                "failed": sum(1 for r in self.fetches if not r["ok"] and not r["cut"]),
                "incomplete": sum(1 for r in self.fetches if r["incomplete"]),
                "cut": sum(1 for r in self.fetches if r["cut"]),
                "total_mean_s": sum(ok) / len(ok) if ok else None,
                "total_p50_s": percentile(ok, 50), "total_p95_s": percentile(ok, 95),
                "total_max_s": ok[-1] if ok else None}


def _tempfile():
    return tempfile.TemporaryFile(mode="w+")


#: The port of the web servers of a run.
WEB_PORT = 8080


@register("web")
class WebPart(TrafficPart):
    """A page of ``size_bytes`` served by ``server`` (listening before the clock starts),
    fetched by ``client`` every ``every_s`` from the part's start to its stop."""

    params = (
        Param("client", str, None, "the fetching host"),
        Param("server", str, None, "the serving host"),
        Param("every_s", float, 2.0, "fetch period, s", lo=0.01, hi=86_400),
        Param("size_bytes", int, 100_000, "page size, bytes", lo=1, hi=1 << 30),
    )

    def tools(self):
        spec, net = self.spec, self.ctx.net
        size = int(spec.get("size_bytes", 100_000))
        self.server = WebServer(net, spec["server"], WEB_PORT, size,
                                name=f"{spec['name']}-server")
        self.fetcher = WebFetcher(net, spec["client"], spec["server"], WEB_PORT,
                                  spec.get("every_s", 2.0), name=spec["name"],
                                  expected_size=size, window_s=self.stop_s - self.start_s,
                                  **self.ctx.clock)
        return [(self.fetcher, self.start_s, self.stop_s)]

    def prepare(self):
        """The page server listens before the clock starts (its interpreter takes ~4 s
        to start under TCG: started by the schedule, it held the fetches back that long,
        the first fetch 4.4 s late)."""
        self.server.start()

    def stop(self):
        super().stop()
        self.server.stop()        # by PID; a server never started is nothing to stop

    def problem(self):
        return (exit_problem(f"web server {self.server.name}", self.server.proc,
                             expect_running=True) if self.server.proc is not None
                else None) or super().problem()

    def waited(self):
        return [self.fetcher]     # the loop has no end of its own: wait() ends it

    def raw_outputs(self):
        return {**self.server.raw_outputs(), **super().raw_outputs()}

    def rows(self):
        return {"web": self.fetcher.rows()}
