"""`NOT_GIVEN`: an argument the caller left out, told apart from None.

For most arguments None and leaving the argument out mean the same: the
field is not sent and the service's default applies. An update is different
(`devices.update`, `PATCH /v1/devices/{id}`): a field left out stays as it
is, and None clears it, sent as JSON null. Its arguments therefore default
to NOT_GIVEN, as openai-python's do, and NOT_GIVEN can be passed to say
"leave this one alone" from code that builds the arguments:

    client.devices.update(device_id, name=new_name if new_name else NOT_GIVEN)
"""

from __future__ import annotations

from typing import Literal, TypeVar, Union

T = TypeVar("T")


class NotGiven:
    """The type of `NOT_GIVEN`. Falsy, so `if value:` treats it as nothing;
    tell it from None with `isinstance(value, NotGiven)`."""

    def __bool__(self) -> Literal[False]:
        return False

    def __repr__(self) -> str:
        return "NOT_GIVEN"


#: An argument that may be left out: its value, or NOT_GIVEN.
NotGivenOr = Union[T, NotGiven]

#: The default of an argument whose None means something (clearing a field).
NOT_GIVEN = NotGiven()
