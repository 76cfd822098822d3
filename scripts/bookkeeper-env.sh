#!/usr/bin/env bash
# bookkeeper-env.sh — a real ZooKeeper and real Apache BookKeeper bookies on
# loopback, for tests and benchmarks of the Go BookKeeper client. Test harness
# only: nothing in the product runs Java.
#
# Usage:
#   scripts/bookkeeper-env.sh start            start ZooKeeper + N bookies; LAST stdout line = ZK connect string
#   scripts/bookkeeper-env.sh stop             stop everything this env started (by pid) and delete its data
#   scripts/bookkeeper-env.sh status           print state (ports, pids, liveness)
#   scripts/bookkeeper-env.sh kill-bookie I    SIGKILL bookie I (0-based); data and config are kept
#   scripts/bookkeeper-env.sh stop-bookie I    SIGTERM bookie I and wait for it to exit
#   scripts/bookkeeper-env.sh start-bookie I   (re)start bookie I with the same port/dirs; waits until registered
#   scripts/bookkeeper-env.sh shell ARGS...    run BookKeeper's BookieShell against this env (INFO log on stdout)
#   scripts/bookkeeper-env.sh java FILE ARGS.. run a single-file Java program with the BookKeeper classpath
#   scripts/bookkeeper-env.sh zkcli ARGS...    run ZooKeeper's CLI against this env
#   scripts/bookkeeper-env.sh watch PID        stop this env (and delete its dir) once process PID is gone:
#                                               test harnesses run it so a crashed test binary leaks nothing
#   scripts/bookkeeper-env.sh fetch            only download the jars into the cache
#   scripts/bookkeeper-env.sh classpath        print the classpath (downloads on first use)
#
# Environment (all optional):
#   BK_ENV_DIR        state dir (pids, ports, configs, data, logs); default <repo>/.cache/bookkeeper/env.
#                     bktest gives every test package that starts its own cluster a private dir.
#   BK_VERSION        org.apache.bookkeeper:bookkeeper-server version; default 4.17.3
#   BK_NUM_BOOKIES    default 3
#   BK_HEAP           JVM heap per process (-Xms = -Xmx: a young generation big enough that bookie GC
#                     pauses stay rare under load); default 256m
#   BK_JOURNAL_SYNC   journalSyncData (fsync before ack); default false: acks after the journal
#                     write reaches the page cache, which survives a kill -9 of a bookie JVM
#   BK_GC_WAIT_MS     bookie gcWaitTime; default 600000 (GC effectively off during a test run)
#   BK_LOG_LEVEL      log4j2 level of the server processes; default WARN
#   BK_START_TIMEOUT  seconds to wait for ZooKeeper and each bookie; default 180
#   BK_FAST_START     1 (default): JIT at C1 only (-XX:TieredStopAtLevel=1), fastest start on small
#                     machines; 0: full JIT (slower start, faster once warm: use for benchmarks)
#
# Choices (why):
#   * Jars come from Maven Central via a tiny pom (scripts/bookkeeper/pom.xml) into
#     <repo>/.cache/bookkeeper/lib-<version> (git-ignored), once; the local Maven repo is
#     also under .cache so a fresh machine needs only Java 17 + Maven, no root.
#   * ZooKeeper runs from the zookeeper-3.9.x jar on that same classpath
#     (ZooKeeperServerMain): no apt-get, no root, same version BookKeeper is built against.
#   * Every process is its own JVM so one bookie can be killed and restarted by pid.
#   * Ports are picked at random on 127.0.0.1 and probed; a process that fails to bind is
#     retried on another port (other engineers run tests on the same machine).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BK_VERSION="${BK_VERSION:-4.17.3}"
CACHE="$ROOT/.cache/bookkeeper"
LIB="$CACHE/lib-$BK_VERSION"
ENV_DIR="${BK_ENV_DIR:-$CACHE/env}"
NUM_BOOKIES="${BK_NUM_BOOKIES:-3}"
HEAP="${BK_HEAP:-256m}"
JOURNAL_SYNC="${BK_JOURNAL_SYNC:-false}"
GC_WAIT_MS="${BK_GC_WAIT_MS:-600000}"
LOG_LEVEL="${BK_LOG_LEVEL:-WARN}"
START_TIMEOUT="${BK_START_TIMEOUT:-180}"
LEDGERS_ROOT="/ledgers"

log() { echo "bookkeeper-env: $*" >&2; }
STARTING=0
die() {
  log "ERROR: $*"
  # A failed start stops whatever it already started; logs stay for diagnosis.
  if [[ $STARTING == 1 ]]; then STARTING=0; cmd_stop_quiet; log "partial env stopped; logs kept in $ENV_DIR/logs"; fi
  exit 1
}

JVM_FLAGS=(
  "-Xms$HEAP" "-Xmx$HEAP" -XX:MaxDirectMemorySize=256m
  -XX:+UseSerialGC -Xss512k
  -Djava.net.preferIPv4Stack=true
  -Dio.netty.leakDetectionLevel=disabled -Dio.netty.tryReflectionSetAccessible=true
  --add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/jdk.internal.misc=ALL-UNNAMED
  --add-opens java.base/java.io=ALL-UNNAMED --add-opens java.base/java.util.zip=ALL-UNNAMED
)
if [[ "${BK_FAST_START:-1}" == 1 ]]; then JVM_FLAGS+=(-XX:TieredStopAtLevel=1); fi

fetch() {
  [[ -f "$LIB/.complete" ]] && return 0
  command -v java >/dev/null || die "java not found (need a Java 17 runtime)"
  command -v mvn >/dev/null || die "mvn not found (need Maven to download BookKeeper $BK_VERSION from Maven Central)"
  mkdir -p "$CACHE"
  # Parallel test packages may all call start on a fresh machine: one downloads.
  exec 9>"$CACHE/.fetch.lock"
  flock 9
  if [[ ! -f "$LIB/.complete" ]]; then
    log "downloading org.apache.bookkeeper:bookkeeper-server:$BK_VERSION and dependencies into $LIB"
    rm -rf "$LIB.tmp"
    mvn -B -q -f "$ROOT/scripts/bookkeeper/pom.xml" \
      -Dbookkeeper.version="$BK_VERSION" -Dmaven.repo.local="$CACHE/m2" \
      dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$LIB.tmp" >&2 \
      || die "maven download failed (is Maven Central reachable?)"
    ls "$LIB.tmp"/bookkeeper-server-*.jar >/dev/null 2>&1 || die "bookkeeper-server jar missing after download"
    ls "$LIB.tmp"/zookeeper-3*.jar >/dev/null 2>&1 || die "zookeeper jar missing after download"
    rm -rf "$LIB" && mv "$LIB.tmp" "$LIB"
    touch "$LIB/.complete"
  fi
  exec 9>&-
}

classpath() { echo "$ENV_DIR/conf:$LIB/*"; }

# port_free P: nothing accepts on 127.0.0.1:P (a probe; the bind itself is the real test).
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# pick_port chooses below the kernel's ephemeral range when it can: a port in that range can be
# taken as the local port of an outgoing connection while its bookie is stopped (start-bookie
# reuses the port), and the restarted bookie then dies on bind.
pick_port() {
  local p i lo=20000 span=40000 eph
  eph=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true)
  if [[ "$eph" =~ ^[0-9]+$ ]] && (( eph > lo + 2000 )); then span=$(( eph - lo )); fi
  for i in $(seq 1 200); do
    p=$(( lo + (RANDOM * 32768 + RANDOM) % span ))
    if port_free "$p"; then echo "$p"; return 0; fi
  done
  die "no free port found"
}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# zk_ok P: ZooKeeper on P answers ruok with imok (an open port alone is not a serving server).
zk_ok() {
  local reply=""
  reply=$( (exec 3<>"/dev/tcp/127.0.0.1/$1" && printf ruok >&3 && timeout 2 cat <&3) 2>/dev/null || true)
  [[ "$reply" == imok ]]
}
alive() { [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null; }

write_log_config() {
  mkdir -p "$ENV_DIR/conf"
  cat >"$ENV_DIR/conf/log4j2-server.xml" <<EOF
<Configuration status="WARN">
  <Appenders><Console name="c" target="SYSTEM_OUT"><PatternLayout pattern="%d{HH:mm:ss.SSS} %-5p [%t] %c{1} - %m%n"/></Console></Appenders>
  <Loggers><Root level="$LOG_LEVEL"><AppenderRef ref="c"/></Root></Loggers>
</Configuration>
EOF
  # The shell prints its results through log4j INFO; everything else stays at WARN.
  cat >"$ENV_DIR/conf/log4j2-shell.xml" <<'EOF'
<Configuration status="WARN">
  <Appenders><Console name="c" target="SYSTEM_OUT"><PatternLayout pattern="%m%n"/></Console></Appenders>
  <Loggers>
    <Logger name="org.apache.bookkeeper.tools" level="INFO"/>
    <Logger name="org.apache.bookkeeper.bookie.BookieShell" level="INFO"/>
    <Root level="WARN"><AppenderRef ref="c"/></Root>
  </Loggers>
</Configuration>
EOF
}

zk_connect() { echo "127.0.0.1:$(cat "$ENV_DIR/zk.port")"; }

start_zk() {
  local attempt port pid deadline
  mkdir -p "$ENV_DIR/zk-data" "$ENV_DIR/logs"
  for attempt in 1 2 3 4 5; do
    port=$(pick_port)
    cat >"$ENV_DIR/conf/zoo.cfg" <<EOF
tickTime=500
initLimit=10
syncLimit=5
dataDir=$ENV_DIR/zk-data
clientPort=$port
clientPortAddress=127.0.0.1
maxClientCnxns=0
minSessionTimeout=1000
maxSessionTimeout=30000
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat
EOF
    # zookeeper.jmx.log4j.disable avoids a JMX registration warning with log4j2.
    nohup java "${JVM_FLAGS[@]}" -Dlog4j.configurationFile="$ENV_DIR/conf/log4j2-server.xml" \
      -Dzookeeper.jmx.log4j.disable=true -Dzookeeper.admin.enableServer=false \
      -cp "$LIB/*" org.apache.zookeeper.server.ZooKeeperServerMain "$ENV_DIR/conf/zoo.cfg" \
      >>"$ENV_DIR/logs/zk.log" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$ENV_DIR/zk.pid"
    echo "$port" >"$ENV_DIR/zk.port"
    deadline=$(( SECONDS + START_TIMEOUT ))
    while (( SECONDS < deadline )); do
      if ! alive "$pid"; then break; fi
      if zk_ok "$port"; then log "zookeeper up on 127.0.0.1:$port (pid $pid)"; return 0; fi
      sleep 0.2
    done
    if alive "$pid"; then kill -9 "$pid" 2>/dev/null || true; die "zookeeper did not open port $port within ${START_TIMEOUT}s (see $ENV_DIR/logs/zk.log)"; fi
    log "zookeeper exited (attempt $attempt, port $port); retrying on another port"
  done
  die "zookeeper failed to start (see $ENV_DIR/logs/zk.log)"
}

write_bookie_conf() { # index port
  local i=$1 port=$2 d="$ENV_DIR/bookie-$1"
  mkdir -p "$d/journal" "$d/ledgers"
  cat >"$ENV_DIR/conf/bookie-$i.conf" <<EOF
bookiePort=$port
advertisedAddress=127.0.0.1
listeningInterface=lo
allowLoopback=true
metadataServiceUri=zk+hierarchical://$(zk_connect)$LEDGERS_ROOT
zkTimeout=10000
journalDirectories=$d/journal
ledgerDirectories=$d/ledgers
ledgerStorageClass=org.apache.bookkeeper.bookie.SortedLedgerStorage
journalSyncData=$JOURNAL_SYNC
journalPreAllocSizeMB=1
journalFlushWhenQueueEmpty=true
journalMaxGroupWaitMSec=1
skipListSizeLimit=33554432
fileInfoCacheInitialCapacity=16
openFileLimit=64
diskUsageThreshold=0.999
diskUsageWarnThreshold=0.998
minUsableSizeForIndexFileCreation=1048576
minUsableSizeForEntryLogCreation=1048576
logSizeLimit=67108864
entryLogFilePreallocationEnabled=false
gcWaitTime=$GC_WAIT_MS
minorCompactionInterval=0
majorCompactionInterval=0
httpServerEnabled=false
statsProviderClass=org.apache.bookkeeper.stats.NullStatsProvider
numAddWorkerThreads=0
numReadWorkerThreads=1
numJournalCallbackThreads=1
serverNumIOThreads=2
EOF
}

launch_bookie() { # index
  local i=$1 pid
  nohup java "${JVM_FLAGS[@]}" -Dlog4j.configurationFile="$ENV_DIR/conf/log4j2-server.xml" \
    -cp "$LIB/*" org.apache.bookkeeper.server.Main -c "$ENV_DIR/conf/bookie-$i.conf" \
    >>"$ENV_DIR/logs/bookie-$i.log" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$ENV_DIR/bookie-$i.pid"
}

# Registration happens in bookie.start() before the netty server binds, so an accepting
# port implies the ephemeral <root>/available/<id> znode exists; start then confirms all ids
# with one zkcli listing.
wait_bookie() { # index -> 0 up, 1 process died, 2 timeout
  local i=$1 port pid deadline
  port=$(cat "$ENV_DIR/bookie-$i.port"); pid=$(cat "$ENV_DIR/bookie-$i.pid")
  deadline=$(( SECONDS + START_TIMEOUT ))
  while (( SECONDS < deadline )); do
    alive "$pid" || return 1
    if port_open "$port"; then return 0; fi
    sleep 0.25
  done
  return 2
}

start_bookies() {
  local i rc port attempt
  for (( i=0; i<NUM_BOOKIES; i++ )); do
    port=$(pick_port); echo "$port" >"$ENV_DIR/bookie-$i.port"
    write_bookie_conf "$i" "$port"
  done
  # The cluster must be initialised once (INSTANCEID, LAYOUT, available/, cookies/).
  java "${JVM_FLAGS[@]}" -Dlog4j.configurationFile="$ENV_DIR/conf/log4j2-server.xml" -cp "$LIB/*" \
    org.apache.bookkeeper.bookie.BookieShell -conf "$ENV_DIR/conf/bookie-0.conf" initnewcluster \
    >>"$ENV_DIR/logs/initnewcluster.log" 2>&1 || die "initnewcluster failed (see $ENV_DIR/logs/initnewcluster.log)"
  for (( i=0; i<NUM_BOOKIES; i++ )); do launch_bookie "$i"; done
  for (( i=0; i<NUM_BOOKIES; i++ )); do
    for attempt in 1 2 3 4; do
      rc=0; wait_bookie "$i" || rc=$?
      [[ $rc == 0 ]] && { log "bookie $i up on 127.0.0.1:$(cat "$ENV_DIR/bookie-$i.port") (pid $(cat "$ENV_DIR/bookie-$i.pid"))"; break; }
      [[ $rc == 2 ]] && die "bookie $i did not come up within ${START_TIMEOUT}s (see $ENV_DIR/logs/bookie-$i.log)"
      # Died: most likely the port was taken between probe and bind. Fresh bookie, new port.
      log "bookie $i exited during start (attempt $attempt); retrying on another port"
      rm -rf "$ENV_DIR/bookie-$i"
      port=$(pick_port); echo "$port" >"$ENV_DIR/bookie-$i.port"
      write_bookie_conf "$i" "$port"
      launch_bookie "$i"
    done
    [[ $rc == 0 ]] || die "bookie $i failed to start (see $ENV_DIR/logs/bookie-$i.log)"
  done
}

zkcli() {
  java -Xmx64m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Dlog4j.configurationFile="$ENV_DIR/conf/log4j2-server.xml" \
    -cp "$LIB/*" org.apache.zookeeper.ZooKeeperMain -server "$(zk_connect)" "$@"
}

confirm_registered() {
  local listing i
  listing=$(zkcli ls "$LEDGERS_ROOT/available" 2>/dev/null | grep '^\[' | tail -1 || true)
  for (( i=0; i<NUM_BOOKIES; i++ )); do
    [[ "$listing" == *"127.0.0.1:$(cat "$ENV_DIR/bookie-$i.port")"* ]] \
      || die "bookie $i not registered under $LEDGERS_ROOT/available (listing: $listing)"
  done
  log "registered bookies: $listing"
}

cmd_start() {
  fetch
  if [[ -f "$ENV_DIR/zk.pid" ]] && alive "$(cat "$ENV_DIR/zk.pid")"; then
    die "an env is already running in $ENV_DIR (run stop first, or set BK_ENV_DIR)"
  fi
  rm -rf "$ENV_DIR"; mkdir -p "$ENV_DIR/logs"
  echo "$NUM_BOOKIES" >"$ENV_DIR/num-bookies"
  write_log_config
  STARTING=1
  start_zk
  start_bookies
  confirm_registered
  STARTING=0
  zk_connect >"$ENV_DIR/zk.connect"
  # Client config for BookieShell / Java programs against this env.
  cat >"$ENV_DIR/conf/client.conf" <<EOF
metadataServiceUri=zk+hierarchical://$(zk_connect)$LEDGERS_ROOT
zkTimeout=10000
allowLoopback=true
EOF
  echo "BK_ENV_DIR=$ENV_DIR"
  echo "LEDGERS_ROOT=$LEDGERS_ROOT"
  zk_connect
}

kill_pidfile() { # file signal
  local f=$1 sig=$2 pid deadline
  [[ -f "$f" ]] || return 0
  pid=$(cat "$f")
  if alive "$pid"; then
    kill "-$sig" "$pid" 2>/dev/null || true
    deadline=$(( SECONDS + 30 ))
    while alive "$pid" && (( SECONDS < deadline )); do sleep 0.1; done
    if alive "$pid"; then kill -9 "$pid" 2>/dev/null || true; fi
    while alive "$pid"; do sleep 0.1; done
  fi
  rm -f "$f"
}

cmd_stop_quiet() {
  # Signal every bookie first, then wait: graceful bookie shutdowns overlap.
  local f pid pids=()
  for f in "$ENV_DIR"/bookie-*.pid; do
    [[ -e "$f" ]] || continue
    pid=$(cat "$f"); alive "$pid" && { kill -TERM "$pid" 2>/dev/null || true; pids+=("$pid"); }
  done
  local deadline=$(( SECONDS + 30 ))
  for pid in "${pids[@]}"; do
    while alive "$pid" && (( SECONDS < deadline )); do sleep 0.1; done
    alive "$pid" && kill -9 "$pid" 2>/dev/null || true
  done
  rm -f "$ENV_DIR"/bookie-*.pid
  kill_pidfile "$ENV_DIR/zk.pid" TERM
}

cmd_stop() {
  [[ -d "$ENV_DIR" ]] || { log "nothing to stop in $ENV_DIR"; return 0; }
  cmd_stop_quiet
  # Keep logs of a failed run only when asked.
  if [[ "${BK_KEEP_ENV:-}" == "1" ]]; then log "stopped; kept $ENV_DIR"; else rm -rf "$ENV_DIR"; log "stopped"; fi
}

need_env() { [[ -f "$ENV_DIR/zk.port" ]] || die "no env in $ENV_DIR (run start first)"; }
need_index() {
  [[ "${1:-}" =~ ^[0-9]+$ ]] || die "bookie index required"
  [[ -f "$ENV_DIR/bookie-$1.port" ]] || die "no bookie $1 in $ENV_DIR"
}

cmd_start_bookie() {
  need_env; need_index "${1:-}"
  local i=$1 rc=0 attempt
  if [[ -f "$ENV_DIR/bookie-$i.pid" ]] && alive "$(cat "$ENV_DIR/bookie-$i.pid")"; then
    log "bookie $i already running"; echo "127.0.0.1:$(cat "$ENV_DIR/bookie-$i.port")"; return 0
  fi
  # A bookie killed without a clean shutdown leaves its registration znode until the ZooKeeper
  # session expires, and its port may be briefly held: the restart may exit on either. Same
  # port and dirs (the bookie's identity and cookie), so retry a few times before giving up.
  for attempt in 1 2 3; do
    rc=0; launch_bookie "$i"; wait_bookie "$i" || rc=$?
    [[ $rc == 1 ]] || break
    log "bookie $i exited during restart (attempt $attempt): $(grep -E 'ERROR|Exception' "$ENV_DIR/logs/bookie-$i.log" | tail -n 2 | tr '\n' ' ' | cut -c1-400)"
    sleep 3
  done
  if [[ $rc != 0 ]]; then
    tail -n 20 "$ENV_DIR/logs/bookie-$i.log" >&2 || true
    die "bookie $i failed to restart (rc $rc, see $ENV_DIR/logs/bookie-$i.log)"
  fi
  log "bookie $i up on 127.0.0.1:$(cat "$ENV_DIR/bookie-$i.port") (pid $(cat "$ENV_DIR/bookie-$i.pid"))"
  echo "127.0.0.1:$(cat "$ENV_DIR/bookie-$i.port")"
}

cmd_status() {
  need_env
  local f i
  echo "zk 127.0.0.1:$(cat "$ENV_DIR/zk.port") pid $(cat "$ENV_DIR/zk.pid" 2>/dev/null || echo -) $(alive "$(cat "$ENV_DIR/zk.pid" 2>/dev/null || true)" && echo up || echo down)"
  for f in "$ENV_DIR"/bookie-*.port; do
    i=${f##*/bookie-}; i=${i%.port}
    local pid; pid=$(cat "$ENV_DIR/bookie-$i.pid" 2>/dev/null || true)
    echo "bookie $i 127.0.0.1:$(cat "$f") pid ${pid:--} $(alive "$pid" && echo up || echo down)"
  done
}

cmd="${1:-}"; shift || true
case "$cmd" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  fetch) fetch; echo "$LIB" ;;
  classpath) fetch; classpath ;;
  kill-bookie) need_env; need_index "${1:-}"; kill_pidfile "$ENV_DIR/bookie-$1.pid" KILL; log "bookie $1 killed" ;;
  stop-bookie) need_env; need_index "${1:-}"; kill_pidfile "$ENV_DIR/bookie-$1.pid" TERM; log "bookie $1 stopped" ;;
  start-bookie) cmd_start_bookie "${1:-}" ;;
  shell)
    need_env; fetch
    exec java -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true \
      -Dlog4j.configurationFile="$ENV_DIR/conf/log4j2-shell.xml" -cp "$LIB/*" \
      org.apache.bookkeeper.bookie.BookieShell -conf "$ENV_DIR/conf/client.conf" "$@" ;;
  java)
    need_env; fetch
    [[ -n "${1:-}" ]] || die "java: source file required"
    exec java -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true \
      -Dlog4j.configurationFile="$ENV_DIR/conf/log4j2-server.xml" -cp "$LIB/*" "$@" ;;
  zkcli) need_env; zkcli "$@" ;;
  watch)
    [[ "${1:-}" =~ ^[0-9]+$ ]] || die "watch: pid required"
    while kill -0 "$1" 2>/dev/null; do
      [[ -d "$ENV_DIR" ]] || exit 0   # stopped by its owner meanwhile
      sleep 1
    done
    [[ -d "$ENV_DIR" ]] && cmd_stop
    exit 0 ;;
  *) sed -n '2,20p' "$0" >&2; exit 2 ;;
esac
