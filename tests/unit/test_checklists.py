"""docs/design/architecture.md's checklists, tried: each is carried out in a copy of the
tree, exactly as written, and what it promises is checked in a fresh interpreter.

* **A qdisc**: ``net/qdiscs/template.py`` copied to ``toyq.py`` with its names changed,
  one import and one ``register(toyq.KIND)`` line in the registry: ``bufferbloat check``
  lists its kernel module, ``bufferbloat describe`` offers it as a qdisc with its
  parameters, a scenario runs with ``--set qdisc=toyq`` into a run configuration, and
  the figures give it its colour.
* **A traffic kind**: ``tests/kinds/pyflow.py`` is such a kind, run through the whole
  pipeline by ``tests/host/test_newkind_host.py`` (this kernel) and
  ``tests/vm/test_newkind_vm.py`` (the project VM): not repeated here.
"""

import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOPS = ("bufferbloat", "plots", "scenarios", "webserver")

PROBE = r"""
import json, subprocess, sys
from bufferbloat.net.qdiscs import KINDS, make_qdisc
from bufferbloat.plots.palette import QDISC_COLORS
from bufferbloat.run.resolved import resolve_run
from bufferbloat.scenarios import catalogue
run = resolve_run(catalogue()["a2_pie"], {"qdisc": "toyq", "qdisc.target_ms": "7"},
                  quick=True, max_rate_mbit=None)
spec = make_qdisc("toyq", limit_pkts=50)
out = {
    "kinds": list(KINDS),
    "color": QDISC_COLORS.get("toyq"),
    "config_qdisc": run.config["qdisc"],
    "tc_args": KINDS["toyq"].tc_args(spec.params, 10.0),
    "check": subprocess.run([sys.executable, "-m", "bufferbloat", "check"],
                            capture_output=True, text=True).stdout,
    "describe": subprocess.run([sys.executable, "-m", "bufferbloat", "describe", "a2_pie"],
                               capture_output=True, text=True).stdout,
}
print(json.dumps(out))
"""


def _copy(tmp_path):
    for top in TOPS:
        shutil.copytree(os.path.join(ROOT, top), tmp_path / top,
                        ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.o"))


def test_a_qdisc_from_the_template_shows_up_in_check_describe_and_the_figures(tmp_path):
    import json
    _copy(tmp_path)
    qdiscs = tmp_path / "bufferbloat" / "net" / "qdiscs"
    text = (qdiscs / "template.py").read_text()
    for old, new in (("class Template", "class Toyq"), ("KIND = Template()", "KIND = Toyq()"),
                     ('"template"', '"toyq"'), ("sch_template", "sch_toyq"),
                     ("CONFIG_NET_SCH_TEMPLATE", "CONFIG_NET_SCH_TOYQ"),
                     ('color = "#333333"', 'color = "#123456"')):
        assert old in text, old                # the template still reads as the checklist
        text = text.replace(old, new)
    (qdiscs / "toyq.py").write_text(text)
    registry = (qdiscs / "__init__.py").read_text()
    assert "register(cake.KIND)\n" in registry
    registry = registry.replace("register(cake.KIND)\n", "register(cake.KIND)\n"
                                "from bufferbloat.net.qdiscs import toyq  # noqa: E402\n"
                                "register(toyq.KIND)\n")
    (qdiscs / "__init__.py").write_text(registry)
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=str(tmp_path)),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["kinds"][-1] == "toyq"
    assert out["color"] == "#123456"
    assert out["config_qdisc"] == {"kind": "toyq", "params": {
        "limit_pkts": 1000, "target_ms": 7, "ecn": False}}
    assert out["tc_args"][:3] == ["toyq", "limit", "50"]
    assert any(line.split()[:2] == ["sch_toyq", "qdisc"] for line in out["check"].splitlines())
    assert "one of fifo, pie, red, codel, fq_codel, pi, cake, toyq" in out["describe"]
