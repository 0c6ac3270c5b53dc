#!/bin/sh
# small_disk.sh SIZE DIR COMMAND...: COMMAND with a tmpfs of SIZE over DIR (run it in a mount namespace
# of its own: unshare -m), then what COMMAND left in DIR, two levels deep, one "left: PATH" line each
# (sorted; a link with " -> TARGET"); exits with COMMAND's status (99: the tmpfs could not be mounted).
size=$1
dir=$2
shift 2
mount -t tmpfs -o "size=$size" tmpfs "$dir" || exit 99
"$@"
status=$?
find "$dir" -mindepth 1 -maxdepth 2 \( -type l -printf 'left: %P -> %l\n' \) -o -printf 'left: %P\n' | LC_ALL=C sort
exit $status
