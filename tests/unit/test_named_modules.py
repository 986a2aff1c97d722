"""Every ``bufferbloat.x.y`` the code and the tests name exists: modules started as child
processes (``python3 -m bufferbloat.measure.sampler``), monkeypatch targets
(``"bufferbloat.run.where.require_here"``), imports of scripts no unit test imports
(tests/fixtures' capture scripts), names in docstrings. A wrong path there fails only in
a host or VM run; here it fails at once.

Each dotted name found (a regex over every Python file's text, and over the shell
scripts' ``-m`` arguments) is a module (``importlib.util.find_spec``), or a module and
attributes below it (the module imported, each attribute looked up).
"""
import importlib
import importlib.util
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAME = re.compile(r"\bbufferbloat(?:\.[A-Za-z_]\w*)+")
MODULE_ARG = re.compile(r"-m\s+(bufferbloat(?:\.[A-Za-z_]\w*)*)")
#: where the code lives: Python files under these, and the shell scripts
TREES = ("bufferbloat", "plots", "scenarios", "webserver", "tests", "bench", "scripts",
         "vm", ".ci")
SELF = "tests/unit/test_named_modules.py"     # names wrong ones on purpose
#: names that are deliberately not modules: (file, name)
NOT_MODULES = {
    ("tests/unit/test_layers.py", "bufferbloat.sampler"),   # planted: must not exist
    ("tests/unit/test_layers.py", "bufferbloat.core.paths._x"),          # planted
    ("tests/unit/test_layers.py", "bufferbloat.core.stats._private"),    # planted
    ("tests/unit/test_layers.py", "bufferbloat.webserver.server"),       # planted
}


def named():
    """{dotted name: first file:line naming it}."""
    out = {}
    paths = [os.path.join(ROOT, f) for f in ("run_tests.sh", "run_all.sh")]
    for tree in TREES:
        for d, dirs, files in os.walk(os.path.join(ROOT, tree)):
            dirs[:] = [x for x in dirs if x not in ("__pycache__", "fixtures")
                       or d.endswith("tests")]
            paths += [os.path.join(d, f) for f in files]
    for path in sorted(paths):
        rel = os.path.relpath(path, ROOT)
        if rel == SELF:
            continue
        if path.endswith(".py"):
            pattern = NAME
        elif path.endswith(".sh") or os.path.basename(path) in ("run", "build"):
            pattern = MODULE_ARG
        else:
            continue
        try:
            text = open(path, encoding="utf-8").read()
        except (OSError, UnicodeDecodeError):
            continue
        for m in pattern.finditer(text):
            name = m.group(1) if m.re is MODULE_ARG else m.group(0)
            if (rel, name) not in NOT_MODULES:
                out.setdefault(name, f"{rel}:{text.count(chr(10), 0, m.start()) + 1}")
    return out


def missing(name):
    """Why ``name`` names nothing, or None when it is a module or a module's attribute."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        try:
            if importlib.util.find_spec(module) is not None:
                break
        except ModuleNotFoundError:
            continue
    else:
        return "no such module"
    if i == len(parts):
        return None
    obj = importlib.import_module(module)
    for attr in parts[i:]:
        if not hasattr(obj, attr):
            return f"{module} has no {'.'.join(parts[i:])}"
        obj = getattr(obj, attr)
    return None


def test_every_named_module_exists():
    names = named()
    # what the search must find, or it searched nothing
    assert {"bufferbloat.measure.sampler", "bufferbloat.net.nlqdisc",
            "bufferbloat.traffic.udptool", "bufferbloat.webserver",
            "bufferbloat.run.where.require_here"} <= set(names)
    wrong = {name: (where, why) for name, where in names.items()
             if (why := missing(name)) is not None}
    assert wrong == {}


def test_a_wrong_name_is_found():
    assert missing("bufferbloat.sampler") == "bufferbloat has no sampler"
    assert missing("bufferbloat.run.where.no_such_function") == \
        "bufferbloat.run.where has no no_such_function"
    assert missing("bufferbloat.results.records.Run.qdisc") is None
