#!/usr/bin/env bash
# Regenerates ../golden.txt from Apache Pulsar's own Key_Shared selector.
# Needs Java 17 and Maven Central (pulsar-broker 4.0.7 and its dependencies,
# cached in ~/.m2). Not run by CI: the Go tests read the checked-in output.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/pom.xml" <<'POM'
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>nereus</groupId><artifactId>keyshared-golden</artifactId><version>1</version>
<dependencies><dependency><groupId>org.apache.pulsar</groupId><artifactId>pulsar-broker</artifactId>
<version>4.0.7</version></dependency></dependencies></project>
POM
(cd "$work" && mvn -q dependency:build-classpath -Dmdep.outputFile=cp.txt >/dev/null)
cp=$(cat "$work/cp.txt")
javac -d "$work/classes" -cp "$cp" "$here/org/apache/pulsar/broker/service/NereusKeySharedGolden.java"
java -cp "$work/classes:$cp" org.apache.pulsar.broker.service.NereusKeySharedGolden 2>/dev/null > "$here/../golden.txt"
echo "wrote $here/../golden.txt ($(wc -l < "$here/../golden.txt") lines)"
