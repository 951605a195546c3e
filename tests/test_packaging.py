"""Packaging (issue 17): deploy/ferry.toml is a configuration Ferry
accepts, that serves and answers /ready, and that names every key
docs/configuration.md documents; the systemd unit holds the hardening
docs/operations.md promises."""

import json
import re
import subprocess
import urllib.request
from pathlib import Path

import pytest

from conftest import ferry_binary

pytestmark = pytest.mark.ferry_only  # Ferry's own files

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "deploy" / "ferry.toml"
UNIT = ROOT / "deploy" / "ferry.service"


def documented_keys() -> set[str]:
    """The last part of every key in docs/configuration.md's tables:
    `[broker]`'s `max_connections`, `endpoints.NAME.batch.linger`'s
    `linger`, both of `endpoints.NAME.username`, `.password`."""
    keys = set()
    for line in (ROOT / "docs" / "configuration.md").read_text().splitlines():
        if not line.startswith("| `"):
            continue
        first_cell = line.split("|")[1]
        for name in re.findall(r"`([^`]+)`", first_cell):
            keys.add(name.split(".")[-1])
    return keys


def test_the_packaged_configuration_is_accepted():
    check = subprocess.run([str(ferry_binary()), "check-config", str(CONFIG)],
                           capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.strip() == f"{CONFIG}: ok"


def test_the_packaged_configuration_serves(broker_factory):
    # The flags move the listeners to free ports and data_dir to a
    # temporary one; everything else is the file's.
    b = broker_factory(extra_args=["--config", str(CONFIG)])
    with urllib.request.urlopen(f"http://{b.host}:{b.http_port}/ready", timeout=10) as r:
        assert json.loads(r.read()) == {"status": "ready"}
    c = b.client(5, "packaged")
    c.subscribe("p/#", qos=1)
    c.publish("p/1", b"hello", qos=1)
    assert c.get().payload == b"hello"


def test_every_documented_key_is_in_the_packaged_configuration():
    text = CONFIG.read_text()
    keys = documented_keys()
    assert len(keys) > 80, f"the key tables were read: {sorted(keys)}"
    missing = sorted(k for k in keys
                     if not re.search(rf"^\s*#?\s*{re.escape(k)}\s*=", text, re.M)
                     and not re.search(rf"^\s*#?\s*\[\[?[a-z.]*\b{re.escape(k)}\]\]?", text, re.M))
    assert not missing, f"documented keys missing from deploy/ferry.toml: {missing}"
    # Each key line has its comment: the line above, or after it.
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^[a-z_]+ = ", line):
            assert lines[i - 1].startswith("#") or " # " in line, f"no comment for {line!r}"


def test_the_systemd_unit_is_hardened():
    unit = UNIT.read_text()
    for directive in ["User=ferry", "StateDirectory=ferry", "ProtectSystem=strict",
                      "ProtectHome=true", "NoNewPrivileges=true", "PrivateTmp=true",
                      "Restart=on-failure", "ExecReload=/bin/kill -HUP $MAINPID"]:
        assert re.search(rf"^{re.escape(directive)}$", unit, re.M), directive
    limit = int(re.search(r"^LimitNOFILE=(\d+)$", unit, re.M).group(1))
    assert limit >= 100_000 + 1024, "100k connections and the log's files"
    assert "--config /etc/ferry/ferry.toml" in unit
