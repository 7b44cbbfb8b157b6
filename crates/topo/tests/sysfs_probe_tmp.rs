#[test]
fn probe() {
    for f in ["20em64t-hybrid-1p6c2t+2ca4co1t", "32intel64-2p8co2t+8ve", "64amd64-4s2n4ca2co", "nvidiagpunumanodes"] {
        let p = format!("/work/shared/topologies/sysfs/{f}.tar.bz2");
        let t = std::time::Instant::now();
        let h = topo::sysfs::load_archive(std::path::Path::new(&p));
        let el = t.elapsed();
        match h {
            Err(e) => println!("{f}: ERR {e}"),
            Ok(h) => {
                println!("{f}: {:?} name={:?} pus={} cores={} l3={} pkgs={} dies={} numa={} kinds={:?} pci={} tsc={:?} in {:?}",
                    h.source, h.name, h.pus.len(), h.cores.len(), h.caches_at(3).count(), h.packages.len(), h.dies.len(), h.numa_nodes.len(),
                    h.cpu_kinds.iter().map(|k| (k.label.clone(), k.cpus.to_list_string(), k.max_freq_mhz)).collect::<Vec<_>>(), h.pci_devices.len(), h.tsc_stable, el);
                for p in &h.packages { println!("  pkg {} {:?} {} {:?}", p.id, p.os_index, p.cpus, p.model); }
                for n in &h.numa_nodes { println!("  node {} {} {:?} {:?} {:?}", n.os_index, n.cpus, n.memory_bytes, n.memory_kind, n.hugepages); }
                for c in h.caches.iter().filter(|c| c.level >= 2).take(6) { println!("  cache L{} {:?} {:?} {:?} {:?} {}", c.level, c.cache_type, c.size_bytes, c.line_bytes, c.ways, c.cpus); }
                for c in h.cores.iter().take(3) { println!("  core {} {:?} {}", c.id, c.os_index, c.pus); }
                for d in h.pci_devices.iter() { println!("  pci {} {:04x}:{:04x} class={:04x} {:?} numa={:?} local={:?} drv={:?} parent={:?} msi={} bars={} os={:?} gbps={:?} irq={:?}", d.bdf, d.vendor_id, d.device_id, d.class, d.kind, d.numa, d.local_cpus.as_ref().map(|c| c.to_list_string()), d.driver, d.parent, d.msi_irqs.as_ref().map(|v| v.len()).unwrap_or(0), d.bars.len(), d.os_devices, d.link_gbps, d.irq); }
                println!("  distances {:?}", h.distances.as_ref().map(|d| d.nodes.clone()));
            }
        }
    }
    let h = topo::sysfs::load_root(std::path::Path::new("/")).unwrap();
    println!("{}", serde_json::to_string(&h).unwrap().chars().take(3000).collect::<String>());
}
