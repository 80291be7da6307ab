"""The floor every room may stand on: small checks and helpers that import nothing else of ours."""
