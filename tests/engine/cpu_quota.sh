#!/bin/sh
# cpu_quota.sh QUOTA_US COMMAND...: COMMAND in a new cgroup whose CPU quota is QUOTA_US microseconds per
# 100,000 (100000: one CPU), as a Kubernetes CPU limit or `docker run --cpus` makes one; the cgroup is
# removed afterwards. cgroup v1's cpu controller or cgroup v2 (with the cpu controller delegated to the
# root's children). Exits with COMMAND's status; prints "skipped: WHY" and exits 0 where no cgroup can be
# made (not root, a read-only /sys/fs/cgroup, no cpu controller).
quota=$1
shift
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
if [ -w /sys/fs/cgroup/cpu/cgroup.procs ] && [ -e /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
  make_cgroup /sys/fs/cgroup/cpu/accel_quota_$$ cpu.cfs_period_us=100000 cpu.cfs_quota_us="$quota"
elif [ -w /sys/fs/cgroup/cgroup.subtree_control ] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  echo +cpu > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
  make_cgroup /sys/fs/cgroup/accel_quota_$$ cpu.max="$quota 100000"
fi
if [ -z "$dir" ]; then
  echo "skipped: no cgroup with a CPU quota can be made here (root and a writable cgroup v1 cpu or v2 hierarchy needed)"
  exit 0
fi
sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' cpu_quota "$dir" "$@"
status=$?
rmdir "$dir" 2>/dev/null
exit $status
