"""Raw netlink: qdisc and TCP socket statistics (``nlstats``), one request per call on a
socket kept open, decoded with ``struct``; no tc, no ss, no pyroute2.

Imports ``core`` only. The sampler process (``measure``) reads through it; a qdisc's own
statistics decoder is called from here.
"""
