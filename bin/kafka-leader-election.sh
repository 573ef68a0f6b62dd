#!/usr/bin/env bash
# Apache Kafka's kafka-leader-election.sh, from jvm/lib/kafka (see kafka-tool.sh).
exec "$(dirname "${BASH_SOURCE[0]}")/kafka-tool.sh" org.apache.kafka.tools.LeaderElectionCommand "$@"
