"""What a store knows of its items' stored vector hashes, kept between batches (no I/O).

A put embeds only the texts whose hash differs from the one stored for its field; to
know the stored hashes of a key it has not written itself, a batch reads them first
(one round trip, then the embedding, then the write). ``TextHashes`` remembers, per
item, the ``{field: text_hash}`` that this store's last write of it left stored, so a
later put of that key can embed its changed texts first and send its writes with the
batch's reads: one round trip.

An entry can be stale: another process may have written the item since. A stale entry
never costs a wrong vector where a text changed (a new text's vector is written under
its own hash whatever was stored), and where the entry says a text is unchanged the
write keeps that vector only on the condition that it still holds that hash
(``queries.check_vector_request``); a condition that fails makes the batch read the
stored hashes and write the vectors they lack (``plan.one_trip``). So an entry only
decides how many round trips a put takes, never what ends up stored.

Bounded: the least recently used entries go first past ``max_items``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping

DEFAULT_MAX_ITEMS = 50_000

Hashes = Mapping[str, str]  # field -> text hash


class TextHashes:
    """Item id -> the ``{field: text_hash}`` of its stored vectors, as this store last wrote them.

    Thread-safe: a sync store may be shared by threads.
    """

    def __init__(self, max_items: int = DEFAULT_MAX_ITEMS) -> None:
        self.max_items = max_items
        self._entries: OrderedDict[str, dict[str, str]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, iid: str) -> dict[str, str] | None:
        """The hashes this store last left stored for item ``iid`` ({} = no vectors), or None: not known."""
        with self._lock:
            hashes = self._entries.get(iid)
            if hashes is None:
                return None
            self._entries.move_to_end(iid)
            return dict(hashes)

    def learn(self, entries: Iterable[tuple[str, Hashes]]) -> None:
        """Remember what just landed: each item's ``{field: text_hash}`` ({} after a delete)."""
        with self._lock:
            for iid, hashes in entries:
                self._entries[iid] = dict(hashes)
                self._entries.move_to_end(iid)
            while len(self._entries) > self.max_items:
                self._entries.popitem(last=False)

    def forget(self, iids: Iterable[str]) -> None:
        """Drop what is known of these items (a write of theirs failed, or its outcome is unknown)."""
        with self._lock:
            for iid in iids:
                self._entries.pop(iid, None)

    def snapshot(self) -> dict[str, dict[str, str]]:
        """A copy of every entry (for tests and benchmarks that replay from a known state)."""
        with self._lock:
            return {iid: dict(h) for iid, h in self._entries.items()}

    def restore(self, entries: Mapping[str, Hashes]) -> None:
        """Replace every entry with ``entries`` (a ``snapshot``)."""
        with self._lock:
            self._entries = OrderedDict((iid, dict(h)) for iid, h in entries.items())
