"""Packages for setuptools (the rest of the metadata is in pyproject.toml).

The shipped series stay in patches/ at the repository root for the checkout and travel in the
wheel as the package data folder patchkit/_series (see patchkit/locations.py).
"""

from setuptools import find_packages, setup

setup(packages=find_packages(include=["patchkit", "patchkit.*"]) + ["patchkit._series"],
      package_dir={"patchkit._series": "patches"})
