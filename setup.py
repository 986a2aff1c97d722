"""What pyproject.toml cannot say: the package list. Every ``bufferbloat*`` package is
found (a new subpackage cannot be forgotten), and the design's top-level folders of
the checkout are mapped under the package, so that an installed copy puts nothing but
``bufferbloat`` into the import namespace: ``plots/`` -> ``bufferbloat.plots``,
``scenarios/`` -> ``bufferbloat.scenarios``, ``webserver/`` -> ``bufferbloat.webserver``,
``vm/`` (the project VM's files, package data) -> ``bufferbloat.vm.files``."""
from setuptools import find_packages, setup

FOLDERS = {"plots": "bufferbloat.plots", "scenarios": "bufferbloat.scenarios",
           "webserver": "bufferbloat.webserver", "vm": "bufferbloat.vm.files"}

packages = find_packages(include=["bufferbloat", "bufferbloat.*"])
package_dir = {}
for folder, name in FOLDERS.items():
    package_dir[name] = folder
    packages += [name] + [f"{name}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir=package_dir)
