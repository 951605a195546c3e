#!/usr/bin/env bash
# Fetches Apache Kafka 4.x (the broker, KRaft mode) and a logging binding
# from Maven Central into DIR, for tests that start a real Kafka with plain
# `java -cp 'DIR/*' kafka.Kafka`: only package registries are reachable
# here, so there is no Apache tarball with its bin/ scripts.
# Usage: bash scripts/kafka-jars.sh DIR     (needs mvn; ~45 jars, ~43 MB)
# DIR appears whole or not at all: the jars land beside it first.
set -euo pipefail

KAFKA_VERSION=4.4.0
# Kafka 4.x logs through slf4j-api 1.7: without this 1.x bridge it prints
# nothing at all, not even the "Kafka Server started" line tests wait for.
LOG4J_VERSION=2.25.5
# Debian's Maven defaults to an old plugin; name a current one.
DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1

dir=${1:?usage: kafka-jars.sh DIR}
if [ -e "$dir/kafka_2.13-$KAFKA_VERSION.jar" ]; then
    exit 0
fi
command -v mvn >/dev/null 2>&1 || { echo "kafka-jars.sh: mvn not found (apt-get install maven)" >&2; exit 1; }

mkdir -p "$(dirname "$dir")"
# Absolute: Maven resolves a relative outputDirectory against the pom's.
work=$(cd "$(dirname "$dir")" && mktemp -d "$PWD/$(basename "$dir").fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
cat >"$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.ferry</groupId><artifactId>kafka-lib</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>$LOG4J_VERSION</version></dependency>
  </dependencies>
</project>
POM
# Runtime scope: kafka_2.13 declares the server modules (kafka-server,
# kafka-raft, the coordinators) at runtime scope only.
mvn -B -q -Dstyle.color=never -f "$work/pom.xml" "$DEPENDENCY_PLUGIN:copy-dependencies" \
    -DincludeScope=runtime -DoutputDirectory="$work/lib"
rm -rf "$dir"
mv "$work/lib" "$dir"
