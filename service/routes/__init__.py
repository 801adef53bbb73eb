"""One resource per module."""
