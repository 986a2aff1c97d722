"""Running points: a scenario as data, a run's identity, the engine's pipeline, sweeps.

==============  ===========================================================================
``scenario``    Scenario: topology, traffic, knobs, variants, sweeps, figures, as data
``identity``    a run's fully resolved configuration and its key
``engine``      one run: resolve, network, measure, collect, metrics, health, write
``derive``      knobs filled from another point's recorded result
``sweep``       sweeps and the catalogue, resumable, with progress
``executor``    where a sweep's points run: one after another here (the default)
``cluster``     ... or on Dask workers, each point in its own namespace or the worker's VM
``where``       here or in the project VM
==============  ===========================================================================

Imports every layer below (``core``, ``vm`` .. ``results``); the catalogue is passed in by the
commands, never imported from here.
"""
