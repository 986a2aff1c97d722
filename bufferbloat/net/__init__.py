"""The emulated network: what is built, checked and torn down. Mininet is imported here
and nowhere below.

==============  ===========================================================================
``topology``    Topo classes and their validated parameters (rates, delays, buffers)
``qdisc``       the queue disciplines' registry (parameters, tc arguments, modules)
``pi``          the PI controller (its law, fixed point, netlink options)
``nlqdisc``     installs a qdisc tc cannot parse, as a command (one RTM_NEWQDISC)
``bottleneck``  the qdisc plan of every link direction (HTB root, the AQM as its leaf)
``capabilities`` what this kernel and machine can emulate (``bufferbloat check``)
``scaling``     rates scaled to what the machine sustains
``linktrace``   a bottleneck capacity that changes: mahimahi traces, step schedules
``network``     builds the network, owns its processes, restores sysctls
``cleanup``     what a run owns, for the next run to remove after a SIGKILL
``isolation``   network namespaces: which one a run is in, the global CCA list
==============  ===========================================================================

Imports ``core`` and ``netlink``; knows nothing of traffic, results or runs.
"""
