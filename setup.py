"""Install the suite: packages bufferbloat, scenarios, plots, webserver and the
``bufferbloat`` console command. The system packages it drives (mininet, iperf3,
iproute2, ...) come from Debian: see scripts/host-packages.txt."""
from setuptools import setup

setup(
    name="bufferbloat",
    version="0.1.0",
    description="Mininet-based emulation suite for bufferbloat and AQM experiments",
    packages=["bufferbloat", "scenarios", "plots", "webserver"],
    python_requires=">=3.10",
    install_requires=[],  # mininet, numpy, matplotlib come from Debian (python3-*)
    extras_require={"test": ["pytest"]},
    entry_points={"console_scripts": ["bufferbloat=bufferbloat.cli:console"]},
)
