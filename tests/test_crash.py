"""Crash test (issue 4): kill -9 Ferry repeatedly under QoS 1/2 traffic to
persistent sessions; nothing acknowledged may be lost, QoS 2 is delivered
exactly once, retained messages and subscriptions survive.

A short run of scripts/crash-test.py (which does the real work, and takes
--kills 20 or more for a longer one). Its clients are raw-socket ones and
paho-mqtt ones, which keep their own session state across reconnects as
applications do (QoS 2 in both directions). Run with -s to see its counts.
"""

import importlib.util
import random
import sys
from pathlib import Path

import pytest

from conftest import ferry_binary

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "crash-test.py"


def _load_script():
    # the file name has a dash, so it cannot be imported by name
    spec = importlib.util.spec_from_file_location("crash_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


crash_test = _load_script()


@pytest.mark.ferry_only  # kill -9 and restart on the same data directory
@pytest.mark.parametrize("fsync, kills", [("batch", 6), ("always", 3)],
                         ids=["fsync_batch", "fsync_always"])
def test_crash_restart_loses_nothing_acknowledged(tmp_path, fsync, kills):
    seed = random.randrange(2**32)  # random each run, in the report to replay it
    result = crash_test.run(crash_test.Settings(
        ferry=ferry_binary(), kills=kills, seed=seed, fsync=fsync, data_dir=tmp_path / "data"))
    print(f"crash test, fsync={fsync}: {result.summary()}")
    assert result.ok, result.report()
