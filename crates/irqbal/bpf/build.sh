#!/bin/sh
# Rebuild the checked-in eBPF object from its source. Needs clang and the libbpf headers
# (Debian: apt-get install clang libbpf-dev). The output is reproducible for one clang
# version: the version used is written next to the object, and the tests compare the
# checked-in object with a fresh build when the same clang is installed.
#
#   crates/irqbal/bpf/build.sh            # writes preempt.bpf.o and preempt.bpf.o.clang
#   crates/irqbal/bpf/build.sh OUT.o      # writes OUT.o only (used by the tests)
set -eu
dir=$(cd "$(dirname "$0")" && pwd)
out=${1:-$dir/preempt.bpf.o}
cd "$dir"
# -g: BTF for CO-RE relocations; relative paths and a fixed prefix map keep the object free
# of this machine's paths.
clang -O2 -g -target bpf -mcpu=v3 -D__TARGET_ARCH_x86 \
  -I/usr/include/"$(uname -m)"-linux-gnu \
  -fdebug-prefix-map="$dir"=. -fno-ident \
  -c preempt.bpf.c -o "$out"
llvm-strip -g --keep-section=.BTF --keep-section=.BTF.ext "$out" 2>/dev/null ||
  llvm-strip-14 -g "$out" 2>/dev/null || true
if [ $# -eq 0 ]; then
  clang --version | head -n 1 > "$dir/preempt.bpf.o.clang"
fi
