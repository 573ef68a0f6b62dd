#!/usr/bin/env bash
# Apache Kafka's kafka-reassign-partitions.sh, from jvm/lib/kafka (see kafka-tool.sh).
exec "$(dirname "${BASH_SOURCE[0]}")/kafka-tool.sh" org.apache.kafka.tools.reassign.ReassignPartitionsCommand "$@"
