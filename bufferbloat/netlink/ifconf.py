"""An interface's flags, MAC and IPv4 address, and a Linux bridge's ports, set in this
process: what ``ifconfig`` and ``brctl`` do, through the same ioctls, without their
processes.

Mininet configures every interface through its node's shell: ``ifconfig DEV up``,
``ifconfig DEV down; hw ether MAC; up``, ``ifconfig DEV IP/N``, ``ifconfig lo up``, and a
Linux bridge with ``brctl addbr``/``addif``. Under TCG each is a round trip through the
shell (bash forks, execs the tool: ~75 ms); a network of 20 senders made 191 of them
(13.6 s of its build, bench/bench_build.py). :mod:`bufferbloat.net.fastmn` calls these
instead, inside the node's namespace (:func:`bufferbloat.netlink.nlstats.in_netns`).

The ioctls are the ones net-tools' ifconfig and bridge-utils' brctl issue
(include/uapi/linux/sockios.h): ``SIOCGIFFLAGS``/``SIOCSIFFLAGS``, ``SIOCSIFHWADDR``,
``SIOCSIFADDR``/``SIOCSIFNETMASK``, ``SIOCBRADDBR``/``SIOCBRDELBR``/
``SIOCBRADDIF``. Each raises OSError naming the device and what was refused.
"""

import fcntl
import ipaddress
import socket
import struct

from bufferbloat.netlink.nsconfig import IFNAMSIZ, IFREQ_SIZE, ifname

SIOCGIFFLAGS, SIOCSIFFLAGS = 0x8913, 0x8914
SIOCSIFADDR, SIOCSIFNETMASK = 0x8916, 0x891C
SIOCSIFHWADDR = 0x8924
SIOCBRADDBR, SIOCBRDELBR, SIOCBRADDIF = 0x89A0, 0x89A1, 0x89A2
IFF_UP = 0x1
ARPHRD_ETHER = 1


def _ifreq(dev, payload=b""):
    return struct.pack(f"{IFNAMSIZ}s", ifname(dev)) + payload.ljust(IFREQ_SIZE - IFNAMSIZ, b"\0")


def _ioctl(sock, request, arg, dev, what):
    try:
        return fcntl.ioctl(sock.fileno(), request, arg)
    except OSError as exc:
        raise OSError(exc.errno, f"{dev}: {what}: {exc.strerror}") from None


def _sockaddr_in(ip):
    return struct.pack("=H", socket.AF_INET) + b"\0\0" + socket.inet_aton(str(ip)) + bytes(8)


def _socket():
    return socket.socket(socket.AF_INET, socket.SOCK_DGRAM)


def _set_up(sock, dev, up):
    flags = struct.unpack_from("=h", _ioctl(sock, SIOCGIFFLAGS, _ifreq(dev), dev,
                                            "reading its flags"), IFNAMSIZ)[0]
    flags = (flags | IFF_UP) if up else (flags & ~IFF_UP)
    _ioctl(sock, SIOCSIFFLAGS, _ifreq(dev, struct.pack("=h", flags)), dev,
           "setting it " + ("up" if up else "down"))


def set_up(dev, up=True):
    """``ifconfig DEV up`` (or ``down``), in this thread's namespace."""
    with _socket() as sock:
        _set_up(sock, dev, up)


def set_mac(dev, mac):
    """``ifconfig DEV down; ifconfig DEV hw ether MAC; ifconfig DEV up``."""
    octets = bytes(int(x, 16) for x in mac.split(":"))
    if len(octets) != 6:
        raise ValueError(f"not a MAC address: {mac!r}")
    with _socket() as sock:
        _set_up(sock, dev, False)
        _ioctl(sock, SIOCSIFHWADDR, _ifreq(dev, struct.pack("=H", ARPHRD_ETHER) + octets),
               dev, f"setting its MAC to {mac}")
        _set_up(sock, dev, True)


def set_ipv4(dev, ip, prefix_len, up=False):
    """``ifconfig DEV IP/N [up]``: the address, then its netmask (as net-tools does; the
    kernel derives the broadcast from them), then up if asked."""
    iface = ipaddress.IPv4Interface(f"{ip}/{int(prefix_len)}")
    with _socket() as sock:
        _ioctl(sock, SIOCSIFADDR, _ifreq(dev, _sockaddr_in(iface.ip)), dev,
               f"setting its address {iface}")
        _ioctl(sock, SIOCSIFNETMASK, _ifreq(dev, _sockaddr_in(iface.netmask)), dev,
               f"setting its netmask {iface.netmask}")
        if up:
            _set_up(sock, dev, True)


def bridge_start(bridge, ports):
    """What Mininet's LinuxBridge.start runs through its shell, without STP: the bridge
    down and deleted if it exists, added, each port added, up."""
    name = ifname(bridge).ljust(IFNAMSIZ, b"\0")
    with _socket() as sock:
        try:
            _set_up(sock, bridge, False)
            fcntl.ioctl(sock.fileno(), SIOCBRDELBR, name)
        except OSError:   # no such bridge: nothing to delete (brctl delbr's error too)
            pass
        _ioctl(sock, SIOCBRADDBR, name, bridge, "adding the bridge")
        for port in ports:
            index = socket.if_nametoindex(port)
            _ioctl(sock, SIOCBRADDIF, _ifreq(bridge, struct.pack("=i", index)), bridge,
                   f"adding port {port}")
        _set_up(sock, bridge, True)
