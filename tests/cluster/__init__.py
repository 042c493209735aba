"""Tests that start a real cluster scheduler on this machine (tests/cluster/slurm.py)."""
