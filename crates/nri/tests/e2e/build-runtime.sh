#!/usr/bin/env bash
# Build the container runtime that the NRI end-to-end tests drive (crates/nri/tests/support):
#
#   containerd, ctr, containerd-shim-runc-v2   containerd v2.4.2 (NRI v0.12.3 inside)
#   runc                                       runc v1.5.3, with seccomp (cgo + libseccomp)
#   crictl                                     cri-tools v1.37.0
#
# Usage: crates/nri/tests/e2e/build-runtime.sh [DIR]
#
# DIR defaults to ${CARGO_TARGET_DIR:-<repository>/target}/nri-runtime, where the tests look
# for it (or set VMTUNE_NRI_RUNTIME=DIR for the tests). Everything comes from the Go module
# proxy with `go install MODULE/PATH@VERSION` (pinned versions, never @latest); nothing else is
# downloaded. Needs Go, and for runc a C compiler, pkg-config and libseccomp's headers
# (Debian: apt-get install gcc pkg-config libseccomp-dev).
#
# A binary already in DIR is kept when its stamp (DIR/.stamps/NAME: what it was built from,
# and the binary's sha256) still matches; a changed version, a replaced or truncated binary
# is rebuilt. Prints one line per binary: built (with the seconds it took) or up to date.
# Exit status: 0 when all five binaries are in DIR, 1 on the first failure (with go's output).
set -euo pipefail

CONTAINERD_VERSION=v2.4.2
RUNC_VERSION=v1.5.3
CRICTL_VERSION=v1.37.0

case "${1:-}" in
  -h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
esac

repo=$(cd "$(dirname "$0")/../../../.." && pwd)
dir=${1:-${CARGO_TARGET_DIR:-$repo/target}/nri-runtime}
mkdir -p "$dir/.stamps"
dir=$(cd "$dir" && pwd)

die() {
  echo "build-runtime.sh: $*" >&2
  exit 1
}

command -v go >/dev/null 2>&1 || die "go not found on PATH (install Go >= 1.24)"

# NAME PACKAGE@VERSION [ENV=VALUE ...] [-- GO-INSTALL-FLAGS ...]
build() {
  local name=$1 spec=$2
  shift 2
  local envs=() flags=()
  while [ $# -gt 0 ]; do
    if [ "$1" = -- ]; then
      shift
      flags=("$@")
      break
    fi
    envs+=("$1")
    shift
  done
  local bin="$dir/$name" stamp="$dir/.stamps/$name"
  local want="$spec ${envs[*]-} ${flags[*]-}"
  if [ -x "$bin" ] && [ -f "$stamp" ]; then
    local have_spec have_sum
    have_spec=$(sed -n 1p "$stamp")
    have_sum=$(sed -n 2p "$stamp")
    if [ "$have_spec" = "$want" ] && [ "$have_sum" = "$(sha256sum "$bin" | cut -d' ' -f1)" ]; then
      echo "$name ${spec##*@}: up to date ($bin)"
      return 0
    fi
  fi
  [ -z "${PRECHECK:-}" ] || "$PRECHECK"
  # go install writes into GOBIN; build into a scratch dir and move the binary in, so that an
  # interrupted build never leaves a half-written binary under the final name
  local scratch="$dir/.build-$name"
  rm -rf "$scratch" "$stamp"
  mkdir -p "$scratch"
  local t0 log="$dir/.stamps/$name.log"
  t0=$(date +%s)
  if ! env GOFLAGS="-mod=mod -buildvcs=false" GOBIN="$scratch" "${envs[@]}" \
    go install ${flags[@]+"${flags[@]}"} "$spec" >"$log" 2>&1; then
    cat "$log" >&2
    rm -rf "$scratch"
    die "$name: go install $spec failed (output above; also in $log)"
  fi
  [ -x "$scratch/$name" ] || die "$name: go install $spec made no $scratch/$name"
  mv -f "$scratch/$name" "$bin"
  rm -rf "$scratch" "$log"
  printf '%s\n%s\n' "$want" "$(sha256sum "$bin" | cut -d' ' -f1)" >"$stamp"
  echo "$name ${spec##*@}: built in $(($(date +%s) - t0)) s ($bin)"
}

# cgo off: static binaries (as containerd's releases ship the shim), no C toolchain needed
for name in containerd ctr containerd-shim-runc-v2; do
  build "$name" "github.com/containerd/containerd/v2/cmd/$name@$CONTAINERD_VERSION" CGO_ENABLED=0
done

# runc with seccomp: a pod's seccomp profile (RuntimeDefault) needs it, and its errors name the
# failing step (Debian's runc 1.1.5 also works, but reports failures with far less detail).
runc_prerequisites() {
  command -v "${CC:-gcc}" >/dev/null 2>&1 || die "runc: no C compiler (${CC:-gcc}); apt-get install gcc"
  command -v pkg-config >/dev/null 2>&1 || die "runc: no pkg-config; apt-get install pkg-config"
  pkg-config --exists libseccomp || die "runc: no libseccomp headers; apt-get install libseccomp-dev"
}
PRECHECK=runc_prerequisites build runc "github.com/opencontainers/runc@$RUNC_VERSION" CGO_ENABLED=1 -- -tags seccomp

build crictl "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION" CGO_ENABLED=0
