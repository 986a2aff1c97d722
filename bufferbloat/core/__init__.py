"""Core helpers every layer may use: nothing here imports another part of bufferbloat.

==============  ===========================================================================
``errors``      the errors a command turns into exit codes (UsageError: 2) and the codes
``params``      typed, ranged parameters; tool arguments; environment numbers; --out
``atomic``      atomic writes (JSON, text, bytes): temporary file, fsync, rename
``signals``     this process's signals; processes we started, ended by PID
``stats``       percentiles, CoV, Jain's index, eCDF
``series``      the series schema (every series' columns)
``machine``     where and with what a run happened (host, kernel, tool versions)
``paths``       where the code stands on disk (checkout or installed)
==============  ===========================================================================

Division of labour: these modules know no network, no run, no scenario.
"""
