"""bufferbloat: a Mininet-based emulation suite for bufferbloat and AQM experiments.

The package reads as its layers, each importing only those below it (docs/design/architecture.md;
``tests/unit/test_layers.py`` holds every import to this order):

==============  ===========================================================================
``core``        errors, parameters, atomic writes, signals and processes, statistics,
                the series schema, the machine's record, where the files are
``vm``          the project VM's host side (standard library and ``core`` only)
``netlink``     raw netlink readers: qdisc and TCP socket statistics
``net``         the network: topology, queue disciplines, the bottleneck's plan,
                capabilities, scaling, building and cleaning up (Mininet lives here)
``measure``     the sampler process and its compiled queue helper
``webserver``   the page the web fetches load (a process the ``web`` kind starts)
``traffic``     the traffic parts, one module per kind
``results``     run records, metrics, flow metrics, health, theory, headline, exports
``run``         scenarios as data, a run's identity, the engine, sweeps, where to run
``scenarios``   the catalogue (one module per experiment, mostly data)
``plots``       figures and the report, from stored results
(top)           the commands: ``cli``, ``commands``, ``summary``, ``describe``, ``compare``
==============  ===========================================================================

``scenarios``, ``plots`` and ``webserver`` are the design's top-level folders of the
checkout; they are imported as ``bufferbloat.scenarios`` etc. In a checkout a finder
(below) maps them from beside this package; an installed package holds them under it
(pyproject.toml's package-dir), so nothing but ``bufferbloat`` enters the import
namespace.
"""

import importlib.abc
import importlib.util
import os
import sys

__version__ = "0.1.0"

#: the design's top-level folders that are subpackages of bufferbloat
FOLDERS = ("scenarios", "plots", "webserver")


class _CheckoutFolders(importlib.abc.MetaPathFinder):
    """Finds ``bufferbloat.<folder>`` in the checkout's top-level folder of that name
    (only where the package does not hold it itself: an installed copy)."""

    def __init__(self, root):
        self.root = root

    def find_spec(self, fullname, path=None, target=None):
        pkg, _, name = fullname.partition(".")
        if pkg != __name__ or name not in FOLDERS:
            return None
        folder = os.path.join(self.root, name)
        return importlib.util.spec_from_file_location(
            fullname, os.path.join(folder, "__init__.py"),
            submodule_search_locations=[folder])


def _install_finder():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    if all(os.path.isdir(os.path.join(here, f)) for f in FOLDERS):
        return                      # installed: the folders are in the package
    if not any(isinstance(f, _CheckoutFolders) for f in sys.meta_path):
        sys.meta_path.append(_CheckoutFolders(root))


_install_finder()
