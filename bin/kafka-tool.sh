#!/usr/bin/env bash
# kafka-tool.sh CLASS ARGS...: one of Apache Kafka's command-line tools from the jars `make setup`
# resolved into jvm/lib/kafka (jvm/pom.xml pins their version), for operators without a Kafka install
# and for the tests. The kafka-*.sh beside this file name the class; run.sh from `balancer export`
# finds them with KAFKA_BIN=<this folder>.
# Env: KAFKA_HEAP_OPTS (default -Xmx256m), KAFKA_OPTS (more JVM options), JAVA (default: java on PATH).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
lib="${BALANCER_KAFKA_LIB:-$here/../jvm/lib/kafka}"
if ! compgen -G "$lib/*.jar" >/dev/null; then
  echo "$(basename "$0"): no Kafka jars in $lib: run make setup (it resolves jvm/pom.xml with Maven)" >&2
  exit 1
fi
class="$1"; shift
# Short-lived JVMs on shared cores: quick C1 start-up, one GC thread; the tools' own logs go to stderr at WARN.
# shellcheck disable=SC2086
exec "${JAVA:-java}" ${KAFKA_HEAP_OPTS:--Xmx256m} -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
  -Dlog4j2.configurationFile="file:$here/tools-log4j2.properties" ${KAFKA_OPTS:-} \
  -cp "$lib/*" "$class" "$@"
