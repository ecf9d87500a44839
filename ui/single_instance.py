"""One window per memory: starting Mnemo again on the same data folder brings the running window
to the front instead of opening a second one (two would run two sets of memory workers on one
database). A different `--data-dir` is a different memory and may run beside it.

QLocalServer/QLocalSocket: a named local socket derived from the data folder's path.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

CONNECT_TIMEOUT_MS = 500


def server_name(data_dir: Path) -> str:
    real = os.path.realpath(str(data_dir))
    return "mnemo-" + hashlib.sha1(real.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def ask_running_instance(data_dir: Path) -> bool:
    """True when a Mnemo already runs on `data_dir`; connecting is what asks it to show its window."""
    sock = QLocalSocket()
    sock.connectToServer(server_name(data_dir))
    if not sock.waitForConnected(CONNECT_TIMEOUT_MS):
        return False
    sock.disconnectFromServer()
    return True


class InstanceServer(QObject):
    """Listens for later starts on the same data folder; `activated` asks the window to come forward."""

    activated = Signal()

    def __init__(self, data_dir: Path, parent: QObject | None = None):
        super().__init__(parent)
        self.name = server_name(data_dir)
        self.server = QLocalServer(self)
        QLocalServer.removeServer(self.name)  # a socket file left by a crashed instance
        self.listening = self.server.listen(self.name)
        self.server.newConnection.connect(self._on_connection)

    def _on_connection(self) -> None:
        while self.server.hasPendingConnections():
            sock = self.server.nextPendingConnection()
            sock.abort()  # a connection is the whole message
            sock.deleteLater()
        self.activated.emit()

    def close(self) -> None:
        self.server.close()
