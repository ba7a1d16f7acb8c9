"""The types of results and of nested request values, generated from the
service's OpenAPI document (see `_models`), under their public names:

    from tocsin.types import Event, EventPriority

`StreamMessage` is what `client.stream()` yields: an `Event`, an `Insight` or
an `InsightDeleted`.
"""

from ._models import *  # noqa: F403 - the generated module's __all__ is the list
from ._models import __all__ as __all__  # noqa: F401
from .resources.events import Timestamp as Timestamp
from .resources.insights import InsightValue as InsightValue
from .resources.stats import Instant as Instant
