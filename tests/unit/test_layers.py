"""Every import points down the layer order (docs/design/architecture.md, "Layers"), or sideways
within one package, and no two modules import each other, directly or round a longer
loop, as ``test_no_mininet.py`` guards Mininet.

Every module's imports are read with :mod:`ast`: at module level and inside functions,
absolute and relative, and an import of a module's own package (its ``__init__``: a
registry the package's modules must not reach back into) counts like any other. An
import of a ``bufferbloat`` module that does not exist fails too (a path left behind by
a move). ``webserver/`` imports nothing of ours, and no module uses another module's
private names (``from m import _x``, ``m._x``). The last tests plant each kind of fault
into a copy of the tree and show that the checker finds it.
"""
import ast
import os
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: the layers, lowest first: a module may import its own package and the layers below.
#: ``vm`` needs only ``core`` and is used by ``run.where``; ``webserver`` (a process the
#: web traffic kind starts by name) imports nothing of ours and must stay so; the
#: catalogue (``scenarios``) needs ``run.scenario``; the figures need results, sweeps and
#: the catalogue; the commands sit on top of everything.
LAYERS = ("core", "vm", "netlink", "net", "measure", "webserver", "traffic", "results",
          "run", "scenarios", "plots", "commands")
#: the command modules (the ``commands`` layer): they may import any layer
COMMANDS = ("cli", "summary", "describe", "compare", "worker", "__main__")
#: the design's top-level folders, imported as ``bufferbloat.<folder>``
FOLDERS = ("scenarios", "plots", "webserver")


def modules(root):
    """{module name: (path, is package)} of bufferbloat and its top-level folders."""
    out = {}
    tops = [("bufferbloat", "bufferbloat")] + [(f, f"bufferbloat.{f}") for f in FOLDERS]
    for top, prefix in tops:
        base = os.path.join(root, top)
        for d, dirs, files in os.walk(base):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            for f in sorted(files):
                if not f.endswith(".py"):
                    continue
                parts = os.path.relpath(os.path.join(d, f), base)[:-3].split(os.sep)
                package = parts[-1] == "__init__"
                parts = parts[:-1] if package else parts
                out[".".join([prefix] + parts)] = (os.path.join(d, f), package)
    return out


def imports(name, path, package, known):
    """[(line, imported module)] of the bufferbloat modules ``name`` imports anywhere
    in its file; ``from P import x`` names the module P.x when there is one, else P."""
    tree = ast.parse(open(path).read(), path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")[:len(name.split(".")) - node.level + package]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            out += [(node.lineno, f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod)
                    for a in node.names]
    return [(line, mod) for line, mod in out
            if mod == "bufferbloat" or mod.startswith("bufferbloat.")]


def layer(module):
    """(rank, package) of a module: its layer's index and the package it belongs to."""
    parts = module.split(".")
    if len(parts) == 1:
        return -1, "bufferbloat"          # the root package: the finder only
    if parts[1] in COMMANDS:
        return LAYERS.index("commands"), "commands"
    return LAYERS.index(parts[1]), parts[1]


def graph(root):
    """{module: {imported module: first line}} and the problems: unknown layers and
    modules, and imports that point up or sideways out of their package."""
    known = modules(root)
    edges, problems = {}, []
    for name, (path, package) in sorted(known.items()):
        mine = edges.setdefault(name, {})
        for line, mod in imports(name, path, package, known):
            where = f"{os.path.relpath(path, root)}:{line}"
            if mod not in known:
                problems.append(f"{where}: {name} imports {mod}, which does not exist")
                continue
            if mod == name or mod == "bufferbloat":
                continue          # itself; the root package (the finder only)
            if name.startswith("bufferbloat.webserver"):
                problems.append(f"{where}: {name} imports {mod}: the web server imports "
                                "nothing of ours")
            mine.setdefault(mod, line)
            (rank, pkg), (to_rank, to_pkg) = layer(name), layer(mod)
            if to_rank > rank or (to_rank == rank and to_pkg != pkg):
                problems.append(f"{where}: {name} ({pkg}) imports {mod} ({to_pkg}), "
                                "which is not below it")
    for name in known:
        try:
            layer(name)
        except ValueError:
            problems.append(f"{name}: in no layer of LAYERS")
    return edges, problems


def _imported_modules(name, tree, package, known):
    """{local name: module} of the bufferbloat modules ``tree`` binds to a name, and
    [(line, module, name)] of the names it imports from a module."""
    aliases, names = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")[:len(name.split(".")) - node.level + package]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod != "bufferbloat" and not mod.startswith("bufferbloat."):
                continue
            for a in node.names:
                if f"{mod}.{a.name}" in known:
                    aliases[a.asname or a.name] = f"{mod}.{a.name}"
                else:
                    names.append((node.lineno, mod, a.name))
        elif isinstance(node, ast.Import):
            aliases.update({a.asname: a.name for a in node.names
                            if a.asname and a.name.startswith("bufferbloat.")})
    return aliases, names


def private_uses(root):
    """Every use of another module's private name (``_x``, not ``__x__``):
    ``from m import _x`` and ``m._x`` where ``m`` is a bufferbloat module."""
    known, found = modules(root), []

    def private(attr):
        return attr.startswith("_") and not attr.startswith("__")
    for name, (path, package) in sorted(known.items()):
        tree = ast.parse(open(path).read(), path)
        where = os.path.relpath(path, root)
        aliases, names = _imported_modules(name, tree, package, known)
        found += [f"{where}:{line}: {name} uses {mod}.{attr}, a private name"
                  for line, mod, attr in names if private(attr) and mod != name]
        found += [f"{where}:{node.lineno}: {name} uses {aliases[node.value.id]}."
                  f"{node.attr}, a private name"
                  for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                  and node.value.id in aliases and private(node.attr)
                  and aliases[node.value.id] != name]
    return sorted(set(found))


def cycles(edges):
    """The import cycles: each strongly connected set of two or more modules, sorted."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def check(root):
    """Every problem of the tree at ``root``: layer violations and cycles."""
    edges, problems = graph(root)
    return (problems + [f"import cycle: {' <-> '.join(c)}" for c in cycles(edges)]
            + private_uses(root))


def test_imports_point_down_and_never_round():
    edges, _ = graph(ROOT)
    assert len(edges) > 100 and sum(map(len, edges.values())) > 300   # it read them
    assert check(ROOT) == []


def _copy(tmp_path):
    for top in ("bufferbloat",) + FOLDERS:
        shutil.copytree(os.path.join(ROOT, top), tmp_path / top,
                        ignore=shutil.ignore_patterns("__pycache__", "*.c", "*.h", "*.so",
                                                      "Makefile", "csampler"))
    assert check(tmp_path) == []                  # the copy is as clean as the tree


def _plant(path, text):
    with open(path, "a") as f:
        f.write(text)


def test_the_checker_finds_a_planted_upward_import_and_a_cycle(tmp_path):
    _copy(tmp_path)
    # inside a function, as the imports it must catch hide
    _plant(tmp_path / "bufferbloat" / "core" / "stats.py",
           "\n\ndef _planted():\n    from bufferbloat.plots import palette\n    return palette\n")
    _plant(tmp_path / "bufferbloat" / "results" / "theory.py",
           "\nfrom ..run import engine\n")
    problems = check(tmp_path)
    assert any("bufferbloat.core.stats (core) imports bufferbloat.plots.palette" in p
               for p in problems), problems
    assert any("bufferbloat.results.theory (results) imports bufferbloat.run.engine" in p
               for p in problems), problems
    # a cycle within one package (sideways imports are allowed, loops are not)
    _copy(tmp_path / "again")
    _plant(tmp_path / "again" / "bufferbloat" / "core" / "atomic.py",
           "\nfrom bufferbloat.core import stats\n")
    _plant(tmp_path / "again" / "bufferbloat" / "core" / "stats.py",
           "\nfrom . import atomic\n")
    problems = check(tmp_path / "again")
    assert problems == ["import cycle: bufferbloat.core.atomic <-> bufferbloat.core.stats"]
    # a module that is not there (a path a move left behind)
    _plant(tmp_path / "again" / "bufferbloat" / "run" / "where.py",
           "\nfrom bufferbloat.sampler import main\n")
    assert any("imports bufferbloat.sampler, which does not exist" in p
               for p in check(tmp_path / "again"))


def test_the_checker_finds_a_registry_cycle_a_web_server_import_and_a_private_use(tmp_path):
    _copy(tmp_path)
    # a module reaching back into its own package's registry (its __init__)
    _plant(tmp_path / "bufferbloat" / "net" / "qdiscs" / "fifo.py",
           "\n\ndef _planted():\n    from bufferbloat.net.qdiscs import KINDS\n"
           "    return KINDS\n")
    # the web server importing ours
    _plant(tmp_path / "webserver" / "server.py", "\nfrom bufferbloat.core import stats\n")
    # another module's private name, both ways
    _plant(tmp_path / "bufferbloat" / "results" / "theory.py",
           "\nfrom bufferbloat.core import stats\nfrom bufferbloat.core.paths import _x\n"
           "\n\ndef _planted():\n    return stats._private\n")
    problems = check(tmp_path)
    assert any(p.startswith("import cycle:") and "bufferbloat.net.qdiscs <-> " in p
               and "bufferbloat.net.qdiscs.fifo" in p for p in problems), problems
    assert any("bufferbloat.webserver.server imports bufferbloat.core.stats" in p
               for p in problems), problems
    assert any("uses bufferbloat.core.paths._x, a private name" in p for p in problems)
    assert any("uses bufferbloat.core.stats._private, a private name" in p
               for p in problems), problems
