"""Packaging for the MPTCP testbed: `pip install -e .` installs `run-scenario`.

The card's folders are the packages: scenarios (model, loader, schema),
topologies (address plans and Mininet builders), runners (probe, backends,
collectors, results) and controller (os-ken apps).
"""
from setuptools import setup

setup(
    name="mptcp-testbed",
    version="0.1.0",
    description="Mininet-based testbed for Multipath TCP experiments",
    python_requires=">=3.10",
    packages=["scenarios", "scenarios.spec", "topologies", "runners", "controller"],
    package_data={"scenarios": ["*.yaml", "schema.json"]},
    install_requires=[
        "PyYAML>=6.0,<7",
        "pydantic>=2.6,<3",
        "rich>=13",
        "matplotlib>=3.7",
    ],
    extras_require={"vm": ["virtme-ng>=1.30"], "test": ["pytest>=8", "jsonschema>=4"]},
    entry_points={"console_scripts": ["run-scenario = runners.cli:main"]},
)
