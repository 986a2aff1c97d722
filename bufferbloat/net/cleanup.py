"""What a network run owns, recorded so that a later run can remove it after a SIGKILL.

A :class:`Network` writes a state file (atomically: write, then rename) while it exists,
and updates it as it creates things. There is one per network namespace, beside the
lock that lets one network at a time exist there (:func:`network_paths`):
``/run/bufferbloat-network.json`` and ``.lock`` in the initial namespace,
``/run/bufferbloat/netns-INODE/network.json`` and ``network.lock`` in any other (INODE:
the namespace's, as ``stat /proc/self/ns/net`` gives it; the directories are made 0700,
and a clean stop removes the file, the lock and the directory). The state file holds:

* ``owner``: the runner's PID and its start time (``/proc/PID/stat`` field 22);
* ``netns``: the namespace's inode and cookie (SO_NETNS_COOKIE, never reused while the
  machine is up, unlike an inode);
* ``ifindex_floor``: the highest interface index of the runner's namespace before the
  build (interface indexes only grow in a namespace, so a link created by this run has
  a larger one);
* ``links``: every link, bridge and IFB the run creates in its own namespace, by name,
  with its ifindex once it exists (planned names are recorded before the build);
* ``procs``: every process the run starts (Mininet host shells, every ``net.popen``
  process, the sampler), each with its start time (guards against PID reuse);
* ``sysctls``: the sysctls it changed, with the values to restore (global ones only
  in the initial namespace; the bridge's netfilter switches are per namespace).

Interface indexes are read with ``if_nametoindex``/``if_nameindex`` (ioctls answered
for the caller's namespace), never from /sys/class/net, which shows the namespace of
whoever mounted sysfs.

``stop()`` removes the file after its own teardown. :func:`recover` runs in the next
``Network.start()``, after the lock is taken (the kernel releases an flock when its
holder dies): if a state file of a dead owner is there, it ends the recorded processes
(start time verified), deletes the recorded links that still exist (same ifindex, or
created after the floor; only when the file was written in this very namespace, by its
cookie), restores the sysctls and removes the file. Only what was recorded is touched:
nothing is ever found or killed by name.

Ending processes and holding signals are :mod:`bufferbloat.core.signals`' concern.
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time

from bufferbloat.core.atomic import write_json_atomic
from bufferbloat.core.signals import end_processes, proc_start_time, same_process
from bufferbloat.net import isolation

#: the state file and lock of the initial network namespace
STATE_PATH = "/run/bufferbloat-network.json"
LOCK_PATH = "/run/bufferbloat-network.lock"
#: where the other namespaces' ones go: NETNS_DIR/netns-INODE/network.{json,lock}
NETNS_DIR = "/run/bufferbloat"
STATE_ENV = "BUFFERBLOAT_STATE_PATH"
LOCK_ENV = "BUFFERBLOAT_LOCK_PATH"


def namespace_dir():
    """This namespace's directory under NETNS_DIR, or None in the initial namespace."""
    if isolation.in_initial_netns():
        return None
    return os.path.join(NETNS_DIR, f"netns-{isolation.netns_inode()}")


def network_paths():
    """(state file, lock file) of the network of this process's network namespace.

    Env BUFFERBLOAT_STATE_PATH and BUFFERBLOAT_LOCK_PATH override each; with the state
    path alone set, the lock sits beside it (its name with ``.lock`` for ``.json``)."""
    ns_dir = namespace_dir()
    if ns_dir is None:
        state, lock = STATE_PATH, LOCK_PATH
    else:
        state, lock = (os.path.join(ns_dir, "network.json"),
                       os.path.join(ns_dir, "network.lock"))
    env_state = os.environ.get(STATE_ENV)
    if env_state:
        state = env_state
        lock = os.path.splitext(env_state)[0] + ".lock"
        if lock == state:
            lock += ".lock"
    return state, os.environ.get(LOCK_ENV) or lock


def state_path():
    """Where this namespace's state file lives (see :func:`network_paths`)."""
    return network_paths()[0]


def owns_directory(lock_path):
    """True if ``lock_path`` is in a per-namespace directory of NETNS_DIR: a clean stop
    removes the lock and that directory (nothing else is kept there)."""
    parent = os.path.dirname(os.path.abspath(lock_path))
    return os.path.dirname(parent) == NETNS_DIR and \
        os.path.basename(parent).startswith("netns-")


def make_private_dirs(path):
    """Create the missing directories of file ``path``, each 0700."""
    d = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(d):
        return
    make_private_dirs(d)
    try:
        os.mkdir(d, 0o700)
    except FileExistsError:
        pass


def link_index(name):
    """ifindex of link ``name`` in this process's network namespace, or None if it
    does not exist there."""
    try:
        return socket.if_nametoindex(name)
    except (OSError, ValueError):
        return None


def max_ifindex():
    """The highest interface index in this process's network namespace now."""
    try:
        return max((idx for idx, _ in socket.if_nameindex()), default=0)
    except OSError:
        return 0


class NetworkState:
    """The state file of one network: what it created, kept up to date on disk."""

    def __init__(self, path=None):
        self.path = path or state_path()
        pid = os.getpid()
        self.data = {"owner": {"pid": pid, "start": proc_start_time(pid),
                               "argv": sys.argv[:8]},
                     "netns": {"inode": isolation.netns_inode(),
                               "cookie": isolation.netns_cookie()},
                     "created": time.time(), "ifindex_floor": max_ifindex(),
                     "links": {}, "procs": {}, "sysctls": {}}
        self._lock = threading.Lock()
        self.active = False

    def save(self):
        with self._lock:
            write_json_atomic(self.path, self.data)
        self.active = True

    def plan_links(self, names):
        """Record link names about to be created (their ifindex is not known yet)."""
        with self._lock:
            for n in names:
                self.data["links"].setdefault(n, None)
        self.save()

    def add_links(self, names):
        """Record links that exist now, with their ifindex."""
        with self._lock:
            for n in names:
                idx = link_index(n)
                if idx is not None:
                    self.data["links"][n] = idx
        self.save()

    def add_proc(self, pid, what):
        """Record a process this run started (its start time guards against PID reuse);
        processes that have ended are dropped from the record."""
        with self._lock:
            self._prune()
            self.data["procs"][str(pid)] = {"start": proc_start_time(pid),
                                            "what": str(what)[:200]}
        self.save()

    def prune_procs(self):
        """Drop the processes that have ended from the record (a kept network's shells
        stay; its points' tools are gone)."""
        with self._lock:
            self._prune()
        self.save()

    def _prune(self):
        procs = self.data["procs"]
        for key in [k for k, v in procs.items() if not same_process(k, v["start"])]:
            del procs[key]

    def set_sysctl(self, path, original):
        """Record a global sysctl changed by the run and the value to restore."""
        with self._lock:
            self.data["sysctls"].setdefault(path, original)
        self.save()

    def forget_sysctl(self, path):
        """A sysctl the run could not change after all: nothing to restore."""
        with self._lock:
            self.data["sysctls"].pop(path, None)
        self.save()

    def remove(self):
        """The run has removed everything itself: drop the record."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        self.active = False


def recover(path=None, log=None, run=None, wait_s=5.0):
    """Remove what a killed run left behind, as its state file recorded it.

    ``path`` is any state file (default: this namespace's, :func:`state_path`).
    Returns None when there is nothing to recover, else a dict of what was removed:
    {"owner": pid, "processes": [pid...], "links": [name...], "sysctls": [path...]}.
    Raises RuntimeError if the recorded owner is still alive (its network is live).
    """
    path = path or state_path()
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        # a state file is written by rename, so it is never half-written; an unreadable
        # one is not ours to interpret: leave it aside for a human
        os.replace(path, path + ".unreadable")
        log(f"bufferbloat: moved aside an unreadable network state file: {path}.unreadable")
        return None
    owner = data.get("owner") or {}
    if owner.get("pid") and owner.get("pid") != os.getpid() and \
            same_process(owner["pid"], owner.get("start")):
        raise RuntimeError(f"the network of pid {owner['pid']} is still recorded as live "
                           f"in {path}")
    done = {"owner": owner.get("pid"), "processes": [], "links": [], "sysctls": []}
    procs = {p: v.get("start") for p, v in (data.get("procs") or {}).items()
             if v.get("start") is not None}
    done["processes"] = end_processes(procs)
    floor = int(data.get("ifindex_floor") or 0)
    links = data.get("links") or {}
    recorded, here = (data.get("netns") or {}).get("cookie"), isolation.netns_cookie()
    if recorded is not None and here is not None and recorded != here:
        # written in another namespace (gone, its inode reused by ours, or a path shared
        # through the environment): its links and per-namespace sysctls went with it or
        # are not ours to reach; its processes are still found by PID and start time
        log(f"bufferbloat: the state file {path} was written in another network "
            f"namespace: its links and sysctls are left alone")
        links, data["sysctls"], data["ovs_bridges"] = {}, {}, []

    def ours(name, idx):
        now = link_index(name)
        if now is None:
            return False
        return now == idx if idx is not None else now > floor
    # the host shells' namespaces (and the veth ends in them) go with their processes;
    # give the kernel a moment, then delete what is still there and ours
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and any(ours(n, i) for n, i in links.items()
                                              if "-" in n):
        time.sleep(0.1)
    run = run or _run
    for name in data.get("ovs_bridges") or []:     # OVS keeps bridges in its database
        if ours(name, links.get(name)):
            run(["ovs-vsctl", "--if-exists", "del-br", name])
            if link_index(name) is None:
                done["links"].append(name)
    for name, idx in sorted(links.items(), key=lambda kv: ("-" not in kv[0], kv[0])):
        if ours(name, idx):
            run(["ip", "link", "del", "dev", name])
            if link_index(name) is None:
                done["links"].append(name)
    for spath, value in (data.get("sysctls") or {}).items():
        try:
            isolation.write_sysctl(spath, value)
            done["sysctls"].append(spath)
        except OSError:
            pass
    done["result"] = _mark_killed(data.get("result_file"), owner.get("pid"))
    os.unlink(path)
    log(f"bufferbloat: removed what a killed run (pid {done['owner']}) left behind: "
        f"{len(done['processes'])} process(es) {done['processes']}, "
        f"link(s) {done['links'] or 'none'}, sysctl(s) restored {done['sysctls'] or 'none'}")
    return done


def _mark_killed(result_file, pid):
    """A run killed while recording stays "running" in its result.json: mark it
    interrupted (its series up to the kill are kept). Returns the file, or None."""
    if not result_file:
        return None
    try:
        with open(result_file) as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return None
    if rec.get("status") != "running":
        return None
    rec["status"] = "interrupted"
    rec["error"] = (f"killed: the runner (pid {pid}) died without finishing; "
                    f"a later run removed its network")
    rec["recovered_at"] = time.time()
    write_json_atomic(result_file, rec)
    return result_file


def record_result_file(state, path):
    """Tell the state file which result.json is being recorded (see :func:`recover`)."""
    if state is not None:
        state.data["result_file"] = os.path.abspath(path)
        state.save()


def _run(argv):
    subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
