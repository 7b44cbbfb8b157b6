#!/bin/sh
# Rebuild the checked-in eBPF objects from their sources. Needs clang and the libbpf headers
# (Debian: apt-get install clang libbpf-dev). The output is reproducible for one clang
# version: the version used is written to clang.version, and the tests compare the checked-in
# objects with a fresh build when the same clang is installed.
#
#   crates/irqbal/bpf/build.sh            # writes *.bpf.o here and clang.version
#   crates/irqbal/bpf/build.sh OUTDIR     # writes OUTDIR/*.bpf.o only (used by the tests)
set -eu
dir=$(cd "$(dirname "$0")" && pwd)
out=${1:-$dir}
cd "$dir"
for src in *.bpf.c; do
  obj=$out/${src%.c}.o
  # -g: BTF for CO-RE relocations; relative paths and a fixed prefix map keep the object free
  # of this machine's paths.
  clang -O2 -g -target bpf -mcpu=v3 -D__TARGET_ARCH_x86 \
    -I/usr/include/"$(uname -m)"-linux-gnu \
    -fdebug-prefix-map="$dir"=. -fno-ident \
    -c "$src" -o "$obj"
  llvm-strip -g --keep-section=.BTF --keep-section=.BTF.ext "$obj" 2>/dev/null ||
    llvm-strip-14 -g "$obj" 2>/dev/null || true
done
if [ $# -eq 0 ]; then
  clang --version | head -n 1 > "$dir/clang.version"
fi
