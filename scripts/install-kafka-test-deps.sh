#!/usr/bin/env bash
# install-kafka-test-deps.sh installs what the Kafka client compatibility
# tests (kafka/compat) need beyond Go: Debian's kcat 1.7.1 (librdkafka 2.0.2,
# the old feature-detection client the tests guard), a Java 17+ JDK and
# Maven (for the Java kafka-clients 4.x smoke test, built from Maven Central
# into .cache/m2). Idempotent: installed packages are skipped.
#
# Usage: scripts/install-kafka-test-deps.sh
set -euo pipefail

need=()
command -v kcat >/dev/null 2>&1 || need+=(kcat)
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || need+=(maven)
if [[ ${#need[@]} -eq 0 ]]; then
	echo "install-kafka-test-deps: kcat, java and mvn already present"
	exit 0
fi
echo "install-kafka-test-deps: installing ${need[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
