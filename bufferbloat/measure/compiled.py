"""The compiled helpers built from ``bufferbloat/measure/csampler`` (the queue sampler
``bb-qdisc-sampler``, the departure reader of :mod:`bufferbloat.measure.departures`):
found when at least as new as their sources, else built with make where a compiler is;
and whether the sampler process reads the queue through its helper (env
``BUFFERBLOAT_QDISC_SAMPLER``: ``auto``, ``c`` or ``python``)."""

import os
import shutil
import subprocess

from bufferbloat.core import paths

CSAMPLER_DIR = str(paths.CSAMPLER_DIR)
CSAMPLER_BIN = str(paths.BUILD_DIR / "bb-qdisc-sampler")
QDISC_SAMPLER_ENV = "BUFFERBLOAT_QDISC_SAMPLER"


def prepare_qdisc_helper(log=None):
    """``{"binary": path or None, "why": None or why the Python loop reads the qdiscs}``
    for the sampler process's spec: the compiled queue sampler found, or built now
    (``log`` says so first: ~10 s under TCG) when a compiler is here. Called before the
    sampler process starts, so that a build never races its start-up timeout; the
    process itself never builds."""
    mode = qdisc_sampler_mode()
    if mode == "python":
        return {"binary": None, "why": f"{QDISC_SAMPLER_ENV}=python"}
    binary, why = qdisc_helper_binary(build=False)
    if binary is None and log is not None:
        log(f"  building the compiled queue sampler ({why})")
    if binary is None:
        binary, why = qdisc_helper_binary(build=True)
    if why and mode == "c":
        raise RuntimeError(f"{QDISC_SAMPLER_ENV}=c: {why}")
    return {"binary": binary, "why": why}


def qdisc_sampler_mode():
    """env BUFFERBLOAT_QDISC_SAMPLER: auto (default), c or python."""
    mode = os.environ.get(QDISC_SAMPLER_ENV, "auto").strip().lower() or "auto"
    if mode not in ("auto", "c", "python"):
        raise ValueError(f"{QDISC_SAMPLER_ENV}={mode!r}: must be auto, c or python")
    return mode


def qdisc_helper_binary(build=True):
    """The compiled queue sampler: ``(path, None)``, or ``(None, why not)``.

    Rebuilt with ``make -s -C bufferbloat/measure/csampler`` when it is missing or older than its
    source and a compiler is there (``build``). The host builds it before it boots the
    VM (run_tests.sh, run_all.sh, and ``run``/``sweep``/``run-all`` moving into it) and
    the static binary is used through the share; the guest (which has gcc too) builds
    it only when the host could not, before its sampler starts
    (:func:`prepare_qdisc_helper`)."""
    return compiled_helper(CSAMPLER_BIN, "bb_qdisc_sampler.c", build)


def compiled_helper(binary, source, build=True):
    """A helper built from ``csampler/SOURCE`` into ``binary``: ``(path, None)`` when it
    is at least as new as its source, the Makefile and the headers, else built now with
    make (which builds every helper) when ``build`` and a compiler are here, else
    ``(None, why)``."""
    # the headers too (bb_tick.h, shared by the sampler and the capacity replay)
    headers = sorted(n for n in os.listdir(CSAMPLER_DIR) if n.endswith(".h")) \
        if os.path.isdir(CSAMPLER_DIR) else []
    srcs = [os.path.join(CSAMPLER_DIR, n) for n in (source, "Makefile", *headers)]
    try:
        newest = max(os.path.getmtime(p) for p in srcs)
    except OSError:
        return None, f"no source in {CSAMPLER_DIR}"

    def fresh():
        try:
            return os.path.getmtime(binary) >= newest
        except OSError:
            return False

    if fresh():
        return binary, None
    stale = "older than its source" if os.path.exists(binary) else "not built"
    if not build:
        return None, f"{binary} {stale}"
    if not (shutil.which("make") and (shutil.which("cc") or shutil.which("gcc"))):
        return None, f"{binary} {stale} and no make/gcc here to build it " \
                     f"(make -C bufferbloat/measure/csampler on the host)"
    try:
        r = subprocess.run(["make", "-s", "-C", CSAMPLER_DIR,
                            f"OUT={os.path.dirname(binary)}"], capture_output=True,
                           text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"make -C {CSAMPLER_DIR} failed: {exc}"
    if r.returncode != 0 or not fresh():
        return None, f"make -C {CSAMPLER_DIR} failed (exit {r.returncode}): " \
                     f"{(r.stderr or r.stdout).strip()[-300:]}"
    return binary, None
