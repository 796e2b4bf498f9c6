"""kombu's ``filesystem://`` transport with atomic message files, for the embedded (no-server) broker.

kombu's own ``_put`` creates the message file and then writes it, so a worker scanning the folder can move
and read the file while it is still empty and die with ``JSONDecodeError`` ("Unrecoverable error"): seen
in the demo with several processes publishing. Here the payload is written to a hidden temporary name in
the same folder (which the reader ignores: it matches ``<stamp>_<uuid>.<queue>.msg`` only) and then
renamed into place with ``os.replace``, which is atomic on one filesystem.

Use: ``CELERY_BROKER_URL = "filesystem://"`` and ``CELERY_BROKER_TRANSPORT =
"rivet_workflows.fs_broker:Transport"`` (an explicit transport wins over the URL scheme in kombu).
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


class Transport(filesystem.Transport):
    """The filesystem transport using :class:`Channel`."""

    Channel = Channel
