//! End to end: plans the real planner makes on real host topologies come out of every
//! emitter as valid text (libvirt XML checked by `virt-xml-validate`).

mod common;

use std::path::Path;

use common::validate;
use plan::{GuestOs, HugepagePolicy, Profile, Request};

fn hosts() -> Vec<(String, topo::Host)> {
    let mut v = vec![("builtin".to_string(), topo::builtin::default_host())];
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/topologies/hwloc");
    for name in ["nvidiaDGX2.xml", "AMD-19h-Zen3-2xEpyc-7763.xml"] {
        let p = dir.join(name);
        if p.exists() {
            let h = topo::load_path(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
            v.push((name.to_string(), h));
        }
    }
    v
}

#[test]
fn real_plans_emit_valid_text() {
    let base = common::read("domain_win10.xml");
    let mut planned = 0;
    for (hname, host) in hosts() {
        let gpu = host.gpus().next().map(|g| g.bdf.clone());
        for (profile, os) in [
            (Profile::Gaming, GuestOs::Windows),
            (Profile::Gaming, GuestOs::Windows7),
            (Profile::Compute, GuestOs::Linux),
            (Profile::Membw, GuestOs::Linux),
        ] {
            let req = Request {
                name: Some("e2e".into()),
                vcpus: 4,
                memory_bytes: 2 << 30,
                devices: gpu.iter().cloned().collect(),
                profile,
                os,
                hugepages: HugepagePolicy::Auto,
                host_cpus: None,
                move_host_cpus: false,
                threads: plan::ThreadPolicy::Auto,
            };
            let p = match plan::plan(&req, &host, &[]) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("{hname} {profile:?} {os:?}: refused: {e}");
                    continue;
                }
            };
            planned += 1;
            let what = format!("{hname} {profile:?} {os:?}");
            let out = emit::libvirt::patch_domain(&base, &p).expect("patch");
            validate(&out, &what);
            let frag = emit::libvirt::domain_fragment(&p);
            validate(
                &format!(
                    "<domain type='kvm'><name>x</name>{frag}<os><type>hvm</type></os></domain>"
                ),
                &format!("fragment {what}"),
            );
            let t = emit::libvirt::tenant_from_domain_xml(&out).expect("tenant");
            assert!(p.pinned_cpus().is_subset(&t.cpus), "{what}");
            assert_eq!(
                t.hugepages.iter().map(|h| h.pages).sum::<u64>(),
                p.memory.pages,
                "{what}"
            );
            let args = emit::qemu::args(&p);
            assert!(
                args.iter()
                    .any(|a| a.starts_with(&format!("{},", p.vcpus.len()))),
                "{what}: {args:?}"
            );
            toml::from_str::<toml::Value>(&emit::kata::config_toml(&p)).expect("kata TOML parses");
        }
    }
    assert!(planned > 0, "the planner refused every request");
}
