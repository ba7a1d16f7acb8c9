"""schemathesis hooks for tests/tools/fuzz.rs (loaded through SCHEMATHESIS_HOOKS).

A fresh Idempotency-Key for every request that carries a valid one. The
generated keys come from a small space ("0", "00", ...), so unrelated
requests would share keys: a second request with another body gets 422 (the
key is taken), and a second one with the same body gets the first one's
answer replayed, naming a record that a later request may have deleted
(schemathesis's stateful phase reports that as "created resource not
found"). Both are what an Idempotency-Key promises, and the in_process
idempotency tests hold them; here each request is its own. Invalid keys are
left as generated, so the header's validation is still fuzzed.
"""

import re
import uuid

import schemathesis

HEADER = "Idempotency-Key"
# The document's pattern for the header (ingest/src/openapi/operations.rs),
# and its 255-character limit.
VALID = re.compile(r"[!-~](?:[ -~]*[!-~])?")


@schemathesis.hook
def before_call(context, case, kwargs):
    # Only requests meant to be valid: editing a case makes schemathesis
    # check it again, and a negative one (a header left out on purpose)
    # would then be sent as a positive one. A negative request is refused
    # whatever its key, so sharing one changes nothing for it.
    if case.meta is not None and case.meta.generation.mode.is_negative:
        return
    key = (case.headers or {}).get(HEADER)
    if isinstance(key, str) and len(key) <= 255 and VALID.fullmatch(key):
        case.headers[HEADER] = str(uuid.uuid4())
