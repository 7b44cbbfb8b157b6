#!/bin/sh
# Seed 001's extraction pipeline, as its author ran it on the containerd journal:
#   journalctl -u containerd -S '40m ago' |& grep sandbox=ID | awk -F'vmconsole=' '{ print $2 }' | jq -r > vmconsole.txt
# Usage: seed-pipeline.sh JOURNAL SANDBOX_ID > vmconsole.txt
# (jq -r with the default filter `.`; the values are JSON strings holding console lines.)
set -eu
[ $# -eq 2 ] || { echo "usage: $0 JOURNAL SANDBOX_ID" >&2; exit 2; }
grep "sandbox=$2" "$1" | awk -F'vmconsole=' '{ print $2 }' | jq -r .
