"""A Ditto WebSocket client (/ws/2) for the twin tests: websocket-client
with HTTP Basic at the upgrade, every wait bounded by the socket's
timeout."""

from __future__ import annotations

import base64
import json

import websocket


class DittoWs:
    def __init__(self, broker, user: str, password: str, timeout: float = 10, query: str = ""):
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        self.ws = websocket.create_connection(
            f"ws://{broker.host}:{broker.http_port}/ws/2{query}",
            header=[f"Authorization: Basic {token}"], timeout=timeout)

    def send_text(self, text: str) -> None:
        self.ws.send(text)

    def send(self, envelope: dict) -> None:
        self.ws.send(json.dumps(envelope))

    def recv_text(self) -> str:
        return self.ws.recv()

    def recv(self) -> dict:
        return json.loads(self.ws.recv())

    def control(self, text: str) -> None:
        """Sends a START/STOP and awaits its acknowledgement."""
        self.ws.send(text)
        assert self.ws.recv() == text.split("?")[0] + ":ACK"

    def close(self) -> None:
        self.ws.close()


def envelope(topic: str, path: str = "/", value=None, **headers) -> dict:
    message = {"topic": topic, "headers": headers, "path": path}
    if value is not None:
        message["value"] = value
    return message
