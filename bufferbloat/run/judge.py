"""A finished run judged: its steady state, metrics and health verdict, computed from
what it stored (result.json and the series), never by measuring again.

Where the machine is fastest: a run in the project VM that the host started
(:func:`bufferbloat.run.where.run_in_vm`, inside :func:`~bufferbloat.run.where.
judged_here`) asks the host to judge it. Python under TCG costs
about ten times the host's: C's point at 20 flows spent 4.8 s on its metrics and 3.1 s
on its health in the guest, 0.7 s on the host (docs/design/measurements.md). The guest
writes a request into a directory of the share (``JUDGE_ENV`` names it) and waits;
the host's :class:`JudgeServer` computes from the shared run directory, writes the
metrics files there and answers with the record's fields; the guest puts them in its
record and saves it (it stays the only writer of result.json). The guest judges the
run itself when nobody asks for it (no ``JUDGE_ENV``: a run started in the guest, the
course VM), when the host does not take the request within ``TAKE_S`` or fails, or
when the host's code differs from the guest's (:func:`code_hash`). Either way the
record says where it was judged (``judged``).
"""
import contextlib
import json
import os
import threading
import time
from pathlib import Path

from bufferbloat.core.atomic import write_json_atomic, write_text_atomic
from bufferbloat.vm.control import GUEST_SHARE

#: the guest's environment: the directory (a guest path under the share) where its
#: requests go; set by the host when it starts the VM command
JUDGE_ENV = "BUFFERBLOAT_JUDGE_DIR"
#: the host's environment: ``guest`` keeps every judgement in the guest (to compare)
WHERE_ENV = "BUFFERBLOAT_JUDGE"
#: the host takes a request within this (it looks every POLL_S); else the guest judges
TAKE_S = 10.0
#: a judgement the host took ends within this (seconds at most, C's 80 flows included),
#: or the guest judges (its signals are held meanwhile: bounded, not hours)
DONE_S = 60.0
POLL_S = 0.02

_HASH = None


def code_hash():
    """What the judgement depends on: the hash of the code a run depends on
    (:func:`bufferbloat.core.paths.code_fingerprint`), numpy's and Python's versions;
    computed once per process."""
    global _HASH
    if _HASH is None:
        import platform  # noqa: PLC0415

        import numpy  # noqa: PLC0415

        from bufferbloat.core.paths import code_fingerprint  # noqa: PLC0415
        _HASH = (f"{code_fingerprint(with_text=False)['hash']} numpy {numpy.__version__} "
                 f"python {platform.python_version()}")
    return _HASH


def judge(run_dir, warmup_study_s):
    """Judge the run stored in ``run_dir`` (its record closed ``ok``): the steady state
    (judged where the headline series settle, not before the study's warm-up
    ``warmup_study_s``), the metrics (written beside the record), a varying link's
    capacity series, the health verdict. Returns (the record's fields, {"metrics": s,
    "health": s})."""
    from bufferbloat.results import health  # noqa: PLC0415 - numpy only when judging
    from bufferbloat.results import metrics as mx  # noqa: PLC0415
    from bufferbloat.results.records import load_run  # noqa: PLC0415
    from bufferbloat.results.steady_state import steady_state  # noqa: PLC0415
    from bufferbloat.run import linkreplay  # noqa: PLC0415

    t0 = time.monotonic()
    run = load_run(run_dir)                # the series are read (and parsed) once
    steady = steady_state(run, warmup_study_s, mx.traffic_start_s(run),
                          mx.traffic_end_s(run))
    fields = {"steady_state": steady, "warmup_study_s": warmup_study_s,
              "warmup_s": steady["warmup_s"]}
    run.record.update(fields)
    rows = mx.compute_metrics(run, warmup_s=steady["warmup_s"])
    mx.write_metrics(run, rows, warmup_s=steady["warmup_s"])
    linkreplay.finish(run_dir, run.record)
    fields.update({k: run.record[k] for k in linkreplay.DIRECTIONS if k in run.record})
    t1 = time.monotonic()
    fields["health"] = health.assess(run, rows)
    return fields, {"metrics": t1 - t0, "health": time.monotonic() - t1}


def judge_here_or_on_host(run_dir, warmup_study_s, log=print, environ=None):
    """:func:`judge`, by the host when this is a guest command that the host started
    and will judge it (see the module), else here. Returns (fields, timings) with
    ``fields["judged"]`` saying where, and why here when the host was asked."""
    environ = os.environ if environ is None else environ
    req_dir = environ.get(JUDGE_ENV)
    why = None
    if req_dir:
        answer, why = ask_host(Path(req_dir), run_dir, warmup_study_s)
        if answer is not None:
            return answer
        log(f"  judged in the guest: {why}")
    fields, timings = judge(run_dir, warmup_study_s)
    fields["judged"] = _judged("here", timings, **({"host_refused": why} if why else {}))
    return fields, timings


def _judged(where, timings, **more):
    """result.json's ``judged``: where, the judgement's own seconds, and ``more``."""
    return {"where": where, **more, **{f"{k}_s": round(v, 3) for k, v in timings.items()}}


def ask_host(req_dir, run_dir, warmup_study_s, take_s=None, done_s=None):
    """Ask the host to judge ``run_dir`` through ``req_dir``: ((fields, timings), None)
    or (None, why not); never raises."""
    take_s = TAKE_S if take_s is None else take_s
    done_s = DONE_S if done_s is None else done_s
    path = Path(os.path.abspath(run_dir))
    share = Path(GUEST_SHARE)
    if share not in path.parents:
        return None, f"{path} is not under the share {share}"
    name = f"{os.getpid()}-{time.monotonic_ns()}"
    req, taken = req_dir / f"{name}.req", req_dir / f"{name}.taken"
    done, failed = req_dir / f"{name}.done", req_dir / f"{name}.err"
    try:
        req_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(req, {"run_dir": str(path.relative_to(share)),
                                "warmup_study_s": warmup_study_s, "code": code_hash()})
    except (OSError, ValueError) as exc:
        return None, f"the request could not be written ({exc})"
    t0 = time.monotonic()
    try:
        while not (taken.exists() or done.exists() or failed.exists()):
            if time.monotonic() - t0 > take_s:
                with contextlib.suppress(OSError):
                    req.unlink()           # the host claims by renaming: gone, or taken
                if not (taken.exists() or done.exists() or failed.exists()):
                    return None, f"the host did not take the request within {take_s:.0f} s"
                break
            time.sleep(POLL_S)
        while not (done.exists() or failed.exists()):
            if time.monotonic() - t0 > done_s:
                return None, f"the host did not answer within {done_s:.0f} s"
            time.sleep(POLL_S)
        if failed.exists():
            return None, f"the host could not: {failed.read_text().strip()}"
        answer = json.loads(done.read_text())
        fields = dict(answer["fields"])
        timings = {k: float(answer["timings"][k]) for k in ("metrics", "health")}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"the answer could not be read ({type(exc).__name__}: {exc})"
    finally:
        for p in (req, taken, done, failed):
            with contextlib.suppress(OSError):
                p.unlink()
    fields["judged"] = _judged("host", timings, wait_s=round(time.monotonic() - t0, 3))
    return (fields, timings), None


class JudgeServer:
    """The host's side: a thread that takes the guest's requests from ``req_dir`` (a
    directory of the share, one per VM command), judges each run in ``share`` (where the guest's
    /bb is) and answers. A request is claimed by renaming it (``.taken``), answered
    with ``.done`` (JSON) or ``.err`` (one line: why)."""

    def __init__(self, req_dir, share):
        self.req_dir, self.share = Path(req_dir), Path(share).resolve()
        self.served = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="judge-server", daemon=True)

    def guest_env(self):
        """The guest command's environment that sends its runs here."""
        rel = self.req_dir.resolve().relative_to(self.share)
        return {JUDGE_ENV: f"{GUEST_SHARE}/{rel.as_posix()}"}

    def start(self):
        self.req_dir.mkdir(parents=True, exist_ok=True)
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)

    def _loop(self):
        while not self._stop.is_set():
            try:
                reqs = sorted(self.req_dir.glob("*.req"))
            except OSError:
                reqs = []
            for req in reqs:
                if self._stop.is_set():
                    break
                self.serve(req)
            self._stop.wait(POLL_S)

    def serve(self, req, code=None):
        """Answer one request (claimed first: a request the guest withdrew is left);
        ``code``: this side's :func:`code_hash` (computed when None). Never raises: a
        failure is the guest's ``.err`` (it judges the run itself and says why)."""
        taken = req.with_suffix(".taken")
        try:
            req.rename(taken)
        except OSError:
            return
        try:
            code = code_hash() if code is None else code
            ask = json.loads(taken.read_text())
            if ask.get("code") != code:
                raise _Refused(f"the host's code differs from the guest's ({code} here, "
                               f"{ask.get('code')} there)")
            run_dir = (self.share / ask["run_dir"]).resolve()
            if self.share not in run_dir.parents or not run_dir.is_dir():
                raise _Refused(f"no run directory {ask['run_dir']!r} in the share")
            fields, timings = judge(str(run_dir), ask["warmup_study_s"])
            from bufferbloat.results.records_writer import json_safe  # noqa: PLC0415
            write_json_atomic(req.with_suffix(".done"),
                              json_safe({"fields": fields, "timings": timings}))
            self.served += 1
        except Exception as exc:  # noqa: BLE001 - the guest judges instead, and says why
            with contextlib.suppress(OSError):
                write_text_atomic(req.with_suffix(".err"), f"{type(exc).__name__}: {exc}\n")


class _Refused(Exception):
    pass
