"""bufferbloat: a Mininet-based emulation suite for bufferbloat and AQM experiments.

Modules: ``topology`` (dumbbells), ``qdisc`` (the AQM registry), ``bottleneck`` (qdisc
trees), ``network`` (build/teardown), ``capabilities`` (what this kernel can do),
``traffic`` (the traffic parts: one module per kind), ``experiment`` and ``runner`` (measurements and run records),
``theory``, ``vm`` (the project VM), ``cli``.
"""

__version__ = "0.1.0"
