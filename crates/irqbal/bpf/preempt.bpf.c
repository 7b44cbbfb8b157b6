// SPDX-License-Identifier: GPL-2.0-only
/*
 * vmtune: the exact preemption signal of a KVM guest, for `vmtune irq balance`.
 *
 * KVM sets bit 0 of kvm_steal_time.preempted for a vCPU when the host deschedules it while it
 * is runnable, and clears it when the vCPU enters the guest again; the guest kernel reads the
 * same per-CPU structure for vcpu_is_preempted(). This program reads every vCPU's copy at
 * guest events on a running vCPU -- every context switch and every local timer interrupt
 * (the guest tick) -- and pushes each change of the flag to a ring buffer, so that the
 * daemon, woken on a running vCPU, can move the interrupts of a preempted one.
 *
 * Finding steal_time without kallsyms. A typed __ksym reference to the per-CPU variable
 * steal_time needs kallsyms to hold data symbols (CONFIG_KALLSYMS_ALL); without it the load
 * fails with "ldimm64 failed to find the address for kernel symbol 'steal_time'". But every
 * static per-CPU variable keeps one offset inside each CPU's copy of .data..percpu, and the
 * kernel's BTF lists those offsets (DATASEC .data..percpu). So the copy of steal_time of a
 * CPU lies at a fixed distance from the same CPU's run queue (the per-CPU variable
 * runqueues); the loader reads that distance from BTF and sets st_minus_rq. A CPU's run queue
 * is reachable from any task that runs there: task->se.cfs_rq->rq. Each CPU learns its own
 * address at its first context switch (checking rq->cpu), and the loader checks the steal
 * value read there against /proc/stat before it trusts the signal.
 *
 * Wake-ups from idle. An interrupt that finds a vCPU halted waits for the host to run it again;
 * that wait is steal, but the preempted flag is not set (the vCPU was not descheduled while
 * runnable). At every exit from idle (tp_btf/cpu_idle) the program adds the steal the vCPU
 * accrued since it went idle to per-CPU counters (wakes); the daemon reads them at each window
 * to estimate how long an interrupt that finds the vCPU idle waits.
 *
 * Rebuild with crates/irqbal/bpf/build.sh (clang, libbpf headers); the object is checked in.
 */

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

/* The few kernel types used, relocated against the running kernel's BTF (CO-RE). */
struct rq {
	int cpu;
} __attribute__((preserve_access_index));

struct cfs_rq {
	struct rq *rq;
} __attribute__((preserve_access_index));

struct sched_entity {
	struct cfs_rq *cfs_rq;
} __attribute__((preserve_access_index));

struct task_struct {
	struct sched_entity se;
} __attribute__((preserve_access_index));

/* struct kvm_steal_time is KVM's guest ABI (arch/x86/include/uapi/asm/kvm_para.h). */
#define ST_STEAL 0     /* __u64 steal: ns the vCPU waited, updated at guest entry */
#define ST_PREEMPTED 16 /* __u8 preempted: bit 0 = KVM_VCPU_PREEMPTED */

#define MAX_CPUS 1024

/* Set by the loader before loading. */
const volatile __s64 st_minus_rq = 0;
const volatile __u32 nr_cpus = 0;
const volatile __u64 scan_gap_ns = 100000;

struct vcpu {
	__u64 st_addr;     /* this CPU's kvm_steal_time, 0 until learnt */
	__u64 last_event;  /* ktime of this CPU's last guest event (it was running then) */
	__u64 steal;       /* steal clock as last read */
	__u64 steal_at_preempt; /* steal clock when it was seen preempted */
	__u32 preempted;   /* last reported state */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_CPUS);
	__type(key, __u32);
	__type(value, struct vcpu);
} vcpus SEC(".maps");

/* Per CPU: exits from idle and the steal each waited for the host (read by the daemon). */
struct wake {
	__u64 steal_at_idle; /* steal clock when the CPU went idle */
	__u64 idle;          /* 1 while idle */
	__u64 count;         /* exits from idle */
	__u64 wait_ns;       /* steal accrued between going idle and the exit, summed */
	__u64 wait_sq_us2;   /* the same, squared, in us^2 */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_CPUS);
	__type(key, __u32);
	__type(value, struct wake);
} wakes SEC(".maps");

/* Per CPU: time of its last scan of the others (rate limit). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} last_scan SEC(".maps");

/* Counters: 0 scans, 1 events, 2 ring buffer full, 3 addresses learnt, 4 read errors. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 5);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

/* One change of a vCPU's flag, as pushed to the ring buffer (see src/ebpf.rs). */
struct event {
	__u64 ts;         /* ktime (CLOCK_MONOTONIC) when it was seen */
	__u64 steal;      /* the vCPU's steal clock then */
	__u64 last_event; /* the vCPU's last guest event before (preemption began after it) */
	__u64 steal_at_preempt; /* for a resume: steal clock when it was seen preempted */
	__u32 cpu;
	__u32 observer;
	__u32 preempted;
	__u32 pad;
};

static __always_inline void count(__u32 k)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &k);
	if (c)
		*c += 1;
}

static __always_inline void emit(__u32 cpu, __u32 observer, __u32 preempted, __u64 now,
				 __u64 steal, __u64 last_event, __u64 steal_at_preempt)
{
	struct event e = {
		.ts = now,
		.steal = steal,
		.last_event = last_event,
		.steal_at_preempt = steal_at_preempt,
		.cpu = cpu,
		.observer = observer,
		.preempted = preempted,
	};
	if (bpf_ringbuf_output(&events, &e, sizeof(e), 0))
		count(2);
	else
		count(1);
}

struct scan_ctx {
	__u32 me;
	__u64 now;
};

static long scan_one(__u32 i, struct scan_ctx *sc)
{
	struct vcpu *o;
	__u8 flag = 0;
	__u64 steal = 0;
	__u32 p, was;

	if (i >= nr_cpus)
		return 1;
	if (i == sc->me)
		return 0;
	o = bpf_map_lookup_elem(&vcpus, &i);
	if (!o || !o->st_addr)
		return 0;
	if (bpf_probe_read_kernel(&flag, sizeof(flag), (void *)(o->st_addr + ST_PREEMPTED)) ||
	    bpf_probe_read_kernel(&steal, sizeof(steal), (void *)(o->st_addr + ST_STEAL))) {
		count(4);
		return 0;
	}
	p = flag & 1;
	was = o->preempted;
	if (p == was)
		return 0;
	/* one observer reports each change */
	if (__sync_val_compare_and_swap(&o->preempted, was, p) != was)
		return 0;
	o->steal = steal;
	if (p)
		o->steal_at_preempt = steal;
	emit(i, sc->me, p, sc->now, steal, o->last_event, p ? steal : o->steal_at_preempt);
	return 0;
}

/* A guest event on a running vCPU: note that this vCPU runs, then look at the others. */
static __always_inline int observe(void)
{
	__u32 me = bpf_get_smp_processor_id();
	__u32 zero = 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 steal = 0, *t;
	struct vcpu *c;
	struct scan_ctx sc = { .me = me, .now = now };

	c = bpf_map_lookup_elem(&vcpus, &me);
	if (!c || !c->st_addr)
		return 0;
	/* this vCPU runs: if it was reported preempted, report that it runs again */
	if (c->preempted && __sync_val_compare_and_swap(&c->preempted, 1, 0) == 1) {
		if (!bpf_probe_read_kernel(&steal, sizeof(steal), (void *)(c->st_addr + ST_STEAL))) {
			c->steal = steal;
			emit(me, me, 0, now, steal, c->last_event, c->steal_at_preempt);
		}
	}
	c->last_event = now;
	/* keep this vCPU's own steal clock current (the loader checks it against /proc/stat) */
	if (!bpf_probe_read_kernel(&steal, sizeof(steal), (void *)(c->st_addr + ST_STEAL)))
		c->steal = steal;
	t = bpf_map_lookup_elem(&last_scan, &zero);
	if (!t || now - *t < scan_gap_ns)
		return 0;
	*t = now;
	count(0);
	bpf_loop(MAX_CPUS, scan_one, &sc, 0);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, _Bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u32 me = bpf_get_smp_processor_id();
	struct vcpu *c = bpf_map_lookup_elem(&vcpus, &me);

	if (c && !c->st_addr) {
		struct rq *rq = prev->se.cfs_rq ? prev->se.cfs_rq->rq : 0;
		if (rq && rq->cpu == (int)me) {
			c->st_addr = (__u64)rq + st_minus_rq;
			count(3);
		}
	}
	return observe();
}

SEC("tp_btf/local_timer_entry")
int BPF_PROG(on_tick, int vector)
{
	return observe();
}

#define PWR_EVENT_EXIT ((unsigned int)-1)

/* The CPU goes idle (state >= 0) or leaves it (PWR_EVENT_EXIT); only this CPU touches its
 * own entry, with preemption off. */
SEC("tp_btf/cpu_idle")
int BPF_PROG(on_idle, unsigned int state, unsigned int cpu_id)
{
	__u32 me = bpf_get_smp_processor_id();
	struct vcpu *c = bpf_map_lookup_elem(&vcpus, &me);
	struct wake *w = bpf_map_lookup_elem(&wakes, &me);
	__u64 steal = 0, d, us;

	if (!c || !w || !c->st_addr)
		return 0;
	if (bpf_probe_read_kernel(&steal, sizeof(steal), (void *)(c->st_addr + ST_STEAL))) {
		count(4);
		return 0;
	}
	if (state != PWR_EVENT_EXIT) {
		w->steal_at_idle = steal;
		w->idle = 1;
		return 0;
	}
	if (!w->idle)
		return 0;
	w->idle = 0;
	d = steal > w->steal_at_idle ? steal - w->steal_at_idle : 0;
	us = d / 1000;
	w->count += 1;
	w->wait_ns += d;
	w->wait_sq_us2 += us * us;
	return 0;
}
