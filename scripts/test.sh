#!/usr/bin/env bash
# Runs Ferry's whole test suite on a fresh Debian machine:
#   1. installs what is missing (mosquitto-clients + mosquitto, Java and
#      Maven for the Kafka tests, PostgreSQL for the twin store's, Node.js
#      and chromium for the console's via apt, a Python venv at .venv with
#      tests/requirements.txt, tests/browser's npm packages),
#   2. checks that console/dist is what console/'s sources build to,
#   3. cargo build --release -p ferry, cargo check of the edge build
#      (--no-default-features), cargo test --workspace --release,
#   4. the Python integration tests in tests/ against target/release/ferry.
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
if ! perl -MFindBin -MIPC::Cmd -MFile::Compare -e1 >/dev/null 2>&1; then
    apt_pkgs+=(perl)   # OpenSSL, built into the Kafka client (rdkafka's ssl-vendored), configures with perl
fi
if ! command -v python3 >/dev/null 2>&1; then
    apt_pkgs+=(python3 python3-venv)
fi
if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null && ! command -v initdb >/dev/null 2>&1; then
    apt_pkgs+=(postgresql)   # the twin store's tests start a throwaway cluster (initdb + pg_ctl)
fi
if ! command -v npm >/dev/null 2>&1; then
    apt_pkgs+=(nodejs npm)   # builds the console (console/) and runs its browser tests
fi
if [ ! -x /usr/bin/chromium ]; then
    apt_pkgs+=(chromium)   # the console's browser tests: Debian's chromium, never a downloaded one
fi
if [ ${#apt_pkgs[@]} -gt 0 ]; then
    apt_install "${apt_pkgs[@]}"
fi

# ------------------------------------------------------------------ npm
# playwright-core downloads nothing itself; this makes sure no other
# package tries to fetch a browser either.
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
npm_ci() {   # npm ci in $1 when its node_modules is missing or older than its lock
    if [ ! -f "$1/node_modules/.package-lock.json" ] || [ "$1/package-lock.json" -nt "$1/node_modules/.package-lock.json" ]; then
        log "npm ci in $1"
        (cd "$1" && npm ci --no-audit --no-fund)
    fi
}
npm_ci tests/browser
if [ "$TARGET" = "ferry" ]; then
    # The binary embeds console/dist (committed, so building Ferry needs no
    # npm): a source change without a rebuild of the assets fails here.
    npm_ci console
    log "console: npm run build, then console/dist must be unchanged"
    (cd console && npm run build)
    if ! git diff --exit-code --stat -- console/dist || [ -n "$(git status --porcelain -- console/dist)" ]; then
        echo "error: console/dist is not what console/'s sources build to; run \`npm run build\` in console/ and commit console/dist" >&2
        exit 1
    fi
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
    # The edge build (no Kafka, PostgreSQL or bench) only type-checked: its
    # code is the default build's minus three features, so a check catches
    # what it can break (a cfg forgotten) in about a minute, not a build's ten.
    log "cargo check --release -p ferry --no-default-features (the edge build)"
    cargo check --release -p ferry --no-default-features
    log "cargo test --workspace --release"
    cargo test --workspace --release
    export FERRY_BIN="${FERRY_BIN:-$ROOT/target/release/ferry}"
fi

# ------------------------------------------------------- integration tests
log "pytest tests (target: $TARGET)"
.venv/bin/python -m pytest tests -q --timeout=60 "$@"
