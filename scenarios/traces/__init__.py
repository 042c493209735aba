"""Rate traces in Mahimahi's format that the testbed ships (made by gen.py), for a path's or link's `trace:`."""
