#!/usr/bin/env bash
# A single-node SLURM cluster on this machine, for trying the pipeline's cluster path for real
# (profiles/slurm, snakemake-executor-plugin-slurm): sbatch, squeue, sacct and job logs as on a
# site's cluster.  A real site has its own SLURM: there, use the profile and skip this script.
#
#   workflow/cluster/local-slurm.sh up       # install (Debian packages) if needed, start, wait until idle
#   workflow/cluster/local-slurm.sh status   # which daemons run; sinfo and sacct answer?  exit 0 iff up
#   workflow/cluster/local-slurm.sh down     # cancel jobs, stop every daemon it started; nothing keeps running
#
# What `up` does, each step skipped when already done (so `up` is idempotent):
#   1. apt-get install munge slurmctld slurmd slurmdbd slurm-client mariadb-server (no service is
#      started by the packages: this runs without systemd and starts each daemon itself);
#   2. writes /etc/slurm/slurm.conf and slurmdbd.conf (marked as written by this script; a
#      slurm.conf without the mark -- a real installation -- is never touched): one node with
#      CPUs = nproc and RealMemory = MemTotal less a reserve, one partition `local` whose
#      limits are that node, accounting through slurmdbd with MariaDB so that `sacct` works;
#   3. starts munged, a private MariaDB (its own data directory and port on 127.0.0.1), slurmdbd,
#      registers the cluster, starts slurmctld and slurmd, and waits until the node is idle.
# Everything it writes at run time (state, logs, database, pid files) is under $STATE.
#
# Runs as root; as another user it re-runs itself through `sudo -n` (SLURM's slurmd must be
# root to start jobs as their owner).  Settings (environment):
#   OPTCOMP_SLURM_STATE    state directory              (default /var/lib/optcomp-slurm)
#   OPTCOMP_SLURM_DB_PORT  MariaDB port on 127.0.0.1    (default 16819)
#   OPTCOMP_SLURM_TIMEOUT  seconds to wait for a daemon (default 60)
set -euo pipefail

STATE=${OPTCOMP_SLURM_STATE:-/var/lib/optcomp-slurm}
DB_PORT=${OPTCOMP_SLURM_DB_PORT:-16819}
TIMEOUT=${OPTCOMP_SLURM_TIMEOUT:-60}
CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
DBD_CONF=$CONF_DIR/slurmdbd.conf
MARK="# written by optcomp workflow/cluster/local-slurm.sh"
CLUSTER=optcomp
PARTITION=local
PACKAGES=(munge slurmctld slurmd slurmdbd slurm-client mariadb-server)
DAEMONS=(slurmd slurmctld slurmdbd mariadbd munged)   # stop order; start order is the reverse

log() { printf 'local-slurm: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
    sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

[ $# -eq 1 ] || usage
ACTION=$1
case $ACTION in up | down | status) ;; *) usage ;; esac

if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        exec sudo -n --preserve-env=OPTCOMP_SLURM_STATE,OPTCOMP_SLURM_DB_PORT,OPTCOMP_SLURM_TIMEOUT "$0" "$@"
    fi
    die "must run as root, or as a user with passwordless sudo (slurmd starts jobs as their owner)"
fi

# munged and mariadbd drop root: their pid files, sockets and logs live in directories they own
pidfile() {
    case $1 in
        munged) echo "$STATE/munge/munged.pid" ;;
        mariadbd) echo "$STATE/mysql-run/mariadbd.pid" ;;
        *) echo "$STATE/run/$1.pid" ;;
    esac
}

logfile() {
    case $1 in
        munged) echo "$STATE/munge/munged.log" ;;
        mariadbd) echo "$STATE/mysql-run/mariadbd.log" ;;
        *) echo "$STATE/log/$1.log" ;;
    esac
}

# pid of a daemon this script started, if it still runs (checked by pid and by its command name)
running_pid() {
    local f pid
    f=$(pidfile "$1")
    [ -s "$f" ] || return 1
    pid=$(tr -dc '0-9' <"$f")
    [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] || return 1
    # /proc/PID/comm is cut to 15 characters
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "${1:0:15}" ] || return 1
    echo "$pid"
}

# wait_for SECONDS DESCRIPTION COMMAND...: poll COMMAND once a second until it succeeds
wait_for() {
    local limit=$1 what=$2 i
    shift 2
    for ((i = 0; i < limit; i++)); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 1
    done
    return 1
}

show_log() {  # the end of a daemon's log, for an error message
    local f
    f=$(logfile "$1")
    [ -f "$f" ] && tail -n 20 "$f" >&2 || true
}

# ------------------------------------------------------------------------------- install

install_packages() {
    local missing=() p
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null || die "missing packages ${missing[*]} and no apt-get: install them by hand"
    log "installing ${missing[*]} (Debian packages)"
    # no package may start its service: this script starts every daemon itself
    local policy=/usr/sbin/policy-rc.d added_policy=0
    if [ ! -e $policy ]; then
        printf '#!/bin/sh\nexit 101\n' >$policy && chmod 755 $policy && added_policy=1
    fi
    local rc=0
    {
        timeout 900 apt-get update -qq &&
            DEBIAN_FRONTEND=noninteractive timeout 1200 apt-get install -y -qq --no-install-recommends \
                -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${missing[@]}"
    } >"$STATE/log/apt.log" 2>&1 || rc=$?
    [ $added_policy -eq 1 ] && rm -f $policy
    if [ $rc -ne 0 ]; then
        tail -n 30 "$STATE/log/apt.log" >&2
        die "apt-get install ${missing[*]} failed (exit $rc; log $STATE/log/apt.log)"
    fi
}

# --------------------------------------------------------------------------- configuration

write_config() {
    local host cpus mem_kib mem reserve
    host=$(hostname -s)
    cpus=$(nproc)
    mem_kib=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
    mem=$((mem_kib / 1024))
    # leave the daemons, the database and the submitting Snakemake room: 5 %, at least 1 GiB
    reserve=$((mem / 20 > 1024 ? mem / 20 : 1024))
    mem=$((mem - reserve))
    [ "$mem" -ge 1024 ] || die "only $((mem + reserve)) MiB of memory: too little for a node"
    if [ -e "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
        die "$CONF exists and was not written by this script (a real SLURM installation?): not touching it"
    fi
    mkdir -p "$CONF_DIR"
    local new="$STATE/slurm.conf.new"
    cat >"$new" <<EOF
$MARK: a one-node cluster for trying the
# pipeline's cluster path.  Rewritten by every \`up\`; removed by \`down\`.
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
SwitchType=switch/none
# no cgroups here (containers, no systemd): processes tracked through /proc
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
# memory and CPU of every job sampled every 5 s: sacct reports MaxRSS and TotalCPU
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=5
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$host
AccountingStoragePort=6819
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
ReturnToService=2
MinJobAge=600
KillWait=10
InactiveLimit=0
SlurmctldTimeout=60
SlurmdTimeout=120
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$STATE/slurmctld
SlurmdSpoolDir=$STATE/slurmd
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
# the machine: $cpus CPUs (nproc), $((mem + reserve)) MiB (MemTotal) of which $reserve MiB are kept back
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=$PARTITION Nodes=$host Default=YES State=UP MaxTime=2-00:00:00 DefaultTime=01:00:00 MaxNodes=1 MaxCPUsPerNode=$cpus MaxMemPerNode=$mem DefMemPerCPU=$((mem / cpus))
EOF
    mv "$new" "$CONF"
    chmod 644 "$CONF"

    local pass
    [ -s "$STATE/db.pass" ] || (umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$STATE/db.pass")
    pass=$(cat "$STATE/db.pass")
    new="$STATE/slurmdbd.conf.new"
    (umask 077 && cat >"$new" <<EOF
$MARK
AuthType=auth/munge
DbdHost=$host
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=root
PidFile=$STATE/run/slurmdbd.pid
LogFile=$STATE/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$pass
StorageLoc=optcomp_slurm_acct
EOF
    )
    mv "$new" "$DBD_CONF"
    chmod 600 "$DBD_CONF"
}

# ------------------------------------------------------------------------------- daemons

start_munge() {
    if running_pid munged >/dev/null; then return 0; fi
    if [ ! -s /etc/munge/munge.key ]; then
        log "creating /etc/munge/munge.key"
        mkdir -p /etc/munge
        (umask 077 && dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none)
    fi
    chown munge:munge /etc/munge /etc/munge/munge.key
    chmod 700 /etc/munge
    chmod 400 /etc/munge/munge.key
    install -d -o munge -g munge -m 755 /run/munge /var/lib/munge /var/log/munge "$STATE/munge"
    # the default socket (/run/munge/munge.socket.2): SLURM's auth/munge finds it unconfigured
    if [ -S /run/munge/munge.socket.2 ] && munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
        die "a munged not started by this script answers on /run/munge/munge.socket.2: stop it first"
    fi
    rm -f /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock
    rm -f "$(pidfile munged)"
    runuser -u munge -- /usr/sbin/munged --pid-file="$(pidfile munged)" --log-file="$(logfile munged)" ||
        { show_log munged; die "munged did not start"; }
    wait_for "$TIMEOUT" munged test -s "$(pidfile munged)" || die "munged wrote no pid file"
    wait_for "$TIMEOUT" munge bash -c 'munge -n </dev/null | unmunge' ||
        { show_log munged; die "munge does not answer"; }
}

start_mariadb() {
    if running_pid mariadbd >/dev/null; then return 0; fi
    local data="$STATE/mysql" sock="$STATE/mysql-run/mysqld.sock"
    if [ ! -d "$data/mysql" ]; then
        log "initialising the accounting database in $data"
        install -d -o mysql -g mysql -m 700 "$data"
        mariadb-install-db --no-defaults --user=mysql --datadir="$data" --auth-root-authentication-method=socket \
            --skip-test-db >"$STATE/log/mariadb-install.log" 2>&1 ||
            { tail -n 20 "$STATE/log/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
    fi
    install -d -o mysql -g mysql -m 755 "$STATE/mysql-run"
    if (exec 3<>"/dev/tcp/127.0.0.1/$DB_PORT") 2>/dev/null; then
        die "port $DB_PORT on 127.0.0.1 is taken: set OPTCOMP_SLURM_DB_PORT to a free one"
    fi
    # its own data directory, socket and port (not the system's MariaDB, if any), loopback only
    nohup mariadbd --no-defaults --user=mysql --datadir="$data" --socket="$sock" \
        --pid-file="$(pidfile mariadbd)" --port="$DB_PORT" --bind-address=127.0.0.1 --skip-name-resolve \
        --log-error="$(logfile mariadbd)" --innodb-buffer-pool-size=64M --innodb-log-file-size=64M \
        --innodb-lock-wait-timeout=900 --max-connections=50 --performance-schema=OFF \
        </dev/null >/dev/null 2>&1 &
    wait_for "$TIMEOUT" mariadbd mariadb --no-defaults --socket="$sock" -u root -e 'SELECT 1' ||
        { show_log mariadbd; die "MariaDB did not answer within ${TIMEOUT} s"; }
    local pass
    pass=$(cat "$STATE/db.pass")
    mariadb --no-defaults --socket="$sock" -u root <<EOF || die "could not create the accounting database user"
CREATE DATABASE IF NOT EXISTS optcomp_slurm_acct;
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
GRANT ALL ON optcomp_slurm_acct.* TO 'slurm'@'127.0.0.1';
EOF
}

start_slurmdbd() {
    if ! running_pid slurmdbd >/dev/null; then
        SLURM_CONF=$CONF slurmdbd || { show_log slurmdbd; die "slurmdbd did not start"; }
    fi
    wait_for "$TIMEOUT" slurmdbd sacctmgr -n list cluster ||
        { show_log slurmdbd; die "slurmdbd did not answer within ${TIMEOUT} s"; }
    if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
        sacctmgr -i add cluster "$CLUSTER" >/dev/null || die "sacctmgr add cluster $CLUSTER failed"
    fi
}

start_slurmctld() {
    if ! running_pid slurmctld >/dev/null; then
        mkdir -p "$STATE/slurmctld"
        slurmctld || { show_log slurmctld; die "slurmctld did not start"; }
    fi
    wait_for "$TIMEOUT" slurmctld scontrol ping ||
        { show_log slurmctld; die "slurmctld did not answer within ${TIMEOUT} s"; }
}

start_slurmd() {
    if ! running_pid slurmd >/dev/null; then
        mkdir -p "$STATE/slurmd"
        slurmd || { show_log slurmd; die "slurmd did not start"; }
    fi
    local host
    host=$(hostname -s)
    # a node drained by an earlier run (e.g. killed jobs) is put back into service
    if sinfo -h -n "$host" -o %T 2>/dev/null | grep -qE 'drain|down'; then
        scontrol update nodename="$host" state=resume 2>/dev/null || true
    fi
    wait_for "$TIMEOUT" "the node" bash -c "sinfo -h -n '$host' -o %T | grep -qE '^(idle|mixed|allocated)'" || {
        sinfo -N -l >&2 || true
        show_log slurmd
        die "node $host did not become idle within ${TIMEOUT} s"
    }
}

# ------------------------------------------------------------------------------- actions

up() {
    local t0=$SECONDS
    mkdir -p "$STATE/log" "$STATE/run"
    chmod 755 "$STATE"
    install_packages
    write_config
    start_munge
    start_mariadb
    start_slurmdbd
    start_slurmctld
    start_slurmd
    # the accounting path the executor plugin uses: a finished job must show in sacct
    sacct -n -X -P -o JobID >/dev/null || die "sacct does not answer"
    log "up in $((SECONDS - t0)) s: partition '$PARTITION', $(sinfo -h -o '%c CPUs, %m MiB' | head -n 1); state and logs in $STATE"
}

stop_daemon() {
    local name=$1 pid i
    pid=$(running_pid "$name") || { rm -f "$(pidfile "$name")"; return 0; }
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < TIMEOUT; i++)); do
        [ -d "/proc/$pid" ] || break
        sleep 1
    done
    if [ -d "/proc/$pid" ]; then
        log "$name (pid $pid) ignored SIGTERM for ${TIMEOUT} s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 1
    fi
    rm -f "$(pidfile "$name")"
}

down() {
    # jobs first (their slurmstepd processes end with them), while slurmctld still answers
    if running_pid slurmctld >/dev/null && scontrol ping >/dev/null 2>&1; then
        if [ -n "$(squeue -h -o %i 2>/dev/null)" ]; then
            log "cancelling $(squeue -h -o %i | wc -l) job(s)"
            squeue -h -o %i | xargs -r scancel 2>/dev/null || true
            wait_for "$TIMEOUT" "jobs to end" bash -c '[ -z "$(squeue -h -o %i)" ]' ||
                log "some jobs did not end within ${TIMEOUT} s"
        fi
    fi
    local d
    for d in "${DAEMONS[@]}"; do stop_daemon "$d"; done
    # job steps end with their jobs (cancelled above); one that did not is reported, not guessed at
    local steps
    steps=$(ps -eo pid=,comm= | awk '$2 == "slurmstepd" {print $1}' | tr '\n' ' ')
    [ -z "$steps" ] || log "warning: slurmstepd still running (pids $steps): a job step that did not end"
    rm -f /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock
    if [ -e "$CONF" ] && grep -qF "$MARK" "$CONF"; then rm -f "$CONF" "$DBD_CONF"; fi
    local left=()
    for d in "${DAEMONS[@]}"; do running_pid "$d" >/dev/null && left+=("$d"); done
    [ ${#left[@]} -eq 0 ] || die "still running: ${left[*]}"
    log "down: no daemon of the local cluster runs (state kept in $STATE; delete it to start afresh)"
}

status() {
    local d pid ok=0
    for d in munged mariadbd slurmdbd slurmctld slurmd; do
        if pid=$(running_pid "$d"); then
            printf '%-10s running (pid %s)\n' "$d" "$pid"
        else
            printf '%-10s stopped\n' "$d"
            ok=1
        fi
    done
    if timeout 10 sinfo >/dev/null 2>&1; then
        timeout 10 sinfo -o '%P %a %l %D %c %m %T'
    else
        echo "sinfo: no answer"
        ok=1
    fi
    if timeout 10 sacct -n -X -o JobID >/dev/null 2>&1; then echo "sacct: answers"; else
        echo "sacct: no answer"
        ok=1
    fi
    return $ok
}

case $ACTION in
    up) up ;;
    down) down ;;
    status) status ;;
esac
