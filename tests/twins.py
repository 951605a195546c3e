"""Support for the twin API's tests: a throwaway PostgreSQL cluster (the
same recipe as crates/ferry-twins/tests/support/postgres.rs) and a small
HTTP client for Ditto's API on a started Ferry."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import tempfile
import time

import requests


def _pg_bin() -> str:
    found = shutil.which("initdb")
    if found:
        return os.path.dirname(found)
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    assert versions, "PostgreSQL's initdb (apt install postgresql; scripts/test.sh does)"
    return os.path.dirname(versions[-1])


class PostgresCluster:
    """initdb + pg_ctl in a temporary directory, on a Unix socket there; as
    the postgres user when run as root (PostgreSQL refuses root)."""

    def __init__(self):
        self.bin = _pg_bin()
        self.dir = tempfile.mkdtemp(prefix="ferry-pg-")
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.dir, "postgres")
        self._run("initdb", "-D", f"{self.dir}/data", "-U", "ferry", "--auth=trust", "-E", "UTF8")
        self._run("pg_ctl", "-D", f"{self.dir}/data", "-l", f"{self.dir}/log", "-w",
                  "-o", f"-k {self.dir} -c listen_addresses=''", "start")
        self.databases = 0

    def _run(self, program: str, *args: str) -> None:
        cmd = [os.path.join(self.bin, program), *args]
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    def new_database(self) -> str:
        """A fresh, empty database; returns its connection string."""
        self.databases += 1
        name = f"twins{self.databases}"
        subprocess.run(["psql", "-h", self.dir, "-U", "ferry", "-d", "postgres", "-q",
                        "-c", f"CREATE DATABASE {name}"], check=True, capture_output=True,
                       timeout=60)
        return f"host={self.dir} user=ferry dbname={name}"

    def stop(self) -> None:
        self._run("pg_ctl", "-D", f"{self.dir}/data", "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)


class Ditto:
    """Requests to Ditto's HTTP API v2 on one Ferry, as one user (HTTP
    Basic) or, without a user, as whoever the listener lets in."""

    def __init__(self, base: str, user: str | None = None, password: str | None = None):
        self.base = base.rstrip("/") + "/api/2"
        self.session = requests.Session()
        if user is not None:
            self.session.auth = (user, password or "")

    def as_user(self, user: str, password: str) -> "Ditto":
        return Ditto(self.base[: -len("/api/2")], user, password)

    def get(self, path: str, **kw) -> requests.Response:
        return self.session.get(self.base + path, timeout=10, **kw)

    def put(self, path: str, body, **kw) -> requests.Response:
        return self.session.put(self.base + path, json=body, timeout=10, **kw)

    def put_raw(self, path: str, data: bytes, **kw) -> requests.Response:
        return self.session.put(self.base + path, data=data, timeout=10,
                                headers={"Content-Type": "application/json"}, **kw)

    def patch(self, path: str, body, headers: dict | None = None, **kw) -> requests.Response:
        headers = {"Content-Type": "application/merge-patch+json", **(headers or {})}
        return self.session.patch(self.base + path, json=body, timeout=10, headers=headers, **kw)

    def post(self, path: str, body, **kw) -> requests.Response:
        return self.session.post(self.base + path, json=body, timeout=10, **kw)

    def delete(self, path: str, **kw) -> requests.Response:
        return self.session.delete(self.base + path, timeout=10, **kw)


class EventStream:
    """A Server-Sent Events client on one `GET … Accept: text/event-stream`,
    parsing the stream as the HTML standard's EventSource does: `data:`
    lines joined, `id:` setting the last event id (also on a frame without
    data, which dispatches nothing), `:` comments and other fields ignored.
    The server's keep-alives (at least one a second) let every read end at
    its deadline."""

    def __init__(self, ditto: Ditto, path: str, params: dict | None = None,
                 last_event_id: str | None = None):
        headers = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        self.response = ditto.session.get(ditto.base + path, params=params, headers=headers,
                                          stream=True, timeout=(5, 5))
        self.last_id = last_event_id
        self.ended = False
        self._chunks = self.response.iter_content(chunk_size=None) if self.response.ok else iter(())
        self._buffer = b""
        self._data: list[str] = []

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.response.close()

    def _line(self, deadline: float) -> str | None:
        while b"\n" not in self._buffer:
            if time.monotonic() > deadline or self.ended:
                return None
            chunk = next(self._chunks, None)
            if chunk is None:
                self.ended = True
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def next(self, timeout: float = 10.0):
        """The next event's data as JSON, or None when the deadline passed
        or the stream ended (`ended` tells which)."""
        deadline = time.monotonic() + timeout
        while (line := self._line(deadline)) is not None:
            if line == "":
                data, self._data = self._data, []
                if data:
                    return json.loads("\n".join(data))
            elif not line.startswith(":"):
                field, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if field == "data":
                    self._data.append(value)
                elif field == "id":
                    self.last_id = value
        return None

    def wait_end(self, timeout: float = 10.0) -> None:
        """Reads until the server ends the stream; fails at the deadline."""
        deadline = time.monotonic() + timeout
        while not self.ended:
            self.next(max(0.0, deadline - time.monotonic()))
            assert self.ended or time.monotonic() < deadline, "the stream did not end"
