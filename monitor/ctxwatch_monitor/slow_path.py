"""The per-client budget of the slow decoding paths, so that one sender cannot slow the others down.

Most exports are read by the fast paths: the protobuf runtime for a whole request, the schema-checked reader
(`otlp_json`) for each OTLP/JSON span and resource. What they cannot read goes to a slow path: a JSON object
to `google.protobuf.json_format` (about eight times the cost), a protobuf request the runtime refused to a walk
span by span. A sender can push every span it sends there on purpose (base64 ids, floats for integers, one
invalid byte in a protobuf body), and every sender shares the one interpreter that decodes. So each client
(`clients.client_key`: its address, an IPv6 one by its /64, never its port; as for the admission share) has a
bucket of slow reads, refilled at `rate` a second up to `burst`. `SlowPathBudget.allowance(client)` is taken
for each request and the decoder calls it before every slow read. A request's first slow read needs something
in the bucket; from there it may make up to `burst` slow reads, running the bucket into debt, so any request
of at most `burst` slow reads is accepted once the bucket has refilled above zero, and a client's slow reads
average `rate` a second at most (a burst of twice `burst` at the very most). Otherwise `SlowPathSpent`
stops the decoding: the request is answered 429 with `Retry-After` (the OTLP specification's answer for
"more requests than the client is allowed"), nothing of it applied, and the exporter sends it again later;
a request that alone needs more than `burst` slow reads is answered 413 (never retried: it would never fit).
The reads a refused request made stay charged. While a client's bucket is spent (`spent`), its OTLP/JSON
requests are refused before their body is parsed (`json.loads` of a body is a cost only JSON pays, and a
client in debt would be refused at its first slow read anyway); its protobuf requests are still read, since
the protobuf runtime reads a well-formed one at a fraction of that cost and a collector's are protobuf.
Each request is charged once, when it is decoded, however many times the group commit applies it.
Thread-safe: requests are decoded on several threads.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

MAX_CLIENTS = 4096  # clients whose buckets are kept; the least recently seen one past it starts full again


class SlowPathSpent(Exception):
    """The client's budget of slow reads is spent (`status` 429), or the request alone needs more than it
    saves up (413): the request is refused, nothing of it applied."""

    def __init__(self, rate: float, burst: int, reads: int) -> None:
        self.status = 413 if reads >= burst else 429
        what = (f"this request needs more than {burst} spans and resources read by the slow decoding path "
                f"(split it)" if self.status == 413 else
                f"this client's budget of spans and resources read by the slow decoding path is spent "
                f"({rate:g} a second, {burst} at once)")
        super().__init__(f"{what}: send OTLP/JSON as the OTLP specification writes it (lowerCamelCase keys, hex "
                         f"ids, integers as numbers or decimal strings) or valid protobuf")


class Allowance:
    """One request's draw on its client's bucket: call it before each slow read."""

    __slots__ = ("_budget", "_client", "reads")

    def __init__(self, budget: SlowPathBudget, client: str) -> None:
        self._budget, self._client, self.reads = budget, client, 0

    def __call__(self) -> None:
        self._budget.take(self._client, self.reads)
        self.reads += 1


class SlowPathBudget:
    """Token buckets of slow reads per client (see the module docstring); `rate` 0 is no limit."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, burst
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # client -> (tokens, when)
        self._lock = threading.Lock()

    def allowance(self, client: str) -> Allowance:
        return Allowance(self, client)

    def spent(self, client: str) -> bool:
        """Whether `client`'s bucket is empty or in debt now: its next slow read would be refused."""
        if not self.rate:
            return False
        with self._lock:
            saved = self._buckets.get(client)
        if saved is None:
            return False
        tokens, when = saved
        return tokens + (time.monotonic() - when) * self.rate <= 0

    def refusal(self) -> SlowPathSpent:
        """The 429 of a request refused because its client's budget is spent (before any read of it)."""
        return SlowPathSpent(self.rate, self.burst, 0)

    def take(self, client: str, reads: int) -> None:
        """One more slow read for `client`, whose request has made `reads` (`SlowPathSpent` when refused)."""
        if not self.rate:
            return
        with self._lock:
            now = time.monotonic()
            tokens, when = self._buckets.pop(client, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - when) * self.rate)
            refused = reads >= self.burst or (reads == 0 and tokens <= 0)
            self._buckets[client] = (tokens if refused else tokens - 1, now)
            if len(self._buckets) > MAX_CLIENTS:
                self._buckets.popitem(last=False)
        if refused:
            raise SlowPathSpent(self.rate, self.burst, reads)
