"""Packaging for the MPTCP testbed: `pip install -e .` installs `run-scenario` (pyproject.toml names
the build backend).

The card's folders are the packages, each with all its subpackages: scenarios
(model, loader, schema), topologies (address plans and Mininet builders),
runners (probe, backends, collectors, results) and controller (os-ken apps).
tests/ and bench/ are the checkout's tools and stay out: the benchmark writes
bench/out beside itself and times bench/bare_mininet.py by its path.
tests/unit/test_packaging.py installs a wheel and imports every module.
"""
from setuptools import find_packages, setup

setup(
    name="mptcp-testbed",
    version="0.1.0",
    description="Mininet-based testbed for Multipath TCP experiments",
    python_requires=">=3.10",
    packages=find_packages(exclude=["tests", "tests.*", "bench", "bench.*"]),
    package_data={"scenarios": ["*.yaml", "schema.json"], "scenarios.traces": ["*.trace"]},
    install_requires=[
        "PyYAML>=6.0,<7",
        "pydantic>=2.6,<3",
        "rich>=13",
        "matplotlib>=3.7",
    ],
    extras_require={"vm": ["virtme-ng>=1.30"], "test": ["pytest>=8", "jsonschema>=4"]},
    entry_points={"console_scripts": ["run-scenario = runners.cli:main"]},
)
