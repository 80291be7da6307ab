"""`python -m art ...` runs the `art` command."""

from art.cli import main

main()
