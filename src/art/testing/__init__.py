"""Test and benchmark helpers: tiny models made on the spot."""
