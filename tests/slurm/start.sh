#!/usr/bin/env bash
# Starts a one-node Slurm of its own in DIR (munged, slurmctld, slurmd):
# slurm.conf with 8 GPUs as character devices (each in 8 shards, for jobs that
# share a GPU), state, spool, logs and pid
# files all under DIR. Prints nothing on success; exits non-zero, with the
# daemons' logs, when the node is not up within 30 s. Stop it with stop.sh DIR.
set -euo pipefail
dir=${1:?usage: start.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
# Daemons an interrupted earlier run left: stopped first, and their jobs forgotten.
bash "$(dirname "$0")/stop.sh" "$dir"
rm -rf "$dir/state" "$dir/spool" "$dir"/*.log
mkdir -p "$dir/state" "$dir/spool" "$dir/dev" "$dir/munge"
for n in 0 1 2 3 4 5 6 7; do
  [ -e "$dir/dev/nvidia$n" ] || mknod "$dir/dev/nvidia$n" c 195 "$n"
done
cpus=64  # more than the machine has: config_overrides lets slurmd take them
# Two free ports (slurmctld's and slurmd's), from 16817 up, unless GPUQ_SLURM_PORT names them:
# another Slurm on this machine (a second checkout's tests) does not collide.
port=${GPUQ_SLURM_PORT:-}
if [ -z "$port" ]; then
  used=$(awk '$4 == "0A" {split($2, a, ":"); print a[2]}' /proc/net/tcp /proc/net/tcp6 2>/dev/null |
    while read -r hex; do echo $((16#$hex)); done)  # the listening ports
  port=16817
  while grep -qxE "$port|$((port + 1))" <<<"$used"; do port=$((port + 2)); done
fi
cat > "$dir/slurm.conf" <<CONF
ClusterName=gpuqtest
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
GresTypes=gpu,shard
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
PriorityType=priority/basic
KillWait=2
InactiveLimit=0
MinJobAge=2
MaxJobCount=20000
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=localhost CPUs=$cpus Sockets=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=1000 Gres=gpu:8,shard:64 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
cat > "$dir/gres.conf" <<CONF
AutoDetect=off
Name=gpu File=$dir/dev/nvidia[0-7]
Name=shard Count=64 File=$dir/dev/nvidia[0-7]
CONF
[ -s "$dir/munge/munge.key" ] || { dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 2>/dev/null; chmod 400 "$dir/munge/munge.key"; }
chmod 711 "$dir/munge"
munged --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/seed" -f
export SLURM_CONF=$dir/slurm.conf
# The slurm daemons find munge's socket through AuthInfo.
sed -i "s|^AuthType=auth/munge|AuthType=auth/munge\nAuthInfo=socket=$dir/munge/munge.socket|" "$dir/slurm.conf"
slurmctld -i
slurmd
for i in $(seq 1 300); do
  if sinfo -h -o '%t' 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then exit 0; fi
  sleep 0.1
done
echo "tests/slurm/start.sh: the one-node Slurm in $dir is not up after 30 s" >&2
sinfo >&2 || true
tail -n 30 "$dir/slurmctld.log" "$dir/slurmd.log" "$dir/munge/munged.log" >&2 || true
exit 1
