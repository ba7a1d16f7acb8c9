"""The package version, sent in `User-Agent` and `X-Tocsin-Client`.

hatchling reads it from here for the wheel's metadata, so there is one place
to bump.
"""

__version__ = "0.1.0"
