"""Where this code stands on disk: the one module that knows the layout of the files.

Two layouts:

* a **checkout**: the design's top-level folders (``scenarios/``, ``plots/``,
  ``webserver/``, ``vm/``) stand beside the ``bufferbloat`` package (the package's
  finder maps the first three under it); compiled helpers are built in ``.build/``;
  the project VM shares the checkout as ``/bb``.
* an **installed** package (a wheel: ``pip install .``): those folders are in the
  package (``bufferbloat/scenarios``, ``bufferbloat/plots``, ``bufferbloat/webserver``,
  and the checkout's ``vm/`` as ``bufferbloat/vm/files``); compiled helpers are built
  on first use into a cache directory outside the package (:data:`BUILD_DIR`); the
  project VM shares the results directory, with a copy of the package staged in it
  (:mod:`bufferbloat.run.where`).

Everything else asks here. Standard library only.
"""

import os
import subprocess
from importlib import metadata
from pathlib import Path

#: the ``bufferbloat`` package's directory
PACKAGE_DIR = Path(__file__).resolve().parents[1]
#: the directory a child process needs on PYTHONPATH to import this package
IMPORT_ROOT = PACKAGE_DIR.parent
#: env: where compiled helpers are built (overrides the defaults below)
BUILD_DIR_ENV = "BUFFERBLOAT_BUILD_DIR"
#: the distribution's name (pyproject.toml)
DISTRIBUTION = "bufferbloat"


def is_checkout(package_dir=PACKAGE_DIR):
    """True when ``package_dir`` stands in a checkout (the VM's files and the design's
    folders beside it, not in it)."""
    root = Path(package_dir).parent
    return ((root / "vm" / "guest").is_dir() and (root / "scenarios").is_dir()
            and not (Path(package_dir) / "scenarios").is_dir())


#: the checkout (shared with the project VM as /bb), or None for an installed package
SOURCE_ROOT = IMPORT_ROOT if is_checkout() else None
#: the project VM's guest files (build, run, provision.sh, packages.txt, guest/)
VM_DIR = SOURCE_ROOT / "vm" if SOURCE_ROOT else PACKAGE_DIR / "vm" / "files"
#: the compiled queue sampler's source
CSAMPLER_DIR = PACKAGE_DIR / "measure" / "csampler"


def default_build_dir(source_root=SOURCE_ROOT, env=None, euid=None, home=None):
    """Where compiled helpers are built: env BUFFERBLOAT_BUILD_DIR; else the checkout's
    ``.build/``; else (installed) /var/cache/bufferbloat/build for root, or
    ``$XDG_CACHE_HOME/bufferbloat/build`` (~/.cache/...) for a user: never inside the
    installed package, which may be read-only."""
    env = os.environ if env is None else env
    if env.get(BUILD_DIR_ENV):
        return Path(env[BUILD_DIR_ENV]).resolve()
    if source_root is not None:
        return Path(source_root) / ".build"
    if (os.geteuid() if euid is None else euid) == 0:
        return Path("/var/cache/bufferbloat/build")
    cache = env.get("XDG_CACHE_HOME") or os.path.join(home or os.path.expanduser("~"),
                                                      ".cache")
    return Path(cache) / "bufferbloat" / "build"


#: where compiled helpers are built
BUILD_DIR = default_build_dir()


def code_identity():
    """The code that runs, in words: ``git <commit>[, modified]`` in a checkout (git's
    answer), else the installed distribution's version, else ``unknown``."""
    if SOURCE_ROOT is not None:
        try:
            r = subprocess.run(["git", "-C", str(SOURCE_ROOT), "rev-parse", "HEAD"],
                               capture_output=True, text=True, timeout=10)
            d = subprocess.run(["git", "-C", str(SOURCE_ROOT), "status", "--porcelain",
                                "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            r = None
        if r is not None and r.returncode == 0 and r.stdout.strip():
            dirty = ", modified" if d.returncode == 0 and d.stdout.strip() else ""
            return f"checkout {SOURCE_ROOT}, git {r.stdout.strip()[:12]}{dirty}"
        return f"checkout {SOURCE_ROOT} (not a git repository)"
    try:
        return f"installed distribution {DISTRIBUTION} {metadata.version(DISTRIBUTION)} " \
               f"({PACKAGE_DIR})"
    except metadata.PackageNotFoundError:
        return f"a copy of the package at {PACKAGE_DIR} (no distribution metadata)"


#: what a run's results depend on, by import path: the package's code and the compiled
#: sampler's source, and the catalogue and web server (top-level folders in a checkout)
_CODE_SUFFIXES = (".py", ".c", ".h")


def _code_files():
    """[(import-relative name, path)] of the code a run depends on, the same names in a
    checkout and in an installed package (``bufferbloat/scenarios/a1.py`` either way);
    the VM's guest files and the figures are left out (results do not depend on them)."""
    out = []
    tops = [(PACKAGE_DIR, "bufferbloat")]
    if SOURCE_ROOT is not None:
        tops += [(SOURCE_ROOT / f, f"bufferbloat/{f}") for f in ("scenarios", "webserver")]
    skip = {"plots", os.path.join("vm", "files")}       # installed: figures, guest files
    for base, name in tops:
        for d, dirs, files in os.walk(base):
            rel = os.path.relpath(d, base)
            dirs[:] = sorted(x for x in dirs if x != "__pycache__"
                             and os.path.normpath(os.path.join(rel, x)) not in skip)
            out += [(os.path.normpath(os.path.join(name, rel, f)), os.path.join(d, f))
                    for f in sorted(files) if f.endswith(_CODE_SUFFIXES)]
    return sorted(out)


def code_fingerprint(with_text=True):
    """{"hash": 16 hex digits over the code a run depends on (:func:`_code_files`: names
    and bytes), "text": :func:`code_identity`}: two processes with the same hash compute
    the same configuration the same way (a cluster's workers are checked against the
    driver with it; a VM's host judges its guest's runs only with the guest's hash).
    ``with_text=False``: the hash alone (no git process)."""
    import hashlib  # noqa: PLC0415 - only a cluster or a VM's host asks
    h = hashlib.sha256()
    for name, path in _code_files():
        with open(path, "rb") as f:
            data = f.read()
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return {"hash": h.hexdigest()[:16], **({"text": code_identity()} if with_text else {})}
