#!/bin/bash
# Build the Debian package of vmtune: the release binary, its manual pages and shell
# completions generated from the CLI definition, the systemd units and the libvirt hook.
#   deploy/debian/build.sh            → target/debian/vmtune_VERSION-1_ARCH.deb
# Needs cargo-deb (`cargo install cargo-deb`) and dpkg-dev.
set -euo pipefail
cd "$(dirname "$0")/../.."
target="${CARGO_TARGET_DIR:-target}"
cargo build --release --locked -p vmtune
assets=deploy/debian/generated
rm -rf "$assets" && mkdir -p "$assets/man" "$assets/completions"
"$target/release/vmtune" man --out-dir "$assets/man" 2>/dev/null
gzip -9n "$assets"/man/*.1
"$target/release/vmtune" completions bash >"$assets/completions/vmtune.bash"
"$target/release/vmtune" completions zsh >"$assets/completions/_vmtune"
"$target/release/vmtune" completions fish >"$assets/completions/vmtune.fish"
cargo deb -p vmtune --no-build --strip "$@"
