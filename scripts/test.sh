#!/usr/bin/env bash
# Runs Ferry's whole test suite on a fresh Debian machine:
#   1. installs what is missing (mosquitto-clients + mosquitto, Java and
#      Maven for the Kafka tests and PostgreSQL for the twin store's via
#      apt, a Python venv at .venv with tests/requirements.txt),
#   2. cargo build --release -p ferry, cargo test --workspace --release,
#   3. the Python integration tests in tests/ against target/release/ferry.
# Usage: bash scripts/test.sh [extra pytest arguments]
# FERRY_TEST_TARGET=mosquitto runs the integration tests against Mosquitto
# instead (and skips the cargo steps).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
TARGET=${FERRY_TEST_TARGET:-ferry}

log() { printf '\n==> %s\n' "$*" >&2; }

# ---------------------------------------------------------------- apt
apt_install() {
    log "apt-get install $*"
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then sudo=(sudo); fi
    export DEBIAN_FRONTEND=noninteractive
    if ! "${sudo[@]}" apt-get install -y --no-install-recommends "$@"; then
        # most likely missing or stale package lists
        "${sudo[@]}" apt-get update
        "${sudo[@]}" apt-get install -y --no-install-recommends "$@"
    fi
}

apt_pkgs=()
if ! command -v mosquitto_pub >/dev/null 2>&1 || ! command -v mosquitto_sub >/dev/null 2>&1; then
    apt_pkgs+=(mosquitto-clients)
fi
if [ ! -x /usr/sbin/mosquitto ]; then
    apt_pkgs+=(mosquitto)
fi
if ! command -v promtool >/dev/null 2>&1; then
    apt_pkgs+=(prometheus)   # promtool checks GET /metrics
fi
if ! command -v java >/dev/null 2>&1; then
    apt_pkgs+=(default-jre-headless)   # the kafka endpoint tests run a real Kafka 4.x (Java 17+)
fi
if ! command -v mvn >/dev/null 2>&1; then
    apt_pkgs+=(maven)   # fetches Kafka's jars (scripts/kafka-jars.sh)
fi
if ! command -v make >/dev/null 2>&1; then
    apt_pkgs+=(make)   # rdkafka builds its bundled librdkafka with make
fi
if ! command -v python3 >/dev/null 2>&1; then
    apt_pkgs+=(python3 python3-venv)
fi
if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null && ! command -v initdb >/dev/null 2>&1; then
    apt_pkgs+=(postgresql)   # the twin store's tests start a throwaway cluster (initdb + pg_ctl)
fi
if [ ${#apt_pkgs[@]} -gt 0 ]; then
    apt_install "${apt_pkgs[@]}"
fi

# --------------------------------------------------------- python venv
if [ -e .venv ] && ! .venv/bin/python -c '' >/dev/null 2>&1; then
    log "removing a broken .venv"
    rm -rf .venv
fi
if [ ! -e .venv ]; then
    log "creating .venv"
    if ! python3 -m venv .venv; then
        # Debian's python3 needs python3-venv (ensurepip) for this
        rm -rf .venv
        apt_install python3-venv
        python3 -m venv .venv
    fi
fi
if ! .venv/bin/python - >/dev/null 2>&1 <<'PY'
import importlib.metadata as md, pathlib
for line in pathlib.Path("tests/requirements.txt").read_text().splitlines():
    line = line.split("#")[0].strip()
    if line:
        name, version = line.split("==")
        assert md.version(name) == version, name
PY
then
    log "installing Python test dependencies into .venv"
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -r tests/requirements.txt
fi

# ---------------------------------------------------------------- cargo
if [ "$TARGET" = "ferry" ]; then
    if ! command -v cargo >/dev/null 2>&1; then
        echo "error: cargo not found; install a Rust toolchain (rustup, Rust >= 1.89)" >&2
        exit 1
    fi
    log "cargo build --release -p ferry"
    cargo build --release -p ferry
    log "cargo test --workspace --release"
    cargo test --workspace --release
    export FERRY_BIN="${FERRY_BIN:-$ROOT/target/release/ferry}"
fi

# ------------------------------------------------------- integration tests
log "pytest tests (target: $TARGET)"
.venv/bin/python -m pytest tests -q --timeout=60 "$@"
