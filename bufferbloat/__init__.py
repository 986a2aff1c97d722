"""bufferbloat: a Mininet-based emulation suite for bufferbloat and AQM experiments.

Modules (docs/ARCHITECTURE.md): ``cli``; the run: ``engine`` (the pipeline), ``scenario``,
``identity``, ``scaling``, ``params``, ``network``, ``topology``, ``qdisc``,
``bottleneck``, ``capabilities``, ``cleanup``, ``traffic`` (the traffic parts: one module
per kind), ``udptool``, ``sampler``, ``nlstats``, ``machine``; what it leaves:
``results``, ``series``, ``metrics``, ``stats``, ``health``, ``theory``, ``sweep``;
shared: ``signals``, ``atomic``, ``errors``; ``recipes`` (measurements for the fidelity
tests and benchmarks); ``vm`` (the project VM's host side).
"""

__version__ = "0.1.0"
