#!/usr/bin/env bash
# A single-node Apache Kafka for the KafkaBus tests: KRaft, broker and controller in one JVM, on
# loopback only, no container. Its jars come from Maven Central through .ci/kafka/pom.xml into the
# local Maven repository (~/.m2, kept between runs on one machine); its configuration, data and
# logs are made anew in .ci/kafka/target (untracked) at every start.
#
#   bash .ci/kafka.sh start   fetches, formats and starts the broker; returns once it serves and
#                             writes its address (host:port, for KAFKA_TEST_BROKERS) to
#                             .ci/kafka/target/brokers
#   bash .ci/kafka.sh stop    stops the broker that `start` started from this checkout
#
# KAFKA_PORT and KAFKA_CONTROLLER_PORT choose the ports (default: free ones); JAVA_HOME the JDK
# (17 or later); KAFKA_START_TIMEOUT the seconds to wait for it (default 180).
set -euo pipefail
HERE="$(cd "$(dirname "$0")/kafka" && pwd)"
TARGET="$HERE/target"
PID_FILE="$TARGET/kafka.pid"
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"

# A free loopback port below Linux's ephemeral range (as libs/testing's freePort): one the kernel
# picked with listen(0) could go to an outgoing connection (npm's, say) before the broker binds it.
free_port() {
  node -e '
    const net = require("node:net");
    (function next() {
      const port = 20000 + Math.floor(Math.random() * 12000);
      const server = net.createServer().once("error", next);
      server.listen(port, "127.0.0.1", () => server.close(() => console.log(port)));
    })();'
}

# Only a JVM running kafka.Kafka with this checkout's configuration is ours to stop.
running_pid() {
  local pid
  pid="$(cat "$PID_FILE" 2>/dev/null)" || return 1
  tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline" | grep -qF "kafka.Kafka $TARGET/server.properties" || return 1
  echo "$pid"
}

stop() {
  local pid
  if pid="$(running_pid)"; then
    kill "$pid" 2>/dev/null || true
    # A clean shutdown takes a few seconds; the data is thrown away at the next start anyway.
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    echo "Kafka (pid $pid) stopped"
  fi
  rm -f "$PID_FILE"
}

start() {
  stop
  rm -rf "$TARGET/data" "$TARGET/logs" "$TARGET/brokers"
  mkdir -p "$TARGET/data" "$TARGET/logs"
  local t0 t1 t2
  t0=$(date +%s%N)

  if ! mvn -B -q -f "$HERE/pom.xml" dependency:build-classpath -Dmdep.includeScope=runtime \
      -Dmdep.outputFile="$TARGET/classpath" > "$TARGET/logs/maven.log" 2>&1; then
    cat "$TARGET/logs/maven.log" >&2
    echo "Kafka: resolving the broker's jars failed (above)" >&2
    exit 1
  fi
  t1=$(date +%s%N)

  local port="${KAFKA_PORT:-$(free_port)}" controller="${KAFKA_CONTROLLER_PORT:-}"
  while [ -z "$controller" ] || [ "$controller" = "$port" ]; do controller="$(free_port)"; done
  cat > "$TARGET/server.properties" <<PROPERTIES
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$controller
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$controller
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$TARGET/data
# One node: internal topics cannot have more replicas than that.
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
# A group's first member starts at once instead of waiting for others to join.
group.initial.rebalance.delay.ms=0
# As in production, where KafkaBus creates its topics itself.
auto.create.topics.enable=false
PROPERTIES
  cat > "$TARGET/log4j2.properties" <<PROPERTIES
appender.file.type = File
appender.file.name = file
appender.file.fileName = $TARGET/logs/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
PROPERTIES

  local classpath jvm cluster_id
  classpath="$(cat "$TARGET/classpath")"
  # C1 only: the broker starts in about half the time (8-10 s instead of 16-22 s on a busy
  # 2-core machine), and the tests' load is light.
  jvm=(-Xms256m -Xmx512m -XX:TieredStopAtLevel=1 -Djava.awt.headless=true
    -Dlog4j2.configurationFile="$TARGET/log4j2.properties" -cp "$classpath")
  # A cluster id is 16 random bytes in URL-safe base64 (what `StorageTool random-uuid` prints).
  cluster_id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
  if ! "$JAVA" "${jvm[@]}" kafka.tools.StorageTool format -t "$cluster_id" -c "$TARGET/server.properties" \
      > "$TARGET/logs/format.log" 2>&1; then
    cat "$TARGET/logs/format.log" >&2
    echo "Kafka: formatting $TARGET/data failed (above)" >&2
    exit 1
  fi

  nohup "$JAVA" "${jvm[@]}" kafka.Kafka "$TARGET/server.properties" > "$TARGET/logs/stdout.log" 2>&1 &
  local pid=$!
  echo "$pid" > "$PID_FILE"
  local deadline=$(( $(date +%s) + ${KAFKA_START_TIMEOUT:-180} ))
  until grep -q 'Kafka Server started' "$TARGET/logs/server.log" 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null || [ "$(date +%s)" -ge "$deadline" ]; then
      tail -n 40 "$TARGET/logs/stdout.log" "$TARGET/logs/server.log" >&2 || true
      stop >&2
      echo "Kafka did not start (logs above, all in $TARGET/logs)" >&2
      exit 1
    fi
    sleep 0.2
  done
  t2=$(date +%s%N)
  echo "127.0.0.1:$port" > "$TARGET/brokers"
  echo "Kafka serving on 127.0.0.1:$port (pid $pid): jars resolved in $(( (t1 - t0) / 1000000 )) ms, formatted and started in $(( (t2 - t1) / 1000000 )) ms"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
