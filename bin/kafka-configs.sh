#!/usr/bin/env bash
# Apache Kafka's kafka-configs.sh, from jvm/lib/kafka (see kafka-tool.sh).
exec "$(dirname "${BASH_SOURCE[0]}")/kafka-tool.sh" kafka.admin.ConfigCommand "$@"
