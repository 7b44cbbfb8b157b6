//! The guest's RAM on QEMU's command line: `-m` and the memory backend of every guest NUMA
//! node must agree to the byte — QEMU refuses to start otherwise ("total memory for NUMA
//! nodes should equal RAM size") — and every backend must be whole pages of the plan's page
//! size (a hugetlbfs backend takes nothing else). [`emit::guest_ram`] splits the RAM; these
//! tests check the split for any size and cell count, the emitted arguments for plans the
//! planner makes, and a real QEMU (TCG) taking a two-node guest.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use plan::{GuestNumaCell, GuestOs, HugepagePolicy, Plan, Profile, Request};
use proptest::prelude::*;
use topo::CpuSet;

const MIB: u64 = 1 << 20;

/// A plan of `cells` guest NUMA cells as the planner shapes it: `memory_bytes` rounded up to
/// whole pages of `page_kb`, split over the cells in whole pages by `weights`.
fn plan_with_cells(memory_bytes: u64, page_kb: u64, weights: &[u64]) -> Plan {
    let mut p = common::plan("plan_membw_2node_1g.json");
    let page = page_kb * 1024;
    let pages = memory_bytes.div_ceil(page);
    let wsum: u64 = weights.iter().sum::<u64>().max(1);
    let mut split: Vec<u64> = weights
        .iter()
        .map(|w| (u128::from(pages) * u128::from(*w) / u128::from(wsum)) as u64)
        .collect();
    let left = pages - split.iter().sum::<u64>();
    split[0] += left;
    p.request.memory_bytes = memory_bytes;
    p.request.vcpus = weights.len() as u32;
    p.guest_numa = split
        .iter()
        .enumerate()
        .map(|(i, &pg)| GuestNumaCell {
            cell: i as u32,
            vcpus: std::iter::once(i as u32).collect::<CpuSet>(),
            memory_bytes: pg * page,
            host_nodes: vec![i as u32],
        })
        .collect();
    p.memory.host_nodes = (0..weights.len() as u32).collect();
    p.memory.hugepage_size_kb = page_kb;
    if page_kb > 4 {
        p.memory.pages = pages;
        p.memory.pages_per_node = split;
    } else {
        p.memory.pages = 0;
        p.memory.pages_per_node = vec![0; weights.len()];
    }
    p
}

/// `-m` and each `-object memory-backend-*`'s size, in bytes.
fn qemu_sizes(args: &[String]) -> (u64, Vec<u64>) {
    let size = |s: &str| -> u64 {
        let (n, unit) = s.split_at(s.len() - 1);
        let n: u64 = n.parse().unwrap_or_else(|_| panic!("size {s}"));
        match unit {
            "M" => n * MIB,
            "G" => n << 30,
            _ => panic!("size {s}: unit"),
        }
    };
    let mut m = None;
    let mut backends = Vec::new();
    for w in args.windows(2) {
        if w[0] == "-m" {
            m = Some(size(&w[1]));
        }
        if w[0] == "-object" && w[1].starts_with("memory-backend") {
            let s = w[1]
                .split(',')
                .find_map(|kv| kv.strip_prefix("size="))
                .expect("backend size");
            backends.push(size(s));
        }
    }
    (m.expect("-m"), backends)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any size, any page size, any number of cells: whole units, summing to the total, each
    /// the floor or ceiling of its cell, and the QEMU arguments agree.
    #[test]
    fn parts_are_whole_pages_and_sum_to_the_total(
        // from 1 MiB to 1 TiB, any byte count (the CLI takes KiB and bytes too)
        memory in (1u64 << 20)..(1u64 << 40),
        page_kb in prop_oneof![Just(4u64), Just(2048u64), Just(1u64 << 20)],
        weights in proptest::collection::vec(0u64..64, 1..9),
    ) {
        let mut weights = weights;
        weights[0] = weights[0].max(1);
        let p = plan_with_cells(memory, page_kb, &weights);
        let ram = emit::guest_ram(&p);
        let page = page_kb * 1024;
        prop_assert_eq!(ram.unit_bytes, page.max(MIB));
        prop_assert_eq!(ram.unit_bytes % page, 0);
        prop_assert_eq!(ram.parts.len(), p.guest_numa.len());
        prop_assert_eq!(ram.parts.iter().sum::<u64>(), ram.total_bytes);
        prop_assert!(ram.total_bytes >= memory);
        prop_assert!(ram.total_bytes - memory < ram.unit_bytes);
        let planned: u64 = p.guest_numa.iter().map(|c| c.memory_bytes).sum();
        for (part, c) in ram.parts.iter().zip(&p.guest_numa) {
            prop_assert_eq!(part % ram.unit_bytes, 0);
            // the cell's share of the total, rounded one way or the other
            let exact = u128::from(ram.total_bytes) * u128::from(c.memory_bytes)
                / u128::from(planned);
            let unit = u128::from(ram.unit_bytes);
            let part = u128::from(*part);
            prop_assert!(part + unit > exact && part < exact + unit, "{part} vs {exact}");
            if page_kb > 4 {
                // hugepage cells are whole pages already: the backends are what apply reserves
                prop_assert_eq!(part, u128::from(c.memory_bytes));
            }
        }
        let (m, backends) = qemu_sizes(&emit::qemu::args(&p));
        prop_assert_eq!(m, ram.total_bytes);
        if p.guest_numa.len() > 1 {
            // a cell without memory is a node without a backend
            let nonzero: Vec<u64> = ram.parts.iter().copied().filter(|&b| b > 0).collect();
            prop_assert_eq!(backends, nonzero);
        } else {
            prop_assert_eq!(backends, vec![m]);
        }
    }

    /// Plans the planner makes on a two-node host (cts1-pascal: 2 x 18 cores), guest NUMA
    /// exposed: `-m` equals the backends' sum.
    #[test]
    fn planned_two_node_guests_agree_with_m(
        kib in (256u64 * 1024)..(64u64 << 20),
        vcpus in 38u32..60,
        pages in prop_oneof![Just(HugepagePolicy::None), Just(HugepagePolicy::Size2M)],
    ) {
        let p = plan_for(vcpus, kib * 1024, pages);
        let (m, backends) = qemu_sizes(&emit::qemu::args(&p));
        prop_assert_eq!(backends.iter().sum::<u64>(), m);
        prop_assert!(m >= kib * 1024 && m - kib * 1024 < 2 * MIB);
    }
}

fn cts1_pascal() -> topo::Host {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/topologies/hwloc/cts1-pascal.xml");
    topo::load_path(&p).expect("cts1-pascal.xml")
}

/// The review's case: 1001 MiB over two guest nodes of 34 and 6 vCPUs in 4 KiB pages was
/// `-m 1001M` with backends of 851M + 151M.
#[test]
fn the_review_case_sums_to_m() {
    let p = plan_for(40, 1001 * MIB, HugepagePolicy::None);
    let (m, backends) = qemu_sizes(&emit::qemu::args(&p));
    assert_eq!(m, 1001 * MIB);
    assert_eq!(backends.len(), 2);
    assert_eq!(backends.iter().sum::<u64>(), m, "{backends:?}");
}

#[test]
fn a_single_cell_gets_whole_pages_too() {
    // 1001 MiB in 2 MiB pages is 501 pages: -m and ram0 say 1002M, not 1001M
    let mut p = plan_with_cells(1001 * MIB, 2048, &[1]);
    p.guest_numa.truncate(1);
    let (m, backends) = qemu_sizes(&emit::qemu::args(&p));
    assert_eq!((m, backends), (1002 * MIB, vec![1002 * MIB]));
}

/// A plan of `vcpus` (more than one node of cts1-pascal holds) over two guest nodes.
fn plan_for(vcpus: u32, memory_bytes: u64, pages: HugepagePolicy) -> Plan {
    let req = Request {
        name: Some("two-node".into()),
        vcpus,
        memory_bytes,
        devices: vec![],
        profile: Profile::Membw,
        os: GuestOs::Linux,
        hugepages: pages,
        host_cpus: None,
        move_host_cpus: false,
        threads: plan::ThreadPolicy::Auto,
    };
    let p = plan::plan(&req, &cts1_pascal(), &[]).expect("plan");
    assert_eq!(p.guest_numa.len(), 2, "{:?}", p.guest_numa);
    p
}

/// The emitted arguments made runnable here: TCG instead of KVM (`-cpu max`, no `accel=kvm`),
/// the backends as plain RAM of the same size (no hugetlbfs, no binding to host nodes this
/// machine may not have), stopped before the guest runs (`-S`).
fn runnable_under_tcg(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(k) = it.next() {
        let v = it.next().expect("every option has a value");
        let v = match k.as_str() {
            "-machine" => v
                .split(',')
                .filter(|p| !p.starts_with("accel="))
                .collect::<Vec<_>>()
                .join(","),
            "-cpu" => "max".to_string(),
            "-object" if v.starts_with("memory-backend-") => {
                let keep: Vec<&str> = v
                    .split(',')
                    .filter(|p| p.starts_with("id=") || p.starts_with("size="))
                    .collect();
                format!("memory-backend-ram,{}", keep.join(","))
            }
            "-global" if v.starts_with("kvm-") => continue,
            _ => v.clone(),
        };
        out.push(k.clone());
        out.push(v);
    }
    out
}

/// A real QEMU takes the emitted two-node guest: started under TCG, stopped (`-S`), it
/// answers QMP and quits; before the fix it exited at once with "total memory for NUMA
/// nodes should equal RAM size".
#[test]
fn qemu_starts_the_emitted_two_node_guest() {
    let Some(qemu) = testkit::which("qemu-system-x86_64") else {
        testkit::skip(
            "qemu_starts_the_emitted_two_node_guest",
            "qemu-system-x86_64 is not installed: the two-node command line was not started",
        );
        return;
    };
    for (memory, pages) in [
        (1001 * MIB, HugepagePolicy::None),
        (1001 * MIB, HugepagePolicy::Size2M),
        (3 << 30, HugepagePolicy::Size1G),
    ] {
        let p = plan_for(40, memory, pages);
        let args = runnable_under_tcg(&emit::qemu::args(&p));
        let mut child = Command::new(&qemu)
            .args(&args)
            .args([
                "-accel",
                "tcg,thread=multi",
                "-S",
                "-nodefaults",
                "-nographic",
            ])
            .args(["-qmp", "stdio"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start qemu");
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().unwrap();
            // QEMU reads these once it has built the machine; a refused one has exited
            let _ = stdin.write_all(
                b"{\"execute\":\"qmp_capabilities\"}\n{\"execute\":\"query-memory-size-summary\"}\n{\"execute\":\"quit\"}\n",
            );
        }
        let out = wait_with_timeout(child, 60);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{memory} bytes, {pages:?}: qemu {}\n{stderr}\n{stdout}",
            args.join(" ")
        );
        let (m, _) = qemu_sizes(&emit::qemu::args(&p));
        assert!(
            stdout.contains(&format!("\"base-memory\": {m}")),
            "{pages:?}: QEMU's guest RAM is not -m ({m}): {stdout}"
        );
    }
}

fn wait_with_timeout(mut child: std::process::Child, secs: u64) -> std::process::Output {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "qemu did not quit within {secs} s: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
