#!/usr/bin/env bash
# Build the node agent's container image, vmtune.local/vmtune:VERSION (VERSION from the
# workspace Cargo.toml), as an OCI image-layout tar, without a registry, docker or a base
# image: the vmtune binary, the glibc loader and shared libraries `ldd` lists for it (each at
# the path ldd names), and an empty /etc/vmtune (where deploy/kubernetes mounts nri.toml).
# Entrypoint ["/usr/bin/vmtune"]. The tar is made by deploy/oci-image.sh; import it on each
# node with
#
#   ctr -n k8s.io images import target/vmtune-image-VERSION.tar
#
# (deploy/kubernetes/daemonset.yaml runs it with imagePullPolicy: Never).
#
# Usage: deploy/image.sh [--binary PATH] [--out OUT.tar] [--strip] [--check]
#
#   --binary PATH   the vmtune binary (default: ${CARGO_TARGET_DIR:-target}/release/vmtune;
#                   build it with cargo build --release -p vmtune)
#   --out OUT.tar   the image tar (default: ${CARGO_TARGET_DIR:-target}/vmtune-image-VERSION.tar)
#   --strip         strip the binary's debug information in the image (symbols stay, so a
#                   panic's backtrace still names functions; a debug build shrinks from
#                   ~220 MB to ~35 MB). Default: the binary as cargo built it.
#   --check         after writing, unpack the image's layer into a temporary directory and
#                   run `vmtune --version` there: with chroot when root (the image's own
#                   loader, library paths and nothing of the host), else through the image's
#                   loader with --library-path (the libraries suffice, the paths unchecked)
#
# Relative paths are taken from the current directory; the defaults from the repository.
# Prints oci-image.sh's line (name, manifest digest, path) and the tar's size. Needs bash,
# ldd, GNU tar, gzip, sha256sum, jq (and strip for --strip). Exit status 2 on errors.
set -euo pipefail

prog=image.sh
die() {
  echo "$prog: $*" >&2
  exit 2
}
usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
}

repo=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-target}
case "$target" in /*) ;; *) target=$repo/$target ;; esac

binary= out= strip=false check=false
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help)
      usage
      exit 0
      ;;
    --binary | --out)
      [ $# -ge 2 ] || die "$1 needs a value (see --help)"
      case "$1" in
        --binary) binary=$2 ;;
        --out) out=$2 ;;
      esac
      shift 2
      ;;
    --binary=*) binary=${1#*=} && shift ;;
    --out=*) out=${1#*=} && shift ;;
    --strip) strip=true && shift ;;
    --check) check=true && shift ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

# the workspace's version: [workspace.package] version = "X.Y.Z"
version=$(sed -n '/^\[workspace\.package\]/,/^\[/{s/^version[[:space:]]*=[[:space:]]*"\([^"]*\)".*/\1/p}' "$repo/Cargo.toml" | head -1)
[ -n "$version" ] || die "no version in [workspace.package] of $repo/Cargo.toml"
name=vmtune.local/vmtune:$version

binary=${binary:-$target/release/vmtune}
out=${out:-$target/vmtune-image-$version.tar}
[ -f "$binary" ] || die "no vmtune binary at $binary (cargo build --release -p vmtune, or give --binary)"
[ -x "$binary" ] || die "$binary is not executable"
command -v ldd >/dev/null 2>&1 || die "ldd not found on PATH"
oci_image=$repo/deploy/oci-image.sh
[ -f "$oci_image" ] || die "$oci_image is missing"

work=$(mktemp -d "${TMPDIR:-/tmp}/vmtune-image.XXXXXX")
trap 'rm -rf "$work"' EXIT

if $strip; then
  command -v strip >/dev/null 2>&1 || die "--strip: strip not found on PATH (binutils)"
  strip --strip-debug -o "$work/vmtune" "$binary" || die "--strip: strip $binary failed"
  binary=$work/vmtune
fi

# What the binary loads: the loader (a line with a path and no =>) and each library
# (NAME => PATH). The vDSO has no file; a missing library is an error.
ldd_out=$(LC_ALL=C ldd "$binary" 2>&1) || {
  case "$ldd_out" in
    *"not a dynamic executable"* | *"statically linked"*) ldd_out= ;;
    *) die "ldd $binary failed: $ldd_out" ;;
  esac
}
libs=()
while read -r line; do
  [ -n "$line" ] || continue
  case "$line" in
    *"not found"*) die "ldd $binary: $line" ;;
    *"statically linked"*) continue ;;
    *" => "*)
      path=${line#* => }
      path=${path%% (*}
      ;;
    /*) path=${line%% (*} ;;
    *) continue ;; # linux-vdso.so.1, linux-gate.so.1: in the kernel
  esac
  [[ "$path" == /* ]] || die "ldd $binary: no absolute path in '$line'"
  [ -f "$path" ] || die "ldd $binary: $path is not a file"
  libs+=("$path")
done <<<"$ldd_out"

args=(--name "$name" --out "$out" --entrypoint '["/usr/bin/vmtune"]'
  --file "$binary:/usr/bin/vmtune:0755" --dir /etc/vmtune:0755
  --label "org.opencontainers.image.title=vmtune"
  --label "org.opencontainers.image.version=$version"
  --label "org.opencontainers.image.description=vmtune's containerd NRI node agent (vmtune nri)")
for lib in ${libs[@]+"${libs[@]}"}; do
  args+=(--file "$lib:$lib:0755")
done

bash "$oci_image" "${args[@]}"
size=$(stat -c %s "$out")
echo "$out: $size bytes ($(( (size + 524288) / 1048576 )) MiB); the binary and ${#libs[@]} files of ldd's"

$check || exit 0

# Unpack the layer as containerd would (the one gzip layer the manifest names) and run it.
mkdir "$work/layout" "$work/rootfs"
tar -xf "$out" -C "$work/layout" || die "--check: cannot unpack $out"
manifest=$(jq -r '.manifests[0].digest' "$work/layout/index.json")
layer=$(jq -r '.layers[0].digest' "$work/layout/blobs/sha256/${manifest#sha256:}")
tar -xzf "$work/layout/blobs/sha256/${layer#sha256:}" -C "$work/rootfs" ||
  die "--check: cannot unpack the layer $layer"
if [ "$(id -u)" = 0 ] && command -v chroot >/dev/null 2>&1; then
  how="chroot $work/rootfs /usr/bin/vmtune --version"
  got=$(env -i PATH=/usr/bin "$(command -v chroot)" "$work/rootfs" /usr/bin/vmtune --version 2>&1) ||
    die "--check: $how failed: $got"
else
  interp=
  for lib in ${libs[@]+"${libs[@]}"}; do
    case "$(basename "$lib")" in ld-linux* | ld64* | ld-musl*) interp=$lib ;; esac
  done
  [ -n "$interp" ] || die "--check without root needs the image's loader; ldd listed none"
  lib_path=$(for lib in "${libs[@]}"; do dirname "$work/rootfs$lib"; done | sort -u | paste -sd:)
  how="$interp --library-path ... /usr/bin/vmtune --version (not root: no chroot)"
  got=$(env -i "$work/rootfs$interp" --library-path "$lib_path" "$work/rootfs/usr/bin/vmtune" --version 2>&1) ||
    die "--check: $how failed: $got"
fi
case "$got" in
  *"$version"*) echo "check: $how: $got" ;;
  *) die "--check: $how printed '$got', not version $version" ;;
esac
