// SPDX-License-Identifier: GPL-2.0-only
/*
 * vmtune: how long an interrupt accepted for a KVM vCPU waits until that vCPU next enters the
 * guest, for `vmtune irq wait` (run on the host). Tracepoints only (tp_btf), so it loads where
 * function tracing is locked down and does not depend on how KVM's functions are inlined.
 *
 * kvm_apic_accept_irq fires in whichever context delivers the interrupt: a VFIO device's
 * hard-IRQ handler (irqfd), a vhost worker or QEMU thread of the VM's process, another vCPU's
 * IPI. It names the target only by vCPU id, so the VM is found from that context, in order:
 * the VFIO vector whose handler is running on this CPU (irq_handler_entry/exit, the map
 * `irq_vm` filled by user space from /proc/interrupts and each VM's /dev/vfio groups); the
 * current thread when it belongs to a VM's process (`vm_tgid`); the only VM when just one runs
 * (`only_vm`). Otherwise the accept is pushed unattributed and never paired.
 *
 * The vCPU's state at that moment comes from its own events: kvm_entry (in the guest: the
 * interrupt is delivered by a kick or a posted-interrupt IPI, nothing to wait for), kvm_exit
 * (in the host, handling an exit), sched_switch away from its thread while runnable (preempted:
 * the wait vBalance's host half shortens) or while sleeping (blocked, normally halted). Each
 * accept is pushed to the ring buffer; for a vCPU not in the guest its key is marked pending,
 * and its next kvm_entry is pushed and clears the mark, so entries without a waiting interrupt
 * reach nobody. User space pairs each accept with the next entry of its vCPU
 * (crates/irqbal/src/wait/), so the same accounting runs live and on a recording.
 *
 * `vmtune irq boost` loads the same program: it raises the thread of a vCPU an interrupt is
 * accepted for while it waits (the accept carries the thread id once the vCPU has entered the
 * guest once), marks it in `boosted`, and is told when that thread next sleeps (the vCPU
 * halted: its interrupt work is done). An accept for a vCPU not in the guest also says who runs
 * on the CPU its thread last ran on (sched_switch keeps each CPU's current process): idle, a
 * thread of the same VM, or anything else — whom a boost of it displaces, which the booster
 * charges to the VM's share only in the last case.
 *
 * Blind spot: an interrupt posted by the IOMMU (VT-d posted interrupts, AMD AVIC with IOMMU
 * guest mode) reaches the vCPU without any host CPU taking it: no accept is seen.
 *
 * Rebuild with crates/irqbal/bpf/build.sh (clang, libbpf headers); the object is checked in.
 */

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

/* The few kernel types used, relocated against the running kernel's BTF (CO-RE). */
struct kvm_vcpu {
	int vcpu_id;
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;
	int tgid;
} __attribute__((preserve_access_index));

#define KIND_ACCEPT 1
#define KIND_ENTRY 2
#define KIND_BLOCKED 3

/* Must match wait.rs (VcpuState). */
#define STATE_UNKNOWN 0 /* no event of the vCPU seen yet */
#define STATE_GUEST 1
#define STATE_HOST 2
#define STATE_PREEMPTED 3
#define STATE_BLOCKED 4

/* How the accept's VM was found. Must match wait.rs (Attribution). */
#define BY_NONE 0
#define BY_IRQ 1
#define BY_THREAD 2
#define BY_ONLY_VM 3

/* Who ran on the vCPU thread's CPU when the interrupt was accepted. Must match wait.rs
 * (Holder). */
#define HOLDER_UNKNOWN 0
#define HOLDER_IDLE 1
#define HOLDER_OWN 2   /* a thread of the vCPU's own VM */
#define HOLDER_OTHER 3 /* another VM's thread or a host task */

/* Must match wait/mod.rs (EVENT_SIZE = 40). */
struct event {
	__u64 ts_ns;   /* CLOCK_MONOTONIC */
	__u32 kind;    /* KIND_* */
	__u32 vm;      /* the VM's process id (0: unattributed) */
	__u32 vcpu_id;
	__u32 irq;     /* accept: the host IRQ whose handler delivered it (0: none) */
	__u32 tid;     /* accept: the vCPU's thread, once seen (0: not yet) */
	__u16 dm;      /* accept: delivery mode (APIC_DM_*: 0 fixed, 0x100 lowest, 0x400 NMI) */
	__u8 vector;   /* accept */
	__u8 state;    /* accept: STATE_* */
	__u8 by;       /* accept: BY_* */
	__u8 holder;   /* accept: HOLDER_* (for a vCPU not in the guest) */
	__u8 pad[6];
};

static __always_inline __u64 key_of(__u32 vm, __u32 vcpu_id)
{
	return ((__u64)vm << 32) | vcpu_id;
}

/* (vm, vcpu id) -> STATE_* */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u8);
} vcpu_state SEC(".maps");

/* vCPU thread id -> (vm, vcpu id), learnt at its kvm_entry/kvm_exit */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} vcpu_of_tid SEC(".maps");

/* (vm, vcpu id) -> its thread id */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u32);
} tid_of_vcpu SEC(".maps");

/* Filled by `vmtune irq boost`: (vm, vcpu id) of the vCPUs it has raised; when one of their
 * threads is switched out sleeping (the vCPU halted: its interrupt work is done) the switch is
 * pushed (KIND_BLOCKED). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u8);
} boosted SEC(".maps");

/* (vm, vcpu id) -> the CPU its thread last ran on */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u32);
} vcpu_cpu SEC(".maps");

/* CPU -> the process id of the task it runs (0: idle), set at every switch */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u32);
} cpu_tgid SEC(".maps");

/* (vm, vcpu id) with an accepted interrupt waiting for the vCPU's next entry */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u8);
} pending SEC(".maps");

/* Filled by user space: VM process ids; host IRQ -> VM of each VFIO vector; key 0 -> the only
 * VM when exactly one runs. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} vm_tgid SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u32);
} irq_vm SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} only_vm SEC(".maps");

/* The host IRQ whose handler runs on this CPU, + 1 (0: none) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} in_irq SEC(".maps");

/* 0: events lost (ring buffer full), 1: accepts seen, 2: entries pushed, 3: unattributed */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1024 * 1024);
} events SEC(".maps");

static __always_inline void count(__u32 i)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &i);
	if (c)
		*c += 1;
}

static __always_inline void set_state(__u64 key, __u8 state)
{
	bpf_map_update_elem(&vcpu_state, &key, &state, BPF_ANY);
}

/* The (vm, vcpu id) of the vCPU the current thread runs, from a kvm_* event in it. */
static __always_inline __u64 own_key(struct kvm_vcpu *vcpu)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	__u64 key = key_of((__u32)(id >> 32), BPF_CORE_READ(vcpu, vcpu_id));

	bpf_map_update_elem(&vcpu_of_tid, &tid, &key, BPF_ANY);
	bpf_map_update_elem(&tid_of_vcpu, &key, &tid, BPF_ANY);
	return key;
}

SEC("tp_btf/kvm_apic_accept_irq")
int BPF_PROG(on_accept, __u32 vcpu_id, __u16 dm, __u16 tm, __u8 vec)
{
	__u64 ts = bpf_ktime_get_ns();
	__u32 zero = 0, vm = 0, irq = 0;
	__u8 by = BY_NONE, state = STATE_UNKNOWN, holder = HOLDER_UNKNOWN, one = 1;
	__u32 *p;

	count(1);
	p = bpf_map_lookup_elem(&in_irq, &zero);
	if (p && *p) {
		irq = *p - 1;
		__u32 *v = bpf_map_lookup_elem(&irq_vm, &irq);
		if (v) {
			vm = *v;
			by = BY_IRQ;
		}
	}
	if (!vm) {
		__u32 tgid = bpf_get_current_pid_tgid() >> 32;
		if (bpf_map_lookup_elem(&vm_tgid, &tgid)) {
			vm = tgid;
			by = BY_THREAD;
		}
	}
	if (!vm) {
		p = bpf_map_lookup_elem(&only_vm, &zero);
		if (p && *p) {
			vm = *p;
			by = BY_ONLY_VM;
		}
	}
	__u64 key = key_of(vm, vcpu_id);
	__u32 vcpu_tid = 0;
	if (vm) {
		__u8 *s = bpf_map_lookup_elem(&vcpu_state, &key);
		if (s)
			state = *s;
		__u32 *t = bpf_map_lookup_elem(&tid_of_vcpu, &key);
		if (t)
			vcpu_tid = *t;
		__u32 *cpu = state != STATE_GUEST ? bpf_map_lookup_elem(&vcpu_cpu, &key) : 0;
		__u32 *on = cpu ? bpf_map_lookup_elem(&cpu_tgid, cpu) : 0;
		if (on)
			holder = *on == 0 ? HOLDER_IDLE : *on == vm ? HOLDER_OWN : HOLDER_OTHER;
	} else {
		count(3);
	}

	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(0);
		return 0;
	}
	e->ts_ns = ts;
	e->kind = KIND_ACCEPT;
	e->vm = vm;
	e->vcpu_id = vcpu_id;
	e->irq = irq;
	e->tid = vcpu_tid;
	e->dm = dm;
	e->vector = vec;
	e->state = state;
	e->by = by;
	e->holder = holder;
	__builtin_memset(e->pad, 0, sizeof(e->pad));
	bpf_ringbuf_submit(e, 0);
	if (vm && state != STATE_GUEST)
		bpf_map_update_elem(&pending, &key, &one, BPF_ANY);
	return 0;
}

SEC("tp_btf/kvm_entry")
int BPF_PROG(on_entry, struct kvm_vcpu *vcpu)
{
	__u64 key = own_key(vcpu);

	set_state(key, STATE_GUEST);
	if (!bpf_map_lookup_elem(&pending, &key))
		return 0;
	bpf_map_delete_elem(&pending, &key);
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(0);
		return 0;
	}
	e->ts_ns = bpf_ktime_get_ns();
	e->kind = KIND_ENTRY;
	e->vm = (__u32)(key >> 32);
	e->vcpu_id = (__u32)key;
	e->irq = 0;
	e->tid = (__u32)bpf_get_current_pid_tgid();
	e->dm = 0;
	e->vector = 0;
	e->state = STATE_GUEST;
	e->by = BY_THREAD;
	e->holder = HOLDER_UNKNOWN;
	__builtin_memset(e->pad, 0, sizeof(e->pad));
	bpf_ringbuf_submit(e, 0);
	count(2);
	return 0;
}

/* A raised vCPU's thread went to sleep: push it, so the booster lowers it. */
static __always_inline void push_blocked(__u64 key, __u32 tid)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(0);
		return;
	}
	e->ts_ns = bpf_ktime_get_ns();
	e->kind = KIND_BLOCKED;
	e->vm = (__u32)(key >> 32);
	e->vcpu_id = (__u32)key;
	e->irq = 0;
	e->tid = tid;
	e->dm = 0;
	e->vector = 0;
	e->state = STATE_BLOCKED;
	e->by = BY_THREAD;
	e->holder = HOLDER_UNKNOWN;
	__builtin_memset(e->pad, 0, sizeof(e->pad));
	bpf_ringbuf_submit(e, 0);
}

SEC("tp_btf/kvm_exit")
int BPF_PROG(on_exit, struct kvm_vcpu *vcpu)
{
	set_state(own_key(vcpu), STATE_HOST);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, _Bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u32 tid = BPF_CORE_READ(prev, pid);
	__u64 *key = bpf_map_lookup_elem(&vcpu_of_tid, &tid);
	__u32 cpu = bpf_get_smp_processor_id();
	__u32 next_tgid = BPF_CORE_READ(next, tgid);

	/* what this CPU runs now: an accept for a vCPU waiting here says whom a boost displaces */
	bpf_map_update_elem(&cpu_tgid, &cpu, &next_tgid, BPF_ANY);
	/* prev_state 0 is TASK_RUNNING: switched out while runnable */
	if (key) {
		bpf_map_update_elem(&vcpu_cpu, key, &cpu, BPF_ANY);
		set_state(*key, prev_state == 0 ? STATE_PREEMPTED : STATE_BLOCKED);
		if (prev_state != 0 && bpf_map_lookup_elem(&boosted, key))
			push_blocked(*key, tid);
	}
	tid = BPF_CORE_READ(next, pid);
	key = bpf_map_lookup_elem(&vcpu_of_tid, &tid);
	if (key)
		set_state(*key, STATE_HOST);
	return 0;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(on_irq_entry, int irq)
{
	__u32 zero = 0;
	__u32 *p = bpf_map_lookup_elem(&in_irq, &zero);

	if (p)
		*p = (__u32)irq + 1;
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(on_irq_exit, int irq)
{
	__u32 zero = 0;
	__u32 *p = bpf_map_lookup_elem(&in_irq, &zero);

	if (p)
		*p = 0;
	return 0;
}
