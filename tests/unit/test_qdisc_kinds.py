"""One module per qdisc: no kind's name outside its module and the registry
(bufferbloat/net/qdiscs/), the scenarios' data and the tests; every kind fills the hooks
the rest of the suite asks for."""
import ast
import os

import pytest

from bufferbloat.net import qdiscs
from bufferbloat.net.qdiscs import base, template

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QDISC_PKG = os.path.join("bufferbloat", "net", "qdiscs")
#: every name the suite could write for a kind: registry names, tc's names, row kinds
NAMES = (set(qdiscs.KINDS) | set(qdiscs.BY_TC_KIND) | set(qdiscs.ROW_KINDS)
         | {k.name + "_flow" for k in qdiscs.KINDS.values() if k.reads_classes})


def _sources():
    for top in ("bufferbloat", "plots"):
        for dirpath, dirnames, files in os.walk(os.path.join(ROOT, top)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            rel = os.path.relpath(dirpath, ROOT)
            if rel == QDISC_PKG or rel.startswith(QDISC_PKG + os.sep):
                continue
            for f in files:
                if f.endswith(".py"):
                    yield os.path.join(rel, f)


def kind_literals(source, names=NAMES):
    """(line, text) of every string constant of ``source`` that is a kind's name."""
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value.lower() in names]


def test_no_kind_name_outside_its_module_and_the_registry():
    found = []
    for rel in _sources():
        with open(os.path.join(ROOT, rel)) as f:
            found += [f"{rel}:{line}: {text!r}" for line, text in kind_literals(f.read())]
    assert not found, "qdisc kinds named outside bufferbloat/net/qdiscs/ (ask the " \
        "registry):\n" + "\n".join(found)


def test_the_scan_sees_a_planted_name():
    # the scan must fail on what it guards against (a string, not a comment)
    assert kind_literals('if kind == "fq_codel":\n    pass\n') == [(1, "fq_codel")]
    assert kind_literals('colors = {"cake": 1}  # pie\n') == [(1, "cake")]
    assert kind_literals('# "red"\nx = "redundant"\n') == []


def test_every_kind_module_is_registered_and_fills_the_hooks():
    here = os.path.join(ROOT, QDISC_PKG)
    modules = {f[:-3] for f in os.listdir(here) if f.endswith(".py")} - {
        "__init__", "base", "template"}
    assert modules == set(qdiscs.KINDS), "one module per registered kind"
    colors = set()
    for name, kind in qdiscs.KINDS.items():
        assert isinstance(kind, base.QdiscKind) and kind.name == name
        assert kind.module.startswith("sch_") and kind.doc
        assert kind.config or kind.project_module, name
        assert kind.limit_unit in ("packets", "bytes")
        spec = qdiscs.make_qdisc(name)
        assert spec.tc_args(10.0)[0] == spec.tc_kind
        assert kind.decode_xstats(b"") == {}
        colors.add(kind.color)
    assert len(colors) == len(qdiscs.KINDS), "each kind its own colour"


def test_template_documents_every_hook_of_the_base():
    hooks = {n for n, v in vars(base.QdiscKind).items() if not n.startswith("_")}
    documented = set(vars(template.Template))
    assert hooks <= documented, f"template.py lacks {sorted(hooks - documented)}"
    assert template.KIND.name not in qdiscs.KINDS


def test_register_refuses_a_second_kind_of_a_name():
    with pytest.raises(ValueError):
        qdiscs.register(qdiscs.KINDS["cake"])


def test_target_kinds_come_from_the_modules():
    assert set(qdiscs.TARGET_KINDS) == {"pie", "codel", "fq_codel", "cake"}
    assert qdiscs.make_qdisc("cake").info.target_ms(qdiscs.make_qdisc("cake").params) == 5.0
