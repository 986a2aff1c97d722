"""Measurement while a run goes: the sampler process (``sampler``: every 10 ms the
bottleneck's qdiscs and the flows' TCP sockets) and its compiled queue helper
(``csampler/``, C, built on first use).

Imports ``core`` and ``netlink``; is started by the engine (``run``) as a child process.
"""
