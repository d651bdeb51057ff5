#!/usr/bin/env bash
# The Kafka suites on a broker or cluster that CI's run does not start (its time budget is for the
# 4.x single node): started here in a target directory of its own, on ports above the range
# .ci/kafka.sh picks free ones from (so a CI broker on the same machine is never in the way), and
# stopped when this script exits.
#
#   bash .ci/kafka-suites.sh 3.9       the KafkaBus conformance, secure client settings and hub on
#                                      Kafka suites on Apache Kafka 3.9.2 (npm run test:kafka-3.9)
#   bash .ci/kafka-suites.sh cluster   KafkaBus on a three-node 4.4 cluster (*.cluster.ts) and the
#                                      fault tests through the hub (bench/kafka-cluster.js; npm run
#                                      test:kafka-cluster)
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-}"
case "$what" in
  3.9) export KAFKA_VERSION=3.9.2 KAFKA_NODES=1 KAFKA_SECURE=1 KAFKA_PORT="${KAFKA_PORT:-41000}" ;;
  cluster) export KAFKA_NODES=3 KAFKA_PORT="${KAFKA_PORT:-41100}" ;;
  *) echo "usage: $0 3.9|cluster" >&2; exit 2 ;;
esac
export KAFKA_TARGET="$PWD/.ci/kafka/target-$what"
trap 'bash .ci/kafka.sh stop' EXIT
bash .ci/kafka.sh start
jest() { node --experimental-vm-modules --no-warnings=ExperimentalWarning node_modules/jest/bin/jest.js --maxWorkers=1 "$@"; }
if [ "$what" = 3.9 ]; then
  KAFKA_TEST_BROKERS="$(cat "$KAFKA_TARGET/brokers")" KAFKA_TEST_SECURE_DIR="$KAFKA_TARGET" AGENTHUB_TEST_REQUIRE_REAL=1 \
    jest libs/runtime/test/kafka.test.ts libs/runtime/test/kafka-secure.test.ts services/hub/test/kafka.e2e.test.ts
else
  KAFKA_TEST_CLUSTER_BROKERS="$(cat "$KAFKA_TARGET/brokers")" jest --testMatch '<rootDir>/libs/runtime/test/*.cluster.ts'
  node bench/kafka-cluster.js
fi
