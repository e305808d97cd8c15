"""The type the provider batch example extracts: the number a document names.

The fake batch server in `tests/_provider_batch_server.py` answers a document `doc N` with
`{"n": N}` (and, by N, with the failures real jobs have: no JSON the first time, a refused
request, a server error), so the command can be tried end to end without a key.
"""

from pydantic import BaseModel


class Number(BaseModel):
    n: int
