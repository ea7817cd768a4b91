"""Data shapes plugins receive."""
