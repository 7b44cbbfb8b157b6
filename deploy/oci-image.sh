#!/usr/bin/env bash
# Make a one-layer OCI image as an image-layout tar, without a registry or docker: the tar
# imports with `ctr -n k8s.io images import OUT.tar` (containerd), and is what
# `skopeo copy oci-archive:OUT.tar ...` or `podman load` read.
#
# Usage:
#   deploy/oci-image.sh --name REF --out OUT.tar [--entrypoint JSON] [--cmd JSON]
#                       [--file SRC:DEST[:MODE]]... [--dir DEST[:MODE]]...
#                       [--symlink DEST=TARGET]... [--env NAME=VALUE]... [--workdir DIR]
#                       [--user USER] [--label KEY=VALUE]... [--arch ARCH]
#
#   --name REF          the image's full reference, registry host and tag included
#                       (vmtune.local/busybox:1): CRI looks images up by that normalized
#                       name, so a short one (busybox) is refused
#   --out OUT.tar       the image-layout tar to write (written whole or not at all)
#   --entrypoint JSON   the entrypoint as a JSON array of strings: '["/bin/sleep","60"]'
#   --cmd JSON          the default arguments, a JSON array of strings
#   --file SRC:DEST[:MODE]
#                       put the file SRC (symlinks followed) at the absolute path DEST, with
#                       the octal MODE (default 0755 when SRC is executable, else 0644)
#   --dir DEST[:MODE]   an empty directory (default 0755; e.g. --dir /tmp:1777)
#   --symlink DEST=TARGET
#                       a symbolic link DEST pointing at TARGET as written (relative or
#                       absolute): --symlink /bin/sh=busybox
#   --env NAME=VALUE    an environment variable (PATH defaults to the usual one)
#   --workdir DIR       the working directory (default /)
#   --user USER         the user to run as (default: the runtime's, root)
#   --label KEY=VALUE   an image config label
#   --arch ARCH         the platform's architecture (default: this machine's, as Go spells
#                       it: amd64, arm64, ...); the OS is linux
#
# Parent directories of every entry are created with mode 0755. Every entry belongs to
# 0:0. The output is reproducible: the same inputs give the same bytes (entries sorted by
# name, every mtime 0, no user or group names, gzip -n, JSON with sorted keys).
#
# The tar holds: oci-layout, index.json (one manifest descriptor with the platform and the
# annotations io.containerd.image.name = REF and org.opencontainers.image.ref.name = its tag,
# as containerd's own export writes them), and blobs/sha256/ with the gzip layer, the image
# config and the manifest. Prints the manifest digest and the output path.
#
# Needs bash, coreutils, GNU tar, gzip, sha256sum and jq.
set -euo pipefail

prog=oci-image.sh
die() {
  echo "$prog: $*" >&2
  exit 2
}
usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
}

name= out= entrypoint=null cmd=null workdir=/ user= arch=
files=() dirs=() symlinks=() envs=() labels=()
while [ $# -gt 0 ]; do
  opt=$1
  case "$opt" in
    -h | --help)
      usage
      exit 0
      ;;
    --name | --out | --entrypoint | --cmd | --file | --dir | --symlink | --env | --workdir | --user | --label | --arch)
      [ $# -ge 2 ] || die "$opt needs a value (see --help)"
      val=$2
      shift 2
      ;;
    --*=*)
      # --opt=value
      set -- "${opt%%=*}" "${opt#*=}" "${@:2}"
      continue
      ;;
    *) die "unknown argument '$opt' (see --help)" ;;
  esac
  case "$opt" in
    --name) name=$val ;;
    --out) out=$val ;;
    --entrypoint) entrypoint=$val ;;
    --cmd) cmd=$val ;;
    --file) files+=("$val") ;;
    --dir) dirs+=("$val") ;;
    --symlink) symlinks+=("$val") ;;
    --env) envs+=("$val") ;;
    --workdir) workdir=$val ;;
    --user) user=$val ;;
    --label) labels+=("$val") ;;
    --arch) arch=$val ;;
  esac
done

for tool in tar gzip sha256sum jq; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found on PATH"
done
[ -n "$name" ] || die "--name is required (see --help)"
[ -n "$out" ] || die "--out is required (see --help)"

# The reference must be fully qualified, as containerd's CRI normalizes it: a registry host
# (with a dot or a port, or localhost), a lowercase path, and a tag.
ref_re='^(localhost|[a-z0-9-]+(\.[a-z0-9-]+)+|[a-z0-9.-]+:[0-9]+)(/[a-z0-9]+([._-]+[a-z0-9]+)*)+:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$'
[[ "$name" =~ $ref_re ]] || die "--name '$name' is not a full reference REGISTRY/PATH:TAG (e.g. vmtune.local/busybox:1)"
tag=${name##*:}

json_array() { # WHAT JSON
  [ "$2" = null ] && {
    echo null
    return
  }
  jq -ce 'if type == "array" and length > 0 and all(.[]; type == "string") then . else error("") end' \
    <<<"$2" 2>/dev/null || die "$1 must be a non-empty JSON array of strings, got: $2"
}
entrypoint=$(json_array --entrypoint "$entrypoint")
cmd=$(json_array --cmd "$cmd")
[ "$entrypoint" != null ] || [ "$cmd" != null ] || die "give --entrypoint or --cmd: the image would run nothing"

if [ -z "$arch" ]; then
  case "$(uname -m)" in
    x86_64) arch=amd64 ;;
    aarch64 | arm64) arch=arm64 ;;
    armv7l | armv6l) arch=arm ;;
    i?86) arch=386 ;;
    ppc64le) arch=ppc64le ;;
    s390x) arch=s390x ;;
    riscv64) arch=riscv64 ;;
    *) die "unknown machine $(uname -m): give --arch" ;;
  esac
fi

# An absolute path inside the image, without . or .. components; printed without its leading /.
image_path() { # WHAT PATH
  local p=$2
  [[ "$p" == /* ]] || die "$1: '$p' is not an absolute path"
  p=$(printf '%s' "$p" | tr -s /)
  p=${p%/}
  p=${p#/}
  [ -n "$p" ] || die "$1: '$2' is the image's root"
  case "/$p/" in
    */./* | */../*) die "$1: '$2' has a . or .. component" ;;
  esac
  printf '%s' "$p"
}
check_mode() { # WHAT MODE
  [[ "$2" =~ ^[0-7]{3,4}$ ]] || die "$1: mode '$2' is not octal (like 0755)"
}

work=$(mktemp -d "${TMPDIR:-/tmp}/oci-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -m 0755 "$root"
mkdir -p "$work/layout/blobs/sha256"
declare -A taken=()

# Reserve RELPATH for one entry, and create its missing parents (0755). A parent must be a
# directory of the image's own: never one of its files or symlinks (a symlink would lead the
# copy out of the staging tree).
claim() { # WHAT RELPATH
  [ -z "${taken[$2]:-}" ] || die "$1: /$2 is already in the image (${taken[$2]})"
  taken[$2]=$1
  local parent=$2 up
  while [ "$parent" != . ]; do
    parent=$(dirname "$parent")
    [ "$parent" != . ] || break
    up=$root/$parent
    if [ -L "$up" ] || { [ -e "$up" ] && [ ! -d "$up" ]; }; then
      die "$1: /$parent, a parent of /$2, is not a directory in the image"
    fi
  done
  parent=$(dirname "$2")
  [ "$parent" = . ] || (umask 022 && mkdir -p "$root/$parent")
}

for spec in ${files[@]+"${files[@]}"}; do
  IFS=: read -r src dest mode extra <<<"$spec"
  [ -n "$src" ] && [ -n "$dest" ] && [ -z "$extra" ] || die "--file '$spec' is not SRC:DEST[:MODE]"
  [ -f "$src" ] || die "--file '$spec': $src is not a file"
  rel=$(image_path "--file $spec" "$dest")
  if [ -z "$mode" ]; then
    if [ -x "$src" ]; then mode=0755; else mode=0644; fi
  fi
  check_mode "--file $spec" "$mode"
  claim "--file $spec" "$rel"
  [ ! -e "$root/$rel" ] || die "--file '$spec': /$rel is a directory in the image"
  cp --dereference -T "$src" "$root/$rel" || die "--file '$spec': cannot copy $src"
  chmod "$mode" "$root/$rel"
done
for spec in ${dirs[@]+"${dirs[@]}"}; do
  IFS=: read -r dest mode extra <<<"$spec"
  [ -n "$dest" ] && [ -z "$extra" ] || die "--dir '$spec' is not DEST[:MODE]"
  mode=${mode:-0755}
  check_mode "--dir $spec" "$mode"
  rel=$(image_path "--dir $spec" "$dest")
  claim "--dir $spec" "$rel"
  # a parent of an earlier --file is already there: it takes this mode
  [ -d "$root/$rel" ] || mkdir "$root/$rel" || die "--dir '$spec': cannot create /$rel"
  chmod "$mode" "$root/$rel"
done
for spec in ${symlinks[@]+"${symlinks[@]}"}; do
  dest=${spec%%=*}
  target=${spec#*=}
  [ "$dest" != "$spec" ] && [ -n "$dest" ] && [ -n "$target" ] || die "--symlink '$spec' is not DEST=TARGET"
  rel=$(image_path "--symlink $spec" "$dest")
  claim "--symlink $spec" "$rel"
  [ ! -e "$root/$rel" ] || die "--symlink '$spec': /$rel is a directory in the image"
  ln -sT "$target" "$root/$rel" || die "--symlink '$spec': cannot create /$rel"
done
[ ${#taken[@]} -gt 0 ] || die "the image would be empty: give --file, --dir or --symlink"

# The layer: entries sorted by name (bytewise), parents before children, owner 0:0 without
# names, mtime 0, no atime/ctime records; then gzip without a name or a time stamp.
(cd "$root" && find . -mindepth 1 -printf '%P\0' | LC_ALL=C sort -z) >"$work/entries"
tar --create --file="$work/layer.tar" --directory="$root" --no-recursion \
  --null --verbatim-files-from --files-from="$work/entries" \
  --format=posix --pax-option='exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime' \
  --mtime=@0 --owner=0 --group=0 --numeric-owner ||
  die "tar failed"
diff_id=sha256:$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
gzip -n -9 <"$work/layer.tar" >"$work/layer.tar.gz"

blobs=$work/layout/blobs/sha256
# Store FILE as a blob; print its descriptor's "digest size" pair.
put_blob() {
  local sum size
  sum=$(sha256sum "$1" | cut -d' ' -f1)
  size=$(stat -c %s "$1")
  mv "$1" "$blobs/$sum"
  echo "sha256:$sum $size"
}
read -r layer_digest layer_size < <(put_blob "$work/layer.tar.gz")

for e in ${envs[@]+"${envs[@]}"}; do
  [[ "$e" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "--env '$e' is not NAME=VALUE"
  [[ "$e" != *$'\n'* ]] || die "--env '$e' has a newline"
done
env_json=$(printf '%s\n' ${envs[@]+"${envs[@]}"} | jq -Rsc '
  split("\n") | map(select(length > 0)) |
  if any(.[]; startswith("PATH=")) then . else
    ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"] + . end')
labels_json=$(printf '%s\n' ${labels[@]+"${labels[@]}"} | jq -Rsc '
  split("\n") | map(select(length > 0) | (index("=") // error("--label \(.) is not KEY=VALUE")) as $i
    | {key: .[:$i], value: .[$i + 1:]}) |
  if length == 0 then null else from_entries end') || die "a --label is not KEY=VALUE"

jq -nSc --arg arch "$arch" --argjson entrypoint "$entrypoint" --argjson cmd "$cmd" \
  --argjson env "$env_json" --arg workdir "$workdir" --arg user "$user" \
  --argjson labels "$labels_json" --arg diff_id "$diff_id" '
  {
    architecture: $arch, os: "linux", created: "1970-01-01T00:00:00Z",
    config: ({Env: $env, WorkingDir: $workdir}
      + (if $entrypoint == null then {} else {Entrypoint: $entrypoint} end)
      + (if $cmd == null then {} else {Cmd: $cmd} end)
      + (if $user == "" then {} else {User: $user} end)
      + (if $labels == null then {} else {Labels: $labels} end)),
    rootfs: {type: "layers", diff_ids: [$diff_id]},
    history: [{created: "1970-01-01T00:00:00Z", created_by: "deploy/oci-image.sh"}]
  }' | tr -d '\n' >"$work/config.json"
read -r config_digest config_size < <(put_blob "$work/config.json")

jq -nSc --arg cd "$config_digest" --argjson cs "$config_size" \
  --arg ld "$layer_digest" --argjson ls "$layer_size" '
  {
    schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
    config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $cd, size: $cs},
    layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest: $ld, size: $ls}]
  }' | tr -d '\n' >"$work/manifest.json"
read -r manifest_digest manifest_size < <(put_blob "$work/manifest.json")

jq -nSc --arg md "$manifest_digest" --argjson ms "$manifest_size" --arg arch "$arch" \
  --arg name "$name" --arg tag "$tag" '
  {
    schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json",
    manifests: [{
      mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $md, size: $ms,
      platform: {architecture: $arch, os: "linux"},
      annotations: {"io.containerd.image.name": $name, "org.opencontainers.image.ref.name": $tag}
    }]
  }' | tr -d '\n' >"$work/layout/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$work/layout/oci-layout"

# The layout tar itself: the same rules as the layer. Written beside OUT, then renamed.
(cd "$work/layout" && find . -mindepth 1 -printf '%P\0' | LC_ALL=C sort -z) >"$work/layout-entries"
find "$work/layout" -type d -exec chmod 0755 {} + && find "$work/layout" -type f -exec chmod 0644 {} +
out_dir=$(dirname "$out")
[ -d "$out_dir" ] || die "--out $out: $out_dir is not a directory"
tmp_out=$(mktemp "$out_dir/.$(basename "$out").XXXXXX")
trap 'rm -rf "$work" "$tmp_out"' EXIT
tar --create --file="$tmp_out" --directory="$work/layout" --no-recursion \
  --null --verbatim-files-from --files-from="$work/layout-entries" \
  --format=posix --pax-option='exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime' \
  --mtime=@0 --owner=0 --group=0 --numeric-owner ||
  die "tar failed writing $out"
chmod 0644 "$tmp_out"
mv -f "$tmp_out" "$out"
echo "$name $manifest_digest $out"
