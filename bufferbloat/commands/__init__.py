"""The commands of the ``bufferbloat`` program, one module per command or per group of
related ones (:mod:`bufferbloat.commands.table` names each command's handler), and what
they share: scenario names and options (``common``), where the networks are built
(``placement``), and an error's one line and exit code (``errors``).

``bufferbloat.cli`` builds the parser from the table and loads a command's module only
when that command runs, so that ``bufferbloat --help`` imports none of them.
"""
