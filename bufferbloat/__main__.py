"""``python3 -m bufferbloat``: the command line."""
import sys

from bufferbloat.cli import console

sys.exit(console())
