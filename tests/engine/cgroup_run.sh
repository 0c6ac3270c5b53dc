#!/bin/sh
# cgroup_run.sh cpu QUOTA_US COMMAND...    COMMAND in a new cgroup whose CPU quota is QUOTA_US microseconds
#                                          per 100,000 (100000: one CPU)
# cgroup_run.sh memory BYTES COMMAND...    ... whose memory limit is BYTES
# as a Kubernetes limit or `docker run --cpus / --memory` makes one; the cgroup is removed afterwards.
# cgroup v1 (the controller's own hierarchy) or v2 (the controller delegated to the root's children).
# Exits with COMMAND's status; prints "skipped: WHY" and exits 0 where no such cgroup can be made (not
# root, a read-only /sys/fs/cgroup, no such controller).
kind=$1
value=$2
shift 2
dir=
# make_cgroup DIR FILE=VALUE...: the cgroup with those settings, or none (removed again where one fails)
make_cgroup() {
  d=$1
  shift
  mkdir "$d" 2>/dev/null || return 1
  for setting in "$@"; do
    if ! echo "${setting#*=}" > "$d/${setting%%=*}" 2>/dev/null; then
      rmdir "$d"
      return 1
    fi
  done
  dir=$d
}
v1=/sys/fs/cgroup/$kind
if [ -w "$v1/cgroup.procs" ]; then
  case $kind in
    cpu) make_cgroup "$v1/accel_limit_$$" cpu.cfs_period_us=100000 cpu.cfs_quota_us="$value" ;;
    memory) make_cgroup "$v1/accel_limit_$$" memory.limit_in_bytes="$value" ;;
  esac
elif [ -w /sys/fs/cgroup/cgroup.subtree_control ] && grep -qw "$kind" /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  echo "+$kind" > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
  case $kind in
    cpu) make_cgroup /sys/fs/cgroup/accel_limit_$$ cpu.max="$value 100000" ;;
    memory) make_cgroup /sys/fs/cgroup/accel_limit_$$ memory.max="$value" ;;
  esac
fi
if [ -z "$dir" ]; then
  echo "skipped: no cgroup with a $kind limit can be made here (root and a writable cgroup v1 $kind or v2 hierarchy needed)"
  exit 0
fi
sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' cgroup_run "$dir" "$@"
status=$?
rmdir "$dir" 2>/dev/null
exit $status
