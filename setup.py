"""Packaging glue: examples/ installs as the subpackage `art.examples` (metadata lives in pyproject.toml)."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages("src"), "art.examples", *(f"art.examples.{p}" for p in find_packages("examples"))],
    package_dir={"": "src", "art.examples": "examples"},
)
