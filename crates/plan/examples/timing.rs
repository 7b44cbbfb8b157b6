use std::time::Instant;
fn main() {
    let dir = "/work/shared/topologies/hwloc/";
    for f in ["AMD-19h-Zen4-2xEpyc-9654.xml"] {
        let t = Instant::now();
        let host = topo::load_path(std::path::Path::new(&format!("{dir}{f}"))).unwrap();
        let load = t.elapsed();
        for n in [300u32, 300, 300, 300, 300, 300, 300, 300] {
            if n as usize > host.pus.len() - 8 { continue; }
            let req = plan::Request { name: None, vcpus: n, memory_bytes: 8 << 30, devices: vec![], profile: plan::Profile::Compute, os: plan::GuestOs::Linux, hugepages: plan::HugepagePolicy::Auto, host_cpus: None };
            let t = Instant::now();
            let r = plan::plan(&req, &host, &[]);
            println!("{f} load {:?} n={n} plan {:?} ok={}", load, t.elapsed(), r.is_ok());
        }
    }
}
