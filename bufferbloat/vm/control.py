"""The host <-> guest protocol of one VM run, and the run records a guest leaves behind.

One control directory per run, ``SHARE/.vm-run/<id>/``: the host writes ``cmd``
(:func:`make_command_script`: ``export`` lines, then the command) and, to stop it,
``stop``; the guest's bb-run writes ``booted``, ``started`` and ``rc``
(write-then-rename). A run record (result.json) that the guest command left ``running``
when the VM ended is closed by the host (:func:`close_unfinished`): ``interrupted``
after an interrupt, a SIGTERM or the timeout, ``failed`` when the guest died by itself.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import secrets
import shlex
import time
from pathlib import Path
from typing import Iterable, Sequence

from bufferbloat.core.atomic import write_json_atomic
from bufferbloat.vm.common import Progress, VMError, quiet

CONTROL_DIR = ".vm-run"
#: where the guest mounts the share (vm/guest/bb-run)
GUEST_SHARE = "/bb"
RUN_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def new_run_id() -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%dT%H%M%S")
    return f"{stamp}-{os.getpid()}-{secrets.token_hex(3)}"


def make_command_script(command: Sequence[str] | str, env: dict | None = None) -> str:
    """The ``cmd`` script the guest runs: ``export`` lines, then the command. An argument
    list is quoted with shlex.join and exec'd; a string is a bash script body."""
    lines = ["#!/bin/bash",
             "# written by bufferbloat.vm on the host, run by bb-run in the guest",
             "# (as root, cwd /bb, PYTHONPATH=/bb, stdout+stderr -> host)"]
    for name, value in (env or {}).items():
        if not ENV_NAME.match(str(name)):
            raise VMError(f"invalid environment variable name {name!r}")
        lines.append(f"export {name}={shlex.quote(str(value))}")
    if isinstance(command, str):
        if not command.strip():
            raise VMError("empty command script")
        lines.append(command.rstrip("\n"))
    else:
        argv = [str(a) for a in command]
        if not argv:
            raise VMError("empty command")
        lines.append("exec " + shlex.join(argv))
    return "\n".join(lines) + "\n"


RESULT_SCAN_DEPTH = 6


def result_roots(share: Path, command: Sequence[str] | str) -> list[Path]:
    """Where the guest command may have written run records, seen from the host:
    ``SHARE/results`` and every ``--out DIR`` / ``--out=DIR`` of the command (relative
    to the share, or absolute under /bb). Directories outside the share are not
    reachable from the host (the guest's root fs is thrown away)."""
    roots = [share / "results"]
    words = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    outs = []
    for i, w in enumerate(words):
        if w == "--out" and i + 1 < len(words):
            outs.append(words[i + 1])
        elif w.startswith("--out="):
            outs.append(w[len("--out="):])
    for out in outs:
        if out.startswith("/bb/") or out == "/bb":
            out = out[len("/bb"):].lstrip("/")
        elif out.startswith("/"):
            continue
        path = (share / out).resolve()
        if (path == share or share in path.parents) and path not in roots:
            roots.append(path)
    return roots


def running_results(roots: Iterable[Path], since: float,
                    depth: int = RESULT_SCAN_DEPTH) -> list[Path]:
    """result.json files under ``roots`` (at most ``depth`` levels down) modified at or
    after ``since`` (epoch s), still ``"status": "running"`` and written in the project
    VM (``machine.in_project_vm``; a record without ``machine`` yet also counts): the
    runs a VM command left unfinished. Runs of this host are never touched."""
    found = []
    seen = set()
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            continue
        base = len(root.parts)
        for dirpath, dirnames, filenames in os.walk(root):
            if len(Path(dirpath).parts) - base >= depth:
                dirnames[:] = []
            if "result.json" not in filenames:
                continue
            path = Path(dirpath) / "result.json"
            try:
                if path.stat().st_mtime < since or path.resolve() in seen:
                    continue
                rec = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            seen.add(path.resolve())
            machine = rec.get("machine")
            if rec.get("status") == "running" and \
                    (machine is None or (isinstance(machine, dict)
                                         and machine.get("in_project_vm") is True)):
                found.append(path)
    return found


def mark_unfinished(path: Path, status: str, error: str) -> bool:
    """Close a run record the guest left ``running``: ``status`` (interrupted or failed)
    and ``error``, written atomically; its series stay as they are. Returns whether it
    was changed."""
    try:
        rec = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return False
    if rec.get("status") != "running":
        return False
    rec["status"] = status
    rec["error"] = error
    rec["closed_by_host"] = {"time": time.time(), "by": "bufferbloat.vm"}
    write_json_atomic(path, rec, allow_nan=True)
    return True


#: how a VM run ended -> (status, reason) for the run records it left "running"
END_STATUS = {
    "interrupt": ("interrupted", "the host interrupted the project VM (SIGINT)"),
    "terminate": ("interrupted", "the host terminated the project VM (SIGTERM)"),
    "hangup": ("interrupted", "the host command's terminal or parent went away (SIGHUP)"),
    "killed": ("interrupted", "the host command was killed (SIGKILL); closed by the next "
                              "VM command"),
    "timeout": ("interrupted", "the project VM was stopped at its timeout"),
    "crash": ("failed", "the project VM died (guest crash) while this run was running"),
    "exit": ("failed", "the VM command exited while this run was still running"),
    "lockup": ("failed", "the project VM's kernel locked up (soft lockup) while this run "
                         "was running; the VM was stopped"),
}


def close_unfinished(roots: Iterable[Path], since: float, end: str,
                     progress: Progress = quiet) -> list[Path]:
    """Mark the run records a VM command left ``running`` (see :func:`running_results`)
    as :data:`END_STATUS` says for how the VM ended; returns them."""
    status, reason = END_STATUS[end]
    done = []
    for path in running_results(roots, since):
        with contextlib.suppress(OSError):
            if mark_unfinished(path, status, reason):
                done.append(path)
                progress(f"vm: {path}: was still 'running': marked {status!r} ({reason})")
    return done
