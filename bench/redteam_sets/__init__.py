"""The red-team sets of `bench/redteam.py`: repositories built from real PyPI sdists with a
history of our own making (`repos`), and trajectories written against them (`trajectories`)."""
