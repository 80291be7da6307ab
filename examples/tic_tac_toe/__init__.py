"""Tic-tac-toe against a seeded random opponent."""
