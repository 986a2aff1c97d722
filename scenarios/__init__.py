"""The scenario catalogue: one module per experiment, each mostly data.

A scenario module defines ``SCENARIO``, a :class:`bufferbloat.run.scenario.Scenario`. The
catalogue is every module of this package that does; :func:`catalogue` lists them by name.
"""

import importlib
import pkgutil


def catalogue():
    """{name: Scenario} for every scenario module in this package, sorted by name."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        mod = importlib.import_module(f"{__name__}.{info.name}")
        scn = getattr(mod, "SCENARIO", None)
        if scn is not None:
            found[scn.name] = scn
    return dict(sorted(found.items()))
