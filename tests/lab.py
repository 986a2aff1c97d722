"""A lab of machines on one machine, for tests: each machine a network namespace with
its own address, hostname and ``/etc/hosts``, joined by a switch (a bridge in a
namespace of its own: nothing of the lab is in the root namespace, whose links other
tests watch).

* ``lab0`` runs the scheduler, ``drv`` the driver, ``pc1``..``pcN`` one worker each;
* the scheduler and the workers are started with the commands docs/guide/cluster.md
  gives (:func:`doc_commands`): the scheduler's line, and the systemd unit's
  ``ExecStart`` in its ``WorkingDirectory`` (the checkout for ``/srv/bufferbloat``),
  restarted as its ``Restart=always`` and ``RestartSec`` say; ``lab0`` resolves
  through each machine's own hosts file (``ip netns exec`` binds
  ``/etc/netns/NS/hosts``), so ``tcp://lab0:8786`` is used as written;
* faults: :meth:`Lab.cut` (the machine's switch port down: no process is told),
  :meth:`Lab.restore`, :meth:`Lab.slow` (HTB at a rate on the machine's egress, with a
  short pfifo: this kernel has no netem);
* :meth:`Lab.leftovers`: what a machine holds beyond its worker (processes in its
  namespace or below the worker, links beyond ``lo`` and ``eth0``, its slot's files);
* :meth:`Lab.close` ends every process it started, by PID, and removes the namespaces,
  the switch and the hosts files.
"""
import configparser
import contextlib
import os
import re
import shlex
import signal
import subprocess
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "guide", "cluster.md")
ETC_NETNS = "/etc/netns"


def doc_commands(path=DOC):
    """What docs/guide/cluster.md tells a lab to run: {scheduler: (env, argv),
    unit: {ExecStart, WorkingDirectory, Restart, RestartSec, Environment}, address}."""
    with open(path) as f:
        text = f.read()
    line = next(x for x in re.findall(r"^(?:\S+=\S+ )*dask-scheduler .*$", text, re.M))
    words = shlex.split(line.split("#", 1)[0])
    env = dict(w.split("=", 1) for w in words if re.fullmatch(r"[A-Z_]+=\S*", w))
    argv = [w for w in words if not re.fullmatch(r"[A-Z_]+=\S*", w)]
    ini = re.search(r"```ini\n(.*?)```", text, re.S).group(1)
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read_string("\n".join(x for x in ini.splitlines() if not x.startswith("#")))
    unit = dict(parser["Service"])
    address = re.search(r"--cluster (tcp://lab0:\d+)", text).group(1)
    return {"scheduler": (env, argv), "unit": unit, "address": address}


def _run(argv, check=True):
    return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=60)


def _children():
    """{ppid: [pid]} of every process."""
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            kids.setdefault(ppid, []).append(int(d))
    return kids


def descendants(pid):
    kids, out, todo = _children(), [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


class Machine:
    """One machine of the lab: its namespace, address, switch port and processes."""

    def __init__(self, lab, name, ip):
        self.lab, self.name, self.ip = lab, name, ip
        self.ns = f"{lab.prefix}-{name}"
        self.port = f"{lab.tag}{name}"[:15]      # its switch port (in the switch's ns)
        self.procs = []                          # every process started on it, in order
        self.logs = []

    def argv(self, argv):
        """``argv`` on this machine: its namespace, its own hostname."""
        return ["ip", "netns", "exec", self.ns, "unshare", "--uts", "--", "/bin/sh",
                "-c", f'hostname {self.name} && exec "$@"', "sh", *argv]

    def start(self, argv, env, cwd=ROOT, log_name=None):
        log = os.path.join(self.lab.dir, log_name or f"{self.name}-{len(self.procs)}.log")
        with open(log, "w") as f:
            proc = subprocess.Popen(self.argv(argv), cwd=cwd, env=env, stdout=f,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        self.logs.append(log)
        return proc

    def log_text(self, i=-1):
        with open(self.logs[i]) as f:
            return f.read()


class Lab:
    """The lab: ``workers`` machines with a worker each, a scheduler, a driver."""

    def __init__(self, directory, workers=2, ttl_s=3.0, worker_env=None):
        self.dir = str(directory)
        os.makedirs(self.dir, exist_ok=True)
        self.tag = f"l{os.getpid() % 4096:03x}"
        self.prefix = f"bblab{os.getpid()}"
        net = 10 + os.getpid() % 200
        self.doc = doc_commands()
        self.ttl_s = ttl_s
        self.worker_env = dict(worker_env or {})
        self.switch = f"{self.prefix}-sw"
        self.machines = {"lab0": Machine(self, "lab0", f"10.213.{net}.1"),
                         "drv": Machine(self, "drv", f"10.213.{net}.2")}
        for i in range(1, workers + 1):
            self.machines[f"pc{i}"] = Machine(self, f"pc{i}", f"10.213.{net}.{10 + i}")
        self.closing = False
        self.supervisors = []
        self.made_etc = not os.path.isdir(ETC_NETNS)
        self._build()

    # the network ----------------------------------------------------------------
    def _build(self):
        _run(["ip", "netns", "add", self.switch])
        _run(["ip", "-n", self.switch, "link", "add", "sw", "type", "bridge"])
        _run(["ip", "-n", self.switch, "link", "set", "sw", "up"])
        hosts = "127.0.0.1 localhost\n" + "".join(
            f"{m.ip} {m.name}\n" for m in self.machines.values())
        for m in self.machines.values():
            _run(["ip", "netns", "add", m.ns])
            _run(["ip", "-n", self.switch, "link", "add", m.port, "type", "veth", "peer",
                  "name", "eth0", "netns", m.ns])
            _run(["ip", "-n", self.switch, "link", "set", m.port, "master", "sw", "up"])
            _run(["ip", "-n", m.ns, "addr", "add", f"{m.ip}/24", "dev", "eth0"])
            _run(["ip", "-n", m.ns, "link", "set", "eth0", "up"])
            _run(["ip", "-n", m.ns, "link", "set", "lo", "up"])
            os.makedirs(os.path.join(ETC_NETNS, m.ns), exist_ok=True)
            with open(os.path.join(ETC_NETNS, m.ns, "hosts"), "w") as f:
                f.write(hosts)

    def cut(self, name):
        """The machine's cable pulled: its switch port down (its process is not told)."""
        _run(["ip", "-n", self.switch, "link", "set", self.machines[name].port, "down"])

    def restore(self, name):
        _run(["ip", "-n", self.switch, "link", "set", self.machines[name].port, "up"])

    def slow(self, name, rate="1mbit", limit_pkts=20):
        """The machine's way out at ``rate`` (HTB), queued in a pfifo of ``limit_pkts``."""
        ns = self.machines[name].ns
        # a NIC at that rate sends packets, not 64 kB GSO blocks that HTB lets through
        # whole (a point's ~55 kB would pass at once, its cost falling on what follows)
        _run(["ip", "netns", "exec", ns, "ethtool", "-K", "eth0", "tso", "off", "gso",
              "off", "gro", "off"], check=False)
        _run(["tc", "-n", ns, "qdisc", "replace", "dev", "eth0", "root", "handle", "1:",
              "htb", "default", "1"])
        _run(["tc", "-n", ns, "class", "replace", "dev", "eth0", "parent", "1:", "classid",
              "1:1", "htb", "rate", rate, "ceil", rate])
        _run(["tc", "-n", ns, "qdisc", "replace", "dev", "eth0", "parent", "1:1", "handle",
              "10:", "pfifo", "limit", str(limit_pkts)])

    def unslow(self, name):
        _run(["tc", "-n", self.machines[name].ns, "qdisc", "del", "dev", "eth0", "root"],
             check=False)

    # the processes --------------------------------------------------------------
    def _env(self, extra=None):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        return dict(env, PYTHONUNBUFFERED="1", **(extra or {}))

    def start_scheduler(self, timeout_s=60):
        """The doc's scheduler line on lab0 (its worker TTL made ``ttl_s``)."""
        env, argv = self.doc["scheduler"]
        env = dict(env, DASK_DISTRIBUTED__SCHEDULER__WORKER_TTL=f"{self.ttl_s}s")
        m = self.machines["lab0"]
        proc = m.start(argv, self._env(env), log_name="scheduler.log")
        self._wait(lambda: "Scheduler at:" in m.log_text(), proc, m, timeout_s)
        return proc

    def start_worker(self, name):
        """The unit's ExecStart on machine ``name``, in its WorkingDirectory (the
        checkout), restarted after RestartSec whenever it ends (Restart=always)."""
        unit, m = self.doc["unit"], self.machines[name]
        assert unit.get("Restart") == "always", unit
        argv = shlex.split(unit["ExecStart"])
        cwd = ROOT if unit.get("WorkingDirectory") == "/srv/bufferbloat" else \
            unit["WorkingDirectory"]
        env = self._env(dict(
            [e.split("=", 1) for e in shlex.split(unit.get("Environment", ""))],
            **self.worker_env))
        delay = float(unit.get("RestartSec", "0.1").rstrip("s"))
        m.start(argv, env, cwd=cwd)

        def supervise():
            while not self.closing:
                proc = m.procs[-1]
                while proc.poll() is None and not self.closing:
                    time.sleep(0.2)
                if self.closing:
                    return
                time.sleep(delay)
                if not self.closing:
                    m.start(argv, env, cwd=cwd)
        t = threading.Thread(target=supervise, daemon=True, name=f"unit-{name}")
        t.start()
        self.supervisors.append(t)

    def wait_joined(self, name, times=1, timeout_s=90):
        """Until worker ``name`` has joined ``times`` times (counted over its starts)."""
        m = self.machines[name]
        self._wait(lambda: sum(open(log).read().count(": joined ") for log in m.logs)
                   >= times, None, m, timeout_s)
        return m.procs[-1]

    def _wait(self, cond, proc, m, timeout_s):
        deadline = time.monotonic() + timeout_s
        while not cond():
            assert proc is None or proc.poll() is None, m.log_text()
            assert time.monotonic() < deadline, m.log_text()
            time.sleep(0.2)

    def driver(self, argv, env):
        """The driver's command on drv (``tcp://lab0:8786`` resolves there)."""
        return self.machines["drv"].start(argv, env, log_name="driver.log")

    # what is left -----------------------------------------------------------------
    def leftovers(self, name, worker_dir):
        """What machine ``name`` holds beyond its current worker: processes in its
        namespace or below the worker, links beyond lo and eth0, its slot's state."""
        m = self.machines[name]
        live = [p.pid for p in m.procs if p.poll() is None]
        pids = _run(["ip", "netns", "pids", m.ns]).stdout.split()
        extra = [int(p) for p in pids if int(p) not in live[-1:]]
        for pid in live[-1:]:
            extra += descendants(pid)
        links = {x.split(":")[1].strip().split("@")[0] for x in
                 _run(["ip", "-n", m.ns, "-o", "link"]).stdout.splitlines()}
        slot = os.path.join(str(worker_dir), name)
        files = [f for f in ("child.json", "network.json") if
                 os.path.exists(os.path.join(slot, f))]
        runs = os.path.join(slot, "runs")
        if os.path.isdir(runs) and os.listdir(runs):
            files.append("runs/")
        return {"processes": sorted(set(extra)), "old workers": live[:-1],
                "links": sorted(links - {"lo", "eth0"}), "files": files}

    def close(self):
        """End every process started (by PID: SIGTERM, then SIGKILL after 60 s), then
        remove the namespaces, the switch and the hosts files."""
        self.closing = True
        for t in self.supervisors:
            t.join(timeout=5)
        for m in reversed(list(self.machines.values())):
            for proc in m.procs:
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(proc.pid, signal.SIGTERM)
            for proc in m.procs:
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(proc.pid, signal.SIGKILL)
                    proc.wait()
        stray = {}
        for m in self.machines.values():
            pids = _run(["ip", "netns", "pids", m.ns], check=False).stdout.split()
            if pids:
                stray[m.name] = pids
                for pid in pids:              # the lab's own namespace: its processes
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
            _run(["ip", "netns", "del", m.ns], check=False)
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(ETC_NETNS, m.ns, "hosts"))
                os.rmdir(os.path.join(ETC_NETNS, m.ns))
        _run(["ip", "netns", "del", self.switch], check=False)
        if self.made_etc:
            with contextlib.suppress(OSError):
                os.rmdir(ETC_NETNS)
        return stray
