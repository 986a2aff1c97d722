"""Where ``run``, ``sweep`` and ``run-all`` build their networks: here or in the VM.

The rule is ``run_all.sh``'s: on a machine whose kernel lacks a piece the runs need
(a qdisc, a kernel feature such as netem or the OVS datapath, a congestion control),
the command moves into the project VM by itself and says so; ``--host`` refuses to
move (the run then stops before any network state, naming what is missing: exit 2),
``--vm`` forces the VM. Inside the project VM a command always stays where it is.

In the VM the same command runs with ``--host`` (bufferbloat's own ``vm.run``: a fresh
VM, one host directory shared as ``/bb`` over 9p), so its results land in the same
place on the host: ``--out`` is given to the guest as the same directory seen from
``/bb``. The share (:func:`share_root`) is

* in a checkout, the checkout (the guest imports the package from it; ``--out`` must
  lie inside it);
* for an installed package, the results directory ``--out`` itself: the package is
  copied into it for the run (``.vm-run/pkg-*/bufferbloat``, with the compiled sampler
  built here, :func:`staged_package`), the guest imports that copy and writes its
  results to ``/bb``; the copy is removed afterwards.

The guest prints its progress as on the host; what needs only the stored results
happens on the host afterwards, at native speed: the run's summary, figures and report
(the guest lists the runs it recorded in a file of the share, :data:`RUNS_FILE_ENV`), a
sweep's figures and report.
"""

import contextlib
import os
import secrets
import shutil
import sys

from bufferbloat.core import paths
from bufferbloat.core.errors import UsageError
from bufferbloat.core.paths import BUILD_DIR_ENV
from bufferbloat.vm.control import CONTROL_DIR, GUEST_SHARE

#: capability kinds only a kernel provides (the VM's has all of them)
KERNEL_KINDS = ("qdisc", "kernel", "cca")
#: env: a file (seen from the guest) where ``run`` lists the run directories it recorded
RUNS_FILE_ENV = "BUFFERBLOAT_RUNS_FILE"
#: marker file of the project VM's image (bufferbloat/core/machine.py records it per run)
VM_MARKER = "/etc/bufferbloat-vm"


def in_project_vm():
    """True inside the project VM."""
    return os.path.exists(VM_MARKER)


def needed(topos, caps):
    """Every feature, tool and module building ``topos`` needs on this machine."""
    from bufferbloat.net.network import Network  # noqa: PLC0415 - the network's and the VM's modules load only when asked
    out = set()
    for topo in topos:
        out |= set(Network(topo, caps=caps).features)
    return sorted(out)


def missing_kernel_pieces(topos, caps=None):
    """The kernel pieces (qdiscs, kernel features, CCAs) building ``topos`` needs and
    this machine lacks, sorted."""
    from bufferbloat.net.capabilities import probe  # noqa: PLC0415 - the network's and the VM's modules load only when asked
    caps = caps or probe()
    kinds = {r.name: r.kind for r in caps.rows}
    return [f for f in needed(topos, caps) if kinds.get(f) in KERNEL_KINDS
            and not caps.has(f)]


def require_here(topos):
    """Refuse (MissingFeature, exit 2) what building ``topos`` here needs and this
    machine lacks: kernel pieces, tools, Python modules."""
    from bufferbloat.net.capabilities import probe  # noqa: PLC0415 - the network's and the VM's modules load only when asked
    caps = probe()
    caps.require(needed(topos, caps))


def choose(where, topos, log=print):
    """'host' or 'vm' for a command whose runs build ``topos`` (``where``: 'auto',
    'host' or 'vm'); says why it moves."""
    if in_project_vm() or where == "host":
        return "host"
    if where == "vm":
        return "vm"
    from bufferbloat.net.capabilities import probe  # noqa: PLC0415 - the network's and the VM's modules load only when asked
    missing = missing_kernel_pieces(topos)
    if not missing:
        return "host"
    log(f"This kernel ({probe().kernel_release}) lacks {', '.join(missing)}: running "
        "inside the project VM (--host refuses; results land in the same place)")
    return "vm"


def require_root(where):
    """Networks and the VM both need root: say so before anything starts."""
    if os.geteuid() != 0:
        what = ("the project VM (its image cache and qemu)" if where == "vm" else
                "network namespaces and qdiscs")
        raise UsageError(f"this command needs root for {what}: run it with sudo")


def share_root(out):
    """The host directory the VM shares as /bb for a command writing to ``out``: the
    checkout, or (installed package) ``out`` itself, created."""
    if paths.SOURCE_ROOT is not None:
        return os.path.realpath(paths.SOURCE_ROOT)
    if out is None:
        raise UsageError("an installed package shares its results directory with the "
                         "project VM: give --out")
    os.makedirs(out, exist_ok=True)
    return os.path.realpath(out)


def guest_out(out):
    """``--out`` as the guest sees it: the same directory under /bb (UsageError when it
    lies outside the checkout, which is all the VM sees of the host)."""
    repo = share_root(out)
    full = os.path.realpath(out)
    if full != repo and not full.startswith(repo + os.sep):
        raise UsageError(f"--out {out}: the project VM sees only the checkout ({repo}); "
                         "give an --out inside it, or run on a host whose kernel has "
                         "what the runs need")
    rel = os.path.relpath(full, repo)
    return GUEST_SHARE if rel == "." else f"{GUEST_SHARE}/{rel}"


def host_path(guest_path, out=None):
    """A path the guest printed or recorded (/bb/...) as the host sees it (``out``: the
    command's results directory, the share of an installed package)."""
    if guest_path == GUEST_SHARE or guest_path.startswith(GUEST_SHARE + "/"):
        return os.path.join(share_root(out), guest_path[len(GUEST_SHARE):].lstrip("/"))
    return guest_path


def guest_argv(argv, out, extra=()):
    """The guest's ``python3 -m bufferbloat`` argument list: ``argv`` without
    ``--vm``/``--host`` and ``--out``, then ``--out`` as the guest sees it, ``--host``
    and ``extra``."""
    def is_option(word, name):     # argparse takes unambiguous prefixes (--ou)
        return len(word) > 2 and name.startswith(word)
    words, skip = [], False
    for w in argv:
        if skip:
            skip = False
            continue
        if is_option(w, "--vm") or (len(w) > 3 and is_option(w, "--host")):
            continue
        if len(w) > 2 and is_option(w, "--out"):
            skip = True
            continue
        if w.split("=", 1)[0] != w and is_option(w.split("=", 1)[0], "--out"):
            continue
        words.append(w)
    return (["python3", "-m", "bufferbloat"] + words
            + ["--out", guest_out(out), "--host"] + list(extra))


def _guest_env(extra=None):
    env = {k: v for k, v in os.environ.items()   # (a host's build directory: not there)
           if k.startswith("BUFFERBLOAT_") and not k.startswith("BUFFERBLOAT_VM_")
           and k != BUILD_DIR_ENV}
    env.update(extra or {})
    return env


def run_in_vm(argv, out, extra=(), env=None):
    """Run ``python3 -m bufferbloat ARGV`` in a fresh project VM, its output streamed
    here; returns its exit code (vm.run's own: 3 no result, 4 no boot, 130/143)."""
    from bufferbloat.vm.common import VMError  # noqa: PLC0415 - the network's and the VM's modules load only when asked
    from bufferbloat.vm.session import run as vm_run  # noqa: PLC0415 - the network's and the VM's modules load only when asked
    command = guest_argv(argv, out, extra)
    helper = prepare_sampler_for_vm()
    share = share_root(out)
    print(f"vm: {' '.join(command)}", file=sys.stderr, flush=True)
    try:
        with staged_package(share, helper) as staged_env, judged_here(share) as judge_env:
            return vm_run(command, share=share, timeout_s=None,
                          env=_guest_env(dict(env or {}, **staged_env, **judge_env)))
    except VMError as exc:
        print(f"vm: error: {exc}", file=sys.stderr)
        return exc.exit_code


@contextlib.contextmanager
def judged_here(share):
    """While a VM command runs: this host judges the guest's finished runs (their steady
    state, metrics and health, :mod:`bufferbloat.run.judge`) from the share, where
    Python runs ten times faster than under TCG; yields the guest's environment that
    asks for it ({} with BUFFERBLOAT_JUDGE=guest: the guest judges its own runs)."""
    from bufferbloat.run import judge  # noqa: PLC0415 - numpy only when a VM runs
    if os.environ.get(judge.WHERE_ENV, "host") == "guest":
        yield {}
        return
    req_dir = os.path.join(share, CONTROL_DIR, f"judge-{os.getpid()}-{secrets.token_hex(4)}")
    server = judge.JudgeServer(req_dir, share).start()
    try:
        yield server.guest_env()
    finally:
        server.stop()
        shutil.rmtree(req_dir, ignore_errors=True)
        if server.served:
            print(f"vm: {server.served} run(s) judged on this host", file=sys.stderr,
                  flush=True)


@contextlib.contextmanager
def staged_package(share, helper=None):
    """For an installed package: a copy of it in the share (``.vm-run/pkg-*/``: the
    package, and ``build/`` with the compiled sampler built here) for the guest to
    import; yields the guest's environment for it (PYTHONPATH, the build directory)
    and removes the copy afterwards. In a checkout, the share holds the package: {}."""
    if paths.SOURCE_ROOT is not None:
        yield {}
        return
    name = f"pkg-{os.getpid()}-{secrets.token_hex(4)}"
    stage = os.path.join(share, CONTROL_DIR, name)
    guest = f"{GUEST_SHARE}/{CONTROL_DIR}/{name}"
    try:
        shutil.copytree(paths.PACKAGE_DIR, os.path.join(stage, "bufferbloat"),
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        os.makedirs(os.path.join(stage, "build"))
        binary = (helper or {}).get("binary")
        if binary:
            shutil.copy2(binary, os.path.join(stage, "build", os.path.basename(binary)))
        yield {"PYTHONPATH": guest, paths.BUILD_DIR_ENV: f"{guest}/build"}
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def prepare_sampler_for_vm(log=None):
    """Build the compiled queue sampler here (static: it runs in the guest through the
    share) before the VM boots, so that no run in the guest waits for a compiler under
    TCG. Where this machine cannot build it, say so: the guest then builds it before
    its first run's sampler starts (never against a timeout)."""
    from bufferbloat.measure.compiled import prepare_qdisc_helper, qdisc_sampler_mode  # noqa: PLC0415 - the network's and the VM's modules load only when asked
    log = log or (lambda m: print(m, file=sys.stderr, flush=True))
    try:
        if qdisc_sampler_mode() == "python":
            return None
        helper = prepare_qdisc_helper(log)
    except (RuntimeError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    if helper["binary"] is None:
        log(f"note: the compiled queue sampler is not ready here ({helper['why']}): "
            "the project VM builds it before its first run")
    return helper


@contextlib.contextmanager
def runs_file(out=None):
    """(path seen from the guest, path on the host) of a fresh file of the share where
    the guest's ``run`` lists its run directories; removed afterwards."""
    name = f"runs-{os.getpid()}-{secrets.token_hex(4)}.txt"
    host = os.path.join(share_root(out), CONTROL_DIR, name)
    os.makedirs(os.path.dirname(host), exist_ok=True)
    open(host, "w").close()
    try:
        yield f"{GUEST_SHARE}/{CONTROL_DIR}/{name}", host
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(host)


def recorded_runs(host_file, out=None):
    """The run directories the guest listed, as host paths."""
    with open(host_file) as f:
        return [host_path(line.strip(), out) for line in f if line.strip()]


def note_run(run_dir):
    """In the guest: list ``run_dir`` for the host (when the host asked); True if so
    (the host then draws the figures and prints the summary)."""
    path = os.environ.get(RUNS_FILE_ENV)
    if not path:
        return False
    with open(path, "a") as f:
        f.write(os.path.abspath(run_dir) + "\n")
    return True
