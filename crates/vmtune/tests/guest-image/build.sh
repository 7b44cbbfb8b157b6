#!/usr/bin/env bash
# A small real guest OS for the matrix's end-to-end tests (crates/vmtune/tests/cli_matrix_guest.rs):
# Debian bookworm built by mmdebstrap from Debian's packages, with systemd, qemu-guest-agent as a
# service, OpenSSH, sysbench, numactl and the cloud kernel; one ext4 filesystem on the whole disk
# (no partition table, no bootloader: the test's domain boots the kernel and initrd beside it).
#
#   build.sh OUT     writes OUT/debian.qcow2, OUT/vmlinuz, OUT/initrd.img, OUT/id_ed25519{,.pub}
#                    (root's SSH key), OUT/stamp; a second run with the same recipe does nothing.
#
# Needs root (mmdebstrap's root mode), mmdebstrap, e2fsprogs (mke2fs -d), qemu-utils, ssh-keygen.
set -euo pipefail
out=${1:?usage: build.sh OUT}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)

packages=systemd-sysv,udev,kmod,qemu-guest-agent,openssh-server,sysbench,numactl,procps,iproute2,linux-image-cloud-amd64,initramfs-tools
recipe=$(printf '%s\n' "$packages" "$(sha256sum "$0" | cut -d' ' -f1)")
stamp=$(printf '%s' "$recipe" | sha256sum | cut -d' ' -f1)
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp" ] && [ -f "$out/debian.qcow2" ]; then
  echo "guest image: $out/debian.qcow2 (cached)"
  exit 0
fi
for t in mmdebstrap mke2fs qemu-img ssh-keygen; do
  command -v "$t" >/dev/null || { echo "build.sh: $t not found" >&2; exit 1; }
done
t0=$(date +%s)
work=$(mktemp -d /var/tmp/vmtune-guest.XXXXXX)
trap 'rm -rf "$work"' EXIT
rm -f "$out/stamp" "$out/debian.qcow2"
ssh-keygen -q -t ed25519 -N '' -C vmtune-matrix-test -f "$work/id_ed25519"

root="$work/root"
# the host's apt sources (the same mirror the CI installs from); docs, man pages and locales left out
mmdebstrap --quiet --variant=apt --include="$packages" \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
  --customize-hook='echo vmtune-guest > "$1/etc/hostname"' \
  --customize-hook='echo "/dev/vda / ext4 rw,relatime 0 1" > "$1/etc/fstab"' \
  --customize-hook='chroot "$1" passwd -d root' \
  --customize-hook="mkdir -p -m 700 \"\$1/root/.ssh\" && cp $work/id_ed25519.pub \"\$1/root/.ssh/authorized_keys\"" \
  --customize-hook='printf "[Match]\nName=en*\n\n[Network]\nDHCP=yes\n" > "$1/etc/systemd/network/10-wired.network"' \
  --customize-hook='chroot "$1" systemctl enable systemd-networkd.service' \
  --customize-hook='chroot "$1" systemctl mask systemd-networkd-wait-online.service apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer man-db.timer systemd-timesyncd.service getty-static.service modprobe@loop.service modprobe@fuse.service modprobe@dm_mod.service modprobe@efi_pstore.service modprobe@drm.service systemd-network-generator.service' \
  --customize-hook='printf "virtio_pci\nvirtio_blk\n" > "$1/etc/initramfs-tools/modules" && echo MODULES=list > "$1/etc/initramfs-tools/conf.d/vmtune-guest.conf" && chroot "$1" update-initramfs -u -k all >/dev/null' \
  --customize-hook="cp \"\$1\"/boot/vmlinuz-* $work/vmlinuz && cp \"\$1\"/boot/initrd.img-* $work/initrd.img" \
  --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*' \
  bookworm "$root" /etc/apt/sources.list.d/debian.sources 2>&1 | tail -n 20 || true
[ -x "$root/usr/sbin/qemu-ga" ] || { echo "build.sh: mmdebstrap did not finish (no qemu-ga in the tree)" >&2; exit 1; }
used=$(du -sm "$root" | cut -f1)
size=$((used + 400))
mke2fs -q -t ext4 -L vmtune-guest -d "$root" "$work/debian.raw" "${size}M"
qemu-img convert -q -f raw -O qcow2 "$work/debian.raw" "$out/debian.qcow2"
cp "$work/vmlinuz" "$work/initrd.img" "$work/id_ed25519" "$work/id_ed25519.pub" "$out/"
chmod 600 "$out/id_ed25519"
echo "$stamp" > "$out/stamp"
echo "guest image: $out/debian.qcow2 (${used} MiB of files, built in $(( $(date +%s) - t0 )) s)"
