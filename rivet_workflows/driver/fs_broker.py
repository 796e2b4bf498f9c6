"""kombu's ``filesystem://`` transport with atomic message files, for the embedded (no-server) broker.

kombu's own ``_put`` creates the message file and then writes it, so a worker scanning the folder can move
and read the file while it is still empty and die with ``JSONDecodeError`` ("Unrecoverable error"): seen
in the demo with several processes publishing. Here the payload is written to a hidden temporary name in
the same folder (which the reader ignores: it matches ``<stamp>_<uuid>.<queue>.msg`` only) and then
renamed into place with ``os.replace``, which is atomic on one filesystem.

The exchange table (``control/<exchange>.exchange``) has the same fault: kombu opens it with ``"wb"`` and
only then takes the lock, so a publisher reading the table in that window sees an empty file and fails
with ``JSONDecodeError`` (seen in the test suite under load). A missing table is created here by writing
a temporary file and hard-linking it into place, which either creates the whole file or finds one there.

Use: ``CELERY_BROKER_URL = "filesystem://"`` and ``CELERY_BROKER_TRANSPORT =
"rivet_workflows.driver.fs_broker:Transport"`` (an explicit transport wins over the URL scheme in kombu).
"""

from __future__ import annotations

import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

exchange_queue_t = filesystem.exchange_queue_t


class Channel(filesystem.Channel):
    """A filesystem channel whose ``_put`` publishes each message file atomically."""

    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        temporary = os.path.join(self.data_folder_out, f".{name}.tmp")
        try:
            with open(temporary, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(temporary, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc

    def _queue_bind(self, exchange: str, routing_key: str, pattern: str, queue: str) -> None:
        table = self._exchange_file(exchange)
        if not table.exists():
            self.control_folder.mkdir(exist_ok=True)
            row = exchange_queue_t(routing_key or "", pattern or "", queue or "")
            temporary = table.with_name(f".{table.name}.{uuid.uuid4()}.tmp")
            temporary.write_bytes(str_to_bytes(dumps([row])))
            try:
                os.link(temporary, table)  # atomic create-if-absent: whole file or FileExistsError
                return
            except FileExistsError:
                pass  # another process created it first: add our row under kombu's lock below
            except OSError:
                pass  # no hard links on this filesystem: kombu's own path
            finally:
                temporary.unlink(missing_ok=True)
        super()._queue_bind(exchange, routing_key, pattern, queue)


class Transport(filesystem.Transport):
    """The filesystem transport using :class:`Channel`."""

    Channel = Channel
