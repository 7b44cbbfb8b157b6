//! vmtune emitters: Plan -> libvirt XML, QEMU args, Kata, KubeVirt
