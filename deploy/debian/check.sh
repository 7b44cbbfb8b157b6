#!/bin/bash
# Install the Debian package built by build.sh on this machine, check that what it installs
# works — `cargo install --path`, the binary, the manual pages, the bash completion, the systemd units, the libvirt
# hook — and purge it again, leaving nothing behind. Run as root (.ci/run does).
#   deploy/debian/check.sh [PACKAGE.deb]
set -euo pipefail
cd "$(dirname "$0")/../.."
deb="${1:-$(ls -t target/debian/vmtune_*.deb | head -1)}"
fail() { echo "deploy/debian/check.sh: $*" >&2; exit 1; }
# `cargo install` from the repository works too (reusing the release build of build.sh)
root=$(mktemp -d)
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}" cargo install -q --locked --path crates/vmtune --root "$root" ||
  fail "cargo install --path crates/vmtune"
"$root/bin/vmtune" --version | grep -q '^vmtune ' || fail "cargo-installed vmtune --version"
rm -rf "$root"

if dpkg -s vmtune >/dev/null 2>&1; then fail "vmtune is installed already: purge it first"; fi
dpkg -i "$deb" >/dev/null
trap 'dpkg -P vmtune >/dev/null 2>&1 || true' EXIT

/usr/bin/vmtune --version | grep -q '^vmtune ' || fail "vmtune --version"
# the manual: found by man, and every subcommand has its page
[ "$(man -w vmtune)" = /usr/share/man/man1/vmtune.1.gz ] || fail "man -w vmtune: $(man -w vmtune 2>&1)"
MANPAGER=cat man vmtune-plan 2>/dev/null | grep -q -- '--vcpus' || fail "man vmtune-plan has no --vcpus"
# bash completion: completing `vmtune pl` offers plan, `vmtune plan --vc` offers --vcpus
words=$(bash -c 'source /usr/share/bash-completion/completions/vmtune
  COMP_WORDS=(vmtune pl); COMP_CWORD=1; COMP_LINE="vmtune pl"; COMP_POINT=9; _vmtune vmtune pl vmtune; echo "${COMPREPLY[*]}"
  COMP_WORDS=(vmtune plan --vc); COMP_CWORD=2; COMP_LINE="vmtune plan --vc"; COMP_POINT=16; _vmtune vmtune --vc plan; echo "${COMPREPLY[*]}"')
grep -qw plan <<<"$words" || fail "bash completion of 'vmtune pl': $words"
grep -q -- '--vcpus' <<<"$words" || fail "bash completion of 'vmtune plan --vc': $words"
# the units: systemd's own checker (it also looks the Documentation= manual pages up)
for u in vmtune-irq-balance.service vmtune-restore.service; do
  out=$(systemd-analyze verify "/usr/lib/systemd/system/$u" 2>&1) || fail "systemd-analyze verify $u: $out"
  if grep -v 'libvirtd.service\|virtqemud.service\|irqbalance.service' <<<"$out" | grep -q .; then
    fail "systemd-analyze verify $u: $out"
  fi
done
# the hook, where libvirt looks: an executable that answers a migrate with no output
hook=/etc/libvirt/hooks/qemu.d/50-vmtune
[ -x "$hook" ] || fail "$hook is missing or not executable"
jdir=$(mktemp -d)
out=$("$hook" vmtune-check migrate begin - --journal-dir "$jdir" </dev/null) || fail "$hook exited non-zero"
[ -z "$out" ] || fail "$hook printed on a migrate: $out"
rm -rf "$jdir"

trap - EXIT
dpkg -P vmtune >/dev/null
left=""
for f in /usr/bin/vmtune /usr/share/man/man1/vmtune.1.gz /usr/lib/systemd/system/vmtune-restore.service \
         /usr/share/bash-completion/completions/vmtune "$hook" /usr/share/doc/vmtune; do
  [ -e "$f" ] && left="$left $f"
done
[ -z "$left" ] || fail "left after purge:$left"
dpkg -s vmtune >/dev/null 2>&1 && fail "dpkg still knows vmtune after purge"
echo "deploy/debian/check.sh: $(basename "$deb"): installed, binary, man pages, bash completion, units, hook checked; purged cleanly"
