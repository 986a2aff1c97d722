"""Where this code stands on disk: the one module that knows the layout of the files.

In a checkout, the design's top-level folders (``scenarios/``, ``plots/``,
``webserver/``, ``vm/``) stand beside the ``bufferbloat`` package; everything else
asks here. Standard library only.
"""

from pathlib import Path

#: the ``bufferbloat`` package's directory
PACKAGE_DIR = Path(__file__).resolve().parents[1]
#: the directory a child process needs on PYTHONPATH to import this package
IMPORT_ROOT = PACKAGE_DIR.parent
#: the checkout: shared with the project VM as /bb
SOURCE_ROOT = IMPORT_ROOT
#: the project VM's guest files (provision.sh, packages.txt, guest/)
VM_DIR = SOURCE_ROOT / "vm"
#: the compiled queue sampler's source
CSAMPLER_DIR = PACKAGE_DIR / "measure" / "csampler"
#: where compiled helpers are built
BUILD_DIR = SOURCE_ROOT / ".build"
