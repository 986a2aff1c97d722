"""``python3 -m bufferbloat``: the command line."""
import sys

from .cli import main

sys.exit(main())
