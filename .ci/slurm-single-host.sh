#!/usr/bin/env bash
# slurm-single-host.sh -- bring up a small Slurm "cluster" on this host, no systemd.
#
# stbench's copy of the reference script in ../shared/slurm, with one change: NODES slurmd
# daemons on this one host (Debian's Slurm is built with multiple-slurmd support), so that
# multi-node jobs (2 nodes x 1 task) really run through Slurm: $SLURM_NODEID, the job's node
# list and static torchrun rendezvous on its first host. The node names resolve to 127.0.0.1
# through /etc/hosts lines the script adds.
#
# Usage (as root):   slurm-single-host.sh [start|stop|status|selftest]   (default: start)
#   env NODES=2        slurmd daemons (Slurm nodes) on this host, named <host>-node1..N.
#   env WITH_DBD=0     skip MariaDB + slurmdbd (then `sacct` fails: "Slurm accounting
#                      storage is disabled"; submitit still returns results but job.state
#                      stays UNKNOWN; a cancelled/killed job should then make job.result()
#                      wait forever -- inferred from submitit code, not tested).
#   env NO_INSTALL=1   never call apt-get (fail if binaries are missing).
#   env WAIT_S=60      how long to wait for the node to become idle.
#
# Needs: Debian/Ubuntu, root, apt access (only if packages are missing), a hostname.
#   Packages: munge slurmctld slurmd slurm-client [+ slurmdbd mariadb-server].
#   All daemons run as root (SlurmUser=SlurmdUser=root) except munged (munge user)
#   and mariadbd (mysql user). No cgroups needed: proctrack/linuxproc + task/none.
#
# Verified 2026-11 on Debian 12 (bookworm), 2 vCPU / 24 GB VM, no systemd, as root:
#   Slurm 22.05.8-4+deb12u3, munge 0.5.15, MariaDB 10.11.
#   - `munge -n | unmunge` -> STATUS: Success
#   - sinfo: debug* up infinite 1 idle <host>
#   - srun -N1 -n2 hostname; sbatch --wait --wrap ...; 2-task job printing SLURM_PROCID 0/1
#   - submitit 1.5.4 AutoExecutor(cluster="slurm"), nodes=1, tasks_per_node=2:
#     results() -> 2 ranks; map_array; FailedJobError propagated; job.cancel() ->
#     UncompletedJobError with state "CANCELLED by 0" (this last one needs sacct, i.e. slurmdbd).
#   Timings from wiped state (no spool, no conf, no DB), packages installed:
#     0.2 s WITH_DBD=0, 2.9 s with MariaDB+slurmdbd (schema creation included);
#     re-running `start` on a running cluster: 0.8 s (no-op).
#   Including apt: whole `start` after a purge 17 s (debs already in apt cache);
#     first ever install with download: apt-get update 2 s + core 13 s + dbd/mariadb 18 s.
#   Latency notes: `sbatch --wait` polls (2 s, then up to 10 s); submitit polls sacct.
#   Not tested: TIMEOUT of a job, non-root submitters, Ubuntu / other Slurm versions.
#
# Daemons are started detached and keep running after this script exits; call
# `slurm-single-host.sh stop` (kills by pid file only) at the end of the CI job.
set -euo pipefail

ACTION=${1:-start}
WITH_DBD=${WITH_DBD:-1}
NO_INSTALL=${NO_INSTALL:-0}
WAIT_S=${WAIT_S:-60}
NODES=${NODES:-2}
CLUSTER=ci
PARTITION=debug
H=$(hostname -s)
NODE_NAMES=$(seq -f "$H-node%g" 1 "$NODES" | tr '\n' ' ')
LOG=/var/log/slurm
RUN=/run/slurm
DB_SOCK=/run/mysqld/mysqld.sock

log() { echo "[slurm-single-host] $*" >&2; }
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
stop_pidfile() {   # stop_pidfile NAME FILE
  local f=$2 p
  if alive "$f"; then
    p=$(cat "$f"); log "stopping $1 (pid $p)"; kill "$p"
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && { log "$1 still alive, SIGKILL"; kill -9 "$p"; }
  fi
  rm -f "$f"
}

do_stop() {
  local f
  for f in $RUN/slurmd-*.pid; do [ -e "$f" ] && stop_pidfile slurmd "$f"; done
  stop_pidfile slurmd    $RUN/slurmd.pid
  stop_pidfile slurmctld $RUN/slurmctld.pid
  stop_pidfile slurmdbd  $RUN/slurmdbd.pid
  stop_pidfile mariadbd  /run/mysqld/mysqld.pid
  stop_pidfile munged    /run/munge/munged.pid
}

install_pkgs() {
  local pkgs="munge slurmctld slurmd slurm-client"
  [ "$WITH_DBD" = 1 ] && pkgs="$pkgs slurmdbd mariadb-server"
  local missing=""
  for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
  [ -z "$missing" ] && return 0
  [ "$NO_INSTALL" = 1 ] && { log "missing packages:$missing (NO_INSTALL=1)"; exit 1; }
  log "installing:$missing"
  # keep postinst from starting services through init scripts
  local tmp_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; tmp_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends $missing >/dev/null
  [ "$tmp_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
  return 0
}

ensure_hostname() {
  # slurmctld/slurmd must resolve the short hostname (SlurmctldHost / NodeAddr)
  if ! getent hosts "$H" >/dev/null; then
    log "adding '$H' to /etc/hosts"; echo "127.0.0.1 $H" >> /etc/hosts
  fi
  # the emulated nodes' names: torchrun's rendezvous address is the job's first node name
  local n
  for n in $NODE_NAMES; do
    getent hosts "$n" >/dev/null || { log "adding '$n' to /etc/hosts"; echo "127.0.0.1 $n" >> /etc/hosts; }
  done
}

start_munge() {
  install -d -o munge -g munge -m 0700 /etc/munge
  install -d -o munge -g munge -m 0755 /run/munge
  install -d -o munge -g munge -m 0700 /var/log/munge /var/lib/munge
  if [ ! -s /etc/munge/munge.key ]; then
    log "creating munge key"; mungekey -c -f -k /etc/munge/munge.key
  fi
  chown munge:munge /etc/munge/munge.key; chmod 0400 /etc/munge/munge.key
  if ! alive /run/munge/munged.pid; then
    log "starting munged"; runuser -u munge -- /usr/sbin/munged
  fi
  for _ in $(seq 1 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return 0; sleep 0.1; done
  log "munge self-check failed"; munge -n | unmunge; exit 1
}

write_conf() {
  local ncpu mem acct
  ncpu=$(nproc)
  mem=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
  mem=$(( mem * 9 / 10 ))     # a bit below detected memory, else the node is drained
  if [ "$WITH_DBD" = 1 ]; then
    acct="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$H"
  else
    acct="AccountingStorageType=accounting_storage/none"
  fi
  mkdir -p /etc/slurm /var/spool/slurmctld $LOG $RUN
  local n
  for n in $NODE_NAMES; do mkdir -p "/var/spool/slurmd/$n"; done
  cat > /etc/slurm/slurm.conf.new <<EOF
# generated by slurm-single-host.sh
ClusterName=$CLUSTER
SlurmctldHost=$H
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
$acct
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
NodeName=$H-node[1-$NODES] NodeHostname=$H NodeAddr=127.0.0.1 Port=[17001-$((17000 + NODES))] CPUs=$ncpu RealMemory=$mem State=UNKNOWN
PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
EOF
  if ! cmp -s /etc/slurm/slurm.conf.new /etc/slurm/slurm.conf; then
    mv /etc/slurm/slurm.conf.new /etc/slurm/slurm.conf; CONF_CHANGED=1
  else
    rm -f /etc/slurm/slurm.conf.new; CONF_CHANGED=0
  fi
  if [ "$WITH_DBD" = 1 ]; then
    cat > /etc/slurm/slurmdbd.conf <<EOF
AuthType=auth/munge
DbdHost=$H
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=ci
StorageLoc=slurm_acct_db
LogFile=$LOG/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
EOF
    chmod 600 /etc/slurm/slurmdbd.conf
  fi
}

start_dbd() {
  install -d -o mysql -g mysql -m 0755 /run/mysqld
  if ! alive /run/mysqld/mysqld.pid; then
    log "starting mariadbd"
    setsid /usr/sbin/mariadbd --user=mysql --skip-networking --socket=$DB_SOCK \
      --pid-file=/run/mysqld/mysqld.pid >$LOG/mariadb.log 2>&1 </dev/null &
  fi
  local ok=0
  for _ in $(seq 1 120); do mysqladmin --socket=$DB_SOCK ping >/dev/null 2>&1 && { ok=1; break; }; sleep 0.25; done
  [ $ok = 1 ] || { log "mariadb did not come up"; tail -20 $LOG/mariadb.log; exit 1; }
  mysql --socket=$DB_SOCK -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
    CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'ci';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
  if ! alive $RUN/slurmdbd.pid; then log "starting slurmdbd"; slurmdbd; fi
  ok=0
  for _ in $(seq 1 120); do
    sacctmgr -n -P show cluster >/dev/null 2>&1 && { ok=1; break; }
    alive $RUN/slurmdbd.pid || sleep 0.5   # pid file may lag the fork; dies -> fail below
    alive $RUN/slurmdbd.pid || break
    sleep 0.25
  done
  [ $ok = 1 ] || { log "slurmdbd did not answer"; tail -20 $LOG/slurmdbd.log; exit 1; }
  if [ -z "$(sacctmgr -n -P show cluster "$CLUSTER" format=cluster)" ]; then
    sacctmgr -i add cluster "$CLUSTER" >/dev/null
  fi
}

start_slurm() {
  local n f
  if alive $RUN/slurmctld.pid && [ "$CONF_CHANGED" = 1 ]; then
    stop_pidfile slurmctld $RUN/slurmctld.pid; stop_pidfile slurmd $RUN/slurmd.pid
    for f in $RUN/slurmd-*.pid; do [ -e "$f" ] && stop_pidfile slurmd "$f"; done
  fi
  if ! alive $RUN/slurmctld.pid; then log "starting slurmctld"; slurmctld; fi
  for n in $NODE_NAMES; do
    if ! alive "$RUN/slurmd-$n.pid"; then log "starting slurmd $n"; slurmd -N "$n"; fi
  done
  local s=""
  for _ in $(seq 1 $(( WAIT_S * 4 ))); do
    s=$(sinfo -h -o %t 2>/dev/null | sort -u | tr '\n' ' ' || true)
    [ "$s" = "idle " ] && break
    case "$s" in *drain*|*down*) scontrol update nodename="$H-node[1-$NODES]" state=resume 2>/dev/null || true;; esac
    sleep 0.25
  done
  if [ "$s" != "idle " ]; then
    log "node states '$s' after ${WAIT_S}s"; scontrol show node || true
    tail -20 $LOG/slurmctld.log $LOG/slurmd-*.log; exit 1
  fi
  log "nodes $NODE_NAMES idle"; sinfo >&2
}

selftest() {
  local d; d=$(mktemp -d); cd "$d"
  srun -N1 -n2 hostname
  srun -N1 -n2 -l python3 -c 'import os; print(os.environ["SLURM_PROCID"])'
  srun -N"$NODES" --ntasks-per-node=1 -l bash -c 'echo "node $SLURM_NODEID of $SLURM_STEP_NODELIST"'
  sbatch --wait -o "$d/out" --wrap 'echo hi; env | grep ^SLURM_JOB_ID'; cat "$d/out"
  if [ "$WITH_DBD" = 1 ]; then sleep 1; sacct -X -o JobID,JobName,State,ExitCode | tail -3; fi
}

case "$ACTION" in
  start)
    t0=$(date +%s)
    install_pkgs; ensure_hostname; start_munge; write_conf
    [ "$WITH_DBD" = 1 ] && start_dbd
    start_slurm
    log "ready in $(( $(date +%s) - t0 )) s (slurm $(dpkg-query -W -f='${Version}' slurmctld))"
    ;;
  stop) do_stop ;;
  status)
    for f in /run/munge/munged.pid /run/mysqld/mysqld.pid $RUN/slurmdbd.pid $RUN/slurmctld.pid $RUN/slurmd-*.pid; do
      if alive "$f"; then echo "up   $f $(cat "$f")"; else echo "down $f"; fi
    done
    sinfo 2>/dev/null || true ;;
  selftest) selftest ;;
  *) echo "usage: $0 [start|stop|status|selftest]" >&2; exit 2 ;;
esac
