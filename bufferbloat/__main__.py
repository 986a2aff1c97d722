"""``python3 -m bufferbloat``: the command line."""
import sys

from .cli import console

sys.exit(console())
