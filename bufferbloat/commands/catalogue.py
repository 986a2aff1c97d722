"""``bufferbloat list``: the catalogue's scenarios, one line each."""

from bufferbloat.commands.common import scenarios


def cmd_list(_args):
    """List scenarios with one-line descriptions."""
    for name, scn in scenarios().items():
        print(f"{name:<16} {scn.description}")
    return 0
