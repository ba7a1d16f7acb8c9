"""The API's resources, one module each, each with a sync and an async class."""

from .channels import AsyncChannels, Channels
from .devices import AsyncDevices, Devices
from .events import AsyncEvents, Events
from .insights import AsyncInsights, Insights
from .stats import AsyncStats, Stats
from .users import AsyncUsers, Users

__all__ = [
    "Events",
    "AsyncEvents",
    "Devices",
    "AsyncDevices",
    "Channels",
    "AsyncChannels",
    "Users",
    "AsyncUsers",
    "Insights",
    "AsyncInsights",
    "Stats",
    "AsyncStats",
]
