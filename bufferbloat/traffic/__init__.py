"""Traffic parts: the interface and registry (:mod:`.base`) and one module per kind.

The kinds register when :mod:`.kinds` is imported, where the registry's lookups are
(:func:`~bufferbloat.traffic.kinds.part_class`): importing the package imports
nothing, so that a tool process started in a namespace (``python3 -m
bufferbloat.traffic.udptool``: 1-2 s of imports under TCG) loads only what it uses. A
new kind is one module with a :class:`~bufferbloat.traffic.base.TrafficPart` subclass
decorated with ``@register("name")``, and one line in :mod:`.kinds`."""
