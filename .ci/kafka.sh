#!/usr/bin/env bash
# Apache Kafka for the KafkaBus tests and for local work: KRaft (every node both broker and
# controller), on loopback only, no container. Its jars come from Maven Central through
# .ci/kafka/pom.xml into the local Maven repository (~/.m2, kept between runs on one machine); its
# configuration, data and logs are made anew in the target directory at every start.
#
#   bash .ci/kafka.sh start        fetches, formats and starts the node(s); returns once every node
#                                  serves and writes the bootstrap addresses (host:port,…, for
#                                  KAFKA_TEST_BROKERS or KAFKA_BROKERS) to <target>/brokers
#   bash .ci/kafka.sh stop         stops the nodes that `start` started in <target>
#   bash .ci/kafka.sh kill N       SIGKILLs node N (1-3) of <target>, as a crash would (fault tests)
#   bash .ci/kafka.sh restart N    starts node N again after `kill N`, on its data
#   bash .ci/kafka.sh pid N        prints the pid of node N of <target>
#
# Settings (environment):
#   KAFKA_VERSION      4.4.0 (default; the 4.x line, Java 17) or 3.9.2 (the last 3.x line)
#   KAFKA_NODES        1 (default) or 3: a three-node cluster (replication factor 3,
#                      min.insync.replicas 2, internal topics replicated 3 times)
#   KAFKA_SECURE       1: each node also listens with SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512;
#                      user `hub`, password in <target>/sasl-password), TLS, and SASL over TLS;
#                      the addresses go to <target>/{sasl,tls,sasl-tls}-brokers and the CA (a
#                      self-signed certificate for 127.0.0.1) to <target>/ca.pem
#   KAFKA_TARGET       the directory for configuration, data and logs (default .ci/kafka/target);
#                      one per broker or cluster, so several can run from one checkout
#   KAFKA_PORT         the first port (default: free ones); node N uses KAFKA_PORT + 10·(N-1) + 0..4
#   KAFKA_HEAP         the JVM heap per node (default 512m: three nodes and the suites fit in a
#                      2-core, 24 GiB machine with room to spare)
#   JAVA_HOME          the JDK (17 or later); KAFKA_START_TIMEOUT the seconds to wait (default 180)
set -euo pipefail
HERE="$(cd "$(dirname "$0")/kafka" && pwd)"
TARGET="${KAFKA_TARGET:-$HERE/target}"
VERSION="${KAFKA_VERSION:-4.4.0}"
NODES="${KAFKA_NODES:-1}"
HEAP="${KAFKA_HEAP:-512m}"
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"
KEYTOOL="${JAVA_HOME:+$JAVA_HOME/bin/}keytool"

case "$NODES" in 1|3) ;; *) echo "KAFKA_NODES must be 1 or 3 (got $NODES)" >&2; exit 2 ;; esac

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

# Only a JVM running kafka.Kafka with this target's configuration of node N is ours to stop.
running_pid() {
  local pid
  pid="$(cat "$TARGET/node-$1/kafka.pid" 2>/dev/null)" || return 1
  tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline" | grep -qF "kafka.Kafka $TARGET/node-$1/server.properties" || return 1
  echo "$pid"
}

stop() {
  local node pid pids=()
  for node in 1 2 3; do
    if pid="$(running_pid "$node")"; then
      kill "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  # A clean shutdown takes a few seconds; the data is thrown away at the next start anyway.
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    echo "Kafka (pid $pid) stopped"
  done
  rm -f "$TARGET"/node-*/kafka.pid
}

kill_node() {
  local pid
  pid="$(running_pid "$1")" || { echo "Kafka node $1 of $TARGET is not running" >&2; exit 1; }
  kill -9 "$pid"
  echo "Kafka node $1 (pid $pid) killed"
}

# C1 only: a broker starts in about half the time (8-10 s instead of 16-22 s on a busy 2-core
# machine), and the tests' load is light. The heap: see KAFKA_HEAP above.
jvm() { echo "-Xms256m -Xmx$HEAP -XX:TieredStopAtLevel=1 -Djava.awt.headless=true -Dlog4j2.configurationFile=$TARGET/node-$1/log4j2.properties"; }

# Starts node N on its configuration and data (made by `start`) in the background.
launch() {
  # shellcheck disable=SC2046
  nohup "$JAVA" $(jvm "$1") -cp "$(cat "$TARGET/classpath")" kafka.Kafka "$TARGET/node-$1/server.properties" \
    >> "$TARGET/node-$1/stdout.log" 2>&1 &
  echo $! > "$TARGET/node-$1/kafka.pid"
}

# Returns once node N logged that it serves (counting the lines after `from`, for a restart).
wait_started() {
  local pid from="${2:-0}" deadline=$(( $(date +%s) + ${KAFKA_START_TIMEOUT:-180} ))
  pid="$(cat "$TARGET/node-$1/kafka.pid")"
  until tail -n "+$(( from + 1 ))" "$TARGET/node-$1/server.log" 2>/dev/null | grep -q 'Kafka Server started'; do
    if ! kill -0 "$pid" 2>/dev/null || [ "$(date +%s)" -ge "$deadline" ]; then
      tail -n 40 "$TARGET/node-$1/stdout.log" "$TARGET/node-$1/server.log" >&2 || true
      stop >&2
      echo "Kafka node $1 did not start (logs above, all in $TARGET)" >&2
      exit 1
    fi
    sleep 0.2
  done
}

# Starts node N again after `kill N`, on its data: it rejoins the cluster and catches up.
restart_node() {
  if running_pid "$1" > /dev/null; then echo "Kafka node $1 of $TARGET is running" >&2; exit 1; fi
  [ -f "$TARGET/node-$1/server.properties" ] || { echo "Kafka node $1 of $TARGET was never started" >&2; exit 1; }
  local from
  from="$(wc -l < "$TARGET/node-$1/server.log" 2>/dev/null || echo 0)"
  launch "$1"
  wait_started "$1" "$from"
  echo "Kafka node $1 (pid $(cat "$TARGET/node-$1/kafka.pid")) restarted"
}

# A self-signed certificate for 127.0.0.1 in a PKCS12 keystore for the brokers, and its PEM for
# the clients (KAFKA_SSL_CA_FILE): a trust anchor, so the client checks it as it would a CA's.
make_certificate() {
  local password="$1"
  "$KEYTOOL" -genkeypair -alias broker -keyalg RSA -keysize 2048 -validity 30 -storetype PKCS12 \
    -keystore "$TARGET/broker.p12" -storepass "$password" -keypass "$password" \
    -dname "CN=127.0.0.1" -ext "SAN=ip:127.0.0.1,dns:localhost" > "$TARGET/logs/keytool.log" 2>&1
  "$KEYTOOL" -exportcert -rfc -alias broker -keystore "$TARGET/broker.p12" -storepass "$password" \
    -file "$TARGET/ca.pem" >> "$TARGET/logs/keytool.log" 2>&1
}

start() {
  stop
  rm -rf "$TARGET"/node-* "$TARGET/logs" "$TARGET"/*brokers "$TARGET/ca.pem" "$TARGET/broker.p12" "$TARGET/sasl-password"
  mkdir -p "$TARGET/logs"
  local t0 t1 t2
  t0=$(date +%s%N)

  if ! mvn -B -q -f "$HERE/pom.xml" dependency:build-classpath -Dkafka.version="$VERSION" -Dmdep.includeScope=runtime \
      -Dmdep.outputFile="$TARGET/classpath" > "$TARGET/logs/maven.log" 2>&1; then
    cat "$TARGET/logs/maven.log" >&2
    echo "Kafka $VERSION: resolving the broker's jars failed (above)" >&2
    exit 1
  fi
  t1=$(date +%s%N)

  # Ports: per node a client listener, the controller's and, with KAFKA_SECURE, SASL, TLS and
  # SASL over TLS.
  local node i used=" " port
  declare -A ports
  for node in $(seq 1 "$NODES"); do
    for i in 0 1 2 3 4; do
      if [ -n "${KAFKA_PORT:-}" ]; then
        port=$(( KAFKA_PORT + 10 * (node - 1) + i ))
      else
        port="$(free_port)"
        while [[ "$used" == *" $port "* ]]; do port="$(free_port)"; done
      fi
      used+="$port "
      ports[$node,$i]=$port
    done
  done

  local voters="" replicas=1 min_isr=1
  for node in $(seq 1 "$NODES"); do voters+="${voters:+,}$node@127.0.0.1:${ports[$node,1]}"; done
  [ "$NODES" = 3 ] && replicas=3 && min_isr=2

  local password="" scram=()
  if [ "${KAFKA_SECURE:-0}" = 1 ]; then
    password="$(head -c 12 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
    echo "$password" > "$TARGET/sasl-password"
    make_certificate "$password"
    # SCRAM credentials live in the cluster metadata: written at format time, before any broker runs.
    scram=(--add-scram "SCRAM-SHA-256=[name=hub,password=$password]" --add-scram "SCRAM-SHA-512=[name=hub,password=$password]")
  fi

  for node in $(seq 1 "$NODES"); do
    local dir="$TARGET/node-$node" listeners advertised protocols
    mkdir -p "$dir/data"
    listeners="PLAINTEXT://127.0.0.1:${ports[$node,0]},CONTROLLER://127.0.0.1:${ports[$node,1]}"
    advertised="PLAINTEXT://127.0.0.1:${ports[$node,0]}"
    protocols="CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
    if [ -n "$password" ]; then
      listeners+=",SASL://127.0.0.1:${ports[$node,2]},TLS://127.0.0.1:${ports[$node,3]},SASL_TLS://127.0.0.1:${ports[$node,4]}"
      advertised+=",SASL://127.0.0.1:${ports[$node,2]},TLS://127.0.0.1:${ports[$node,3]},SASL_TLS://127.0.0.1:${ports[$node,4]}"
      protocols+=",SASL:SASL_PLAINTEXT,TLS:SSL,SASL_TLS:SASL_SSL"
    fi
    cat > "$dir/server.properties" <<PROPERTIES
process.roles=broker,controller
node.id=$node
controller.quorum.voters=$voters
listeners=$listeners
advertised.listeners=$advertised
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=$protocols
log.dirs=$dir/data
# Internal topics and the topics KafkaBus creates (it leaves the replication factor to the
# broker): replicated on every node of a cluster, a write acknowledged by two of them.
offsets.topic.replication.factor=$replicas
transaction.state.log.replication.factor=$replicas
transaction.state.log.min.isr=$min_isr
share.coordinator.state.topic.replication.factor=$replicas
share.coordinator.state.topic.min.isr=$min_isr
default.replication.factor=$replicas
min.insync.replicas=$min_isr
# A group's first member starts at once instead of waiting for others to join.
group.initial.rebalance.delay.ms=0
# As in production, where KafkaBus creates its topics itself.
auto.create.topics.enable=false
PROPERTIES
    if [ -n "$password" ]; then
      local plain="org.apache.kafka.common.security.plain.PlainLoginModule required username=\"hub\" password=\"$password\" user_hub=\"$password\";"
      local scram_module="org.apache.kafka.common.security.scram.ScramLoginModule required;"
      cat >> "$dir/server.properties" <<PROPERTIES
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl.plain.sasl.jaas.config=$plain
listener.name.sasl.scram-sha-256.sasl.jaas.config=$scram_module
listener.name.sasl.scram-sha-512.sasl.jaas.config=$scram_module
listener.name.sasl_tls.plain.sasl.jaas.config=$plain
listener.name.sasl_tls.scram-sha-256.sasl.jaas.config=$scram_module
listener.name.sasl_tls.scram-sha-512.sasl.jaas.config=$scram_module
ssl.keystore.type=PKCS12
ssl.keystore.location=$TARGET/broker.p12
ssl.keystore.password=$password
ssl.key.password=$password
PROPERTIES
    fi
    cat > "$dir/log4j2.properties" <<PROPERTIES
appender.file.type = File
appender.file.name = file
appender.file.fileName = $dir/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
PROPERTIES
  done

  local classpath cluster_id
  classpath="$(cat "$TARGET/classpath")"
  # A cluster id is 16 random bytes in URL-safe base64 (what `StorageTool random-uuid` prints);
  # one starting with '-' would be read as an option by the storage tool (1 start in 64 failed).
  cluster_id=-
  while [[ "$cluster_id" == -* ]]; do cluster_id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"; done
  for node in $(seq 1 "$NODES"); do
    # shellcheck disable=SC2046
    if ! "$JAVA" $(jvm "$node") -cp "$classpath" kafka.tools.StorageTool format -t "$cluster_id" \
        -c "$TARGET/node-$node/server.properties" "${scram[@]}" > "$TARGET/logs/format-$node.log" 2>&1; then
      cat "$TARGET/logs/format-$node.log" >&2
      echo "Kafka: formatting $TARGET/node-$node failed (above)" >&2
      exit 1
    fi
  done

  for node in $(seq 1 "$NODES"); do launch "$node"; done
  for node in $(seq 1 "$NODES"); do wait_started "$node"; done
  t2=$(date +%s%N)

  local list
  addresses() { list=""; for node in $(seq 1 "$NODES"); do list+="${list:+,}127.0.0.1:${ports[$node,$1]}"; done; echo "$list"; }
  addresses 0 > "$TARGET/brokers"
  if [ -n "$password" ]; then
    addresses 2 > "$TARGET/sasl-brokers"
    addresses 3 > "$TARGET/tls-brokers"
    addresses 4 > "$TARGET/sasl-tls-brokers"
  fi
  echo "Kafka $VERSION serving on $(cat "$TARGET/brokers") ($NODES node(s), pids $(cat "$TARGET"/node-*/kafka.pid | tr '\n' ' ')): jars resolved in $(( (t1 - t0) / 1000000 )) ms, formatted and started in $(( (t2 - t1) / 1000000 )) ms"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  kill) kill_node "${2:?node number}" ;;
  restart) restart_node "${2:?node number}" ;;
  pid) running_pid "${2:?node number}" ;;
  *) echo "usage: $0 start|stop|kill N|restart N|pid N" >&2; exit 2 ;;
esac
