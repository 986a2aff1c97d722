"""``python3 -m bufferbloat.vm``: see :mod:`bufferbloat.vm.cli`."""

import sys

from bufferbloat.vm.cli import main

sys.exit(main())
