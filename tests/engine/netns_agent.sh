#!/bin/sh
# Open MPI's plm_rsh_agent for run_dp.cmake's two_machines scenario: "netns_agent.sh HOST command..."
# runs the command in the network namespace of HOST (named in $ENGINE_NETNS_MAP as "ip=ns ip=ns"),
# as ssh would run it on that machine.
host=$1
shift
for pair in $ENGINE_NETNS_MAP; do
  if [ "${pair%%=*}" = "$host" ]; then
    exec ip netns exec "${pair#*=}" sh -c "$*"
  fi
done
echo "netns_agent.sh: no namespace for host $host" >&2
exit 1
