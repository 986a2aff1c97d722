"""Traffic parts: the interface and registry (:mod:`.base`) and one module per kind.

Importing the package registers every kind below; a new kind is one module with a
:class:`~bufferbloat.traffic.base.TrafficPart` subclass decorated with
``@register("name")``, and one line here (or an import of its module by whoever uses
it, e.g. a test)."""

from bufferbloat.traffic import iperf, irtt, netperfmeter, ping, rrul, udpstream, web  # noqa: F401  (they register)
