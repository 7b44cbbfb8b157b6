//! `vmtune plan`: read the host and the tenants, call the planner, print a report, the plan
//! JSON, or the plan in a VM manager's format.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context as _, Result};
use plan::definition::{Definition, Given, Merged};
use plan::{GuestOs, HugepagePolicy, Plan, Profile, Request, Tenant, ThreadPolicy};
use topo::{CpuSet, Host};

use super::common::{parse_size, print_json, read_domain, HostArgs};

/// Plan where a VM's vCPUs, emulator and I/O threads, memory and interrupts should live.
///
/// The planner keeps the first core (and its SMT siblings) for the host, once per host: later
/// plans keep what their tenants were planned with. It puts the VM on the NUMA node nearest
/// its passed-through devices that has enough free whole cores and free hugepages, prefers
/// one kind of core on hybrid CPUs and cores with an L3, whole L3 groups (CCX/CCD) not
/// shared with the host or other tenants, pins vCPU pairs to SMT sibling pairs, gives the
/// emulator a spare core in the VM's own L3 group or the host's (else the housekeeping CPUs),
/// routes device interrupts to the guest's CPUs and all others to the host's, and picks CPU
/// features and timers for the guest OS. Every choice is listed with its reason.
///
/// Examples:
///   vmtune plan --topology builtin --vcpus 12 --memory 16G --gpu 01:00.0 --os windows
///   vmtune plan --topology host.xml --vcpus 32 --memory 256G --gpu 0000:41:00.0 --tenant vm1.json --json
///   vmtune plan --vcpus 8 --memory 32G --gpu 01:00.0 --emit libvirt --domain win10.xml
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(flatten)]
    pub host: HostArgs,
    /// Number of vCPUs (default: the --domain's `<vcpu>`; fewer is warned about). With SMT they
    /// are pinned in sibling pairs (vCPU 2k, 2k+1 on one core) or one per core, as --threads
    /// decides.
    #[arg(long, value_name = "N")]
    pub vcpus: Option<u32>,
    /// Guest memory with a unit: 512M, 16G, 1T (1024-based; a bare number is refused: add a
    /// unit, e.g. 4096M). Default: the --domain's `<memory>`.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub memory: Option<u64>,
    /// PCI device to pass through (BDF: 01:00.0 or 0000:01:00.0); repeat for several. The
    /// other functions of a multi-function device and of its IOMMU group go with it. A
    /// --domain's own PCI `<hostdev>`s are planned without it.
    #[arg(long = "gpu", value_name = "BDF")]
    pub gpus: Vec<String>,
    /// Workload: gaming (latency, single node), compute (GPU compute, single node near the
    /// GPUs), membw (CPU memory bandwidth: guest NUMA when the VM spans nodes), collective
    /// (multi-GPU through host memory: keep one node).
    #[arg(long, value_enum, default_value = "gaming")]
    pub profile: ProfileArg,
    /// SMT siblings: auto (a core per vCPU for compute, membw and collective VMs when the host
    /// has the free cores and it costs no locality, or when sibling pairs would span nodes
    /// anyway; sibling pairs for gaming), pack (vCPU 2k, 2k+1 on one core's two threads),
    /// spread (a core per vCPU, its siblings left idle; refused when the free cores are too
    /// few). The r/VFIO pinning benchmark measured SMT siblings at +2–3 % CPU throughput.
    #[arg(long, value_enum, default_value = "auto")]
    pub threads: ThreadsArg,
    /// Guest OS: sets Hyper-V enlightenments (windows), hides the hypervisor CPUID bit so the
    /// guest uses the TSC (windows7). Default: the --domain's OS (its libosinfo id, direct
    /// kernel boot, Hyper-V settings, local-time RTC), else linux.
    #[arg(long, value_enum)]
    pub os: Option<OsArg>,
    /// A VM already on the host: a plan JSON from `vmtune plan --json` or a libvirt domain
    /// XML. Its pinned CPUs, devices and hugepages are taken. Repeat for several.
    #[arg(long = "tenant", value_name = "FILE")]
    pub tenants: Vec<PathBuf>,
    /// Page size: auto (1G where enough are free on the chosen nodes, else 2M, else 4K with a
    /// warning), none (4K), 2M, 1G.
    #[arg(long, value_enum, default_value = "auto")]
    pub hugepages: HugepagesArg,
    /// Host housekeeping CPUs instead of the first core (widened to whole cores), e.g. 0-1,8-9.
    /// Chosen once per host: later plans keep what their tenants were planned with.
    #[arg(long, value_name = "LIST")]
    pub host_cpus: Option<String>,
    /// Accept moving the host housekeeping CPUs away from those the tenants were planned with
    /// (refused otherwise); the tenants then need re-planning and re-applying.
    #[arg(long)]
    pub move_host_cpus: bool,
    /// VM name (used in the report and emitted configuration).
    #[arg(long)]
    pub name: Option<String>,
    /// Give each vCPU thread this EEVDF slice, in µs (100..=100000; `apply` sets it with
    /// sched_setattr on Linux 6.12+, journaled): where vCPUs share CPUs with other work, a
    /// vCPU woken for an interrupt runs sooner. Under the tick it needs the HRTICK scheduler
    /// feature; `apply` says the slice you really get.
    #[arg(long, value_name = "US", value_parser = clap::value_parser!(u32).range(100..=100_000))]
    pub vcpu_slice_us: Option<u32>,
    /// Print the plan in a format: json (the plan), libvirt (domain XML fragment), qemu
    /// (command-line arguments), kata (configuration.toml drop-in and a Pod), kata-config or
    /// kata-pod (one of the two), kubevirt (VMI spec.domain). Warnings go to stderr.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub emit: Option<EmitArg>,
    /// With --emit kata/kata-config/kata-pod: the container's memory limit, its ceiling inside
    /// the guest (Kata applies it there); default: all of --memory but Kata's 256 MiB floor.
    /// For a hugepage-backed guest the scheduler reserves this limit a second time, as
    /// memory: a lower SIZE reserves less (below 64M is refused). The VM stays --memory.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub kata_container_memory: Option<u64>,
    /// The VM to plan: a libvirt domain XML file, or the name of a domain libvirt has defined
    /// (read with `virsh dumpxml --inactive`, never changed). Its vCPUs, memory, PCI hostdevs,
    /// name and OS are the request (flags override them, and the plan says so); the plan
    /// keeps its Hyper-V, KVM and hypervisor-bit choices (and says where it must override
    /// them); with --emit libvirt (implied when no other format is asked for) the whole
    /// domain is printed patched with the plan.
    #[arg(long, value_name = "FILE|NAME")]
    pub domain: Option<String>,
    /// libvirt connection URI for a --domain NAME (`virsh -c`), e.g. qemu:///system.
    #[arg(long, short = 'c', value_name = "URI")]
    pub connect: Option<String>,
    /// Print the plan as JSON (vcpus, emulator_cpus, iothread_cpus, host_cpus,
    /// guest_topology, guest_numa, memory, irq, rationale, warnings, ...).
    #[arg(long)]
    pub json: bool,
    /// Also write a picture of the plan as SVG, drawn as lstopo draws a host: packages, NUMA
    /// nodes (memory, hugepage pools), L3 groups, cores, PUs and PCI devices, with this VM's
    /// vCPUs numbered, its emulator and iothreads, the housekeeping CPUs, each tenant's CPUs
    /// and where interrupts go, and a legend. Large hosts fold what the plan does not touch
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Also write a self-contained HTML page: the picture, the plan's table and its "Why"
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum ProfileArg {
    Gaming,
    Compute,
    Membw,
    Collective,
}

impl From<ProfileArg> for Profile {
    fn from(p: ProfileArg) -> Profile {
        match p {
            ProfileArg::Gaming => Profile::Gaming,
            ProfileArg::Compute => Profile::Compute,
            ProfileArg::Membw => Profile::Membw,
            ProfileArg::Collective => Profile::Collective,
        }
    }
}

#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum ThreadsArg {
    Auto,
    Pack,
    Spread,
}

impl From<ThreadsArg> for ThreadPolicy {
    fn from(t: ThreadsArg) -> ThreadPolicy {
        match t {
            ThreadsArg::Auto => ThreadPolicy::Auto,
            ThreadsArg::Pack => ThreadPolicy::Pack,
            ThreadsArg::Spread => ThreadPolicy::Spread,
        }
    }
}

#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum OsArg {
    Linux,
    Windows,
    Windows7,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum HugepagesArg {
    Auto,
    None,
    #[value(name = "2M", alias = "2m")]
    Size2M,
    #[value(name = "1G", alias = "1g")]
    Size1G,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmitArg {
    Json,
    Libvirt,
    Qemu,
    Kata,
    KataConfig,
    KataPod,
    Kubevirt,
}

impl Args {
    /// The planner's request from the flags and the domain they override (see
    /// [`plan::definition::merge`]), with what the plan must say about it.
    pub fn request(&self, def: Option<&Definition>) -> Result<(Request, Merged)> {
        let host_cpus = self
            .host_cpus
            .as_deref()
            .map(CpuSet::parse_list)
            .transpose()
            .context("--host-cpus")?;
        let merged = plan::definition::merge(
            def,
            Given {
                name: self.name.clone(),
                vcpus: self.vcpus,
                memory_bytes: self.memory,
                devices: self.gpus.clone(),
            },
        )?;
        let req = Request {
            name: merged.name.clone(),
            vcpus: merged.vcpus,
            memory_bytes: merged.memory_bytes,
            devices: merged.devices.clone(),
            profile: self.profile.into(),
            os: match self.os {
                None | Some(OsArg::Linux) => GuestOs::Linux,
                Some(OsArg::Windows) => GuestOs::Windows,
                Some(OsArg::Windows7) => GuestOs::Windows7,
            },
            hugepages: match self.hugepages {
                HugepagesArg::Auto => HugepagePolicy::Auto,
                HugepagesArg::None => HugepagePolicy::None,
                HugepagesArg::Size2M => HugepagePolicy::Size2M,
                HugepagesArg::Size1G => HugepagePolicy::Size1G,
            },
            host_cpus,
            move_host_cpus: self.move_host_cpus,
            threads: self.threads.into(),
        };
        Ok((req, merged))
    }
}

/// A tenant from a file: plan JSON or libvirt domain XML, told apart by content.
pub fn read_tenant(path: &Path) -> Result<Tenant> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("tenant {}: cannot read", path.display()))?;
    let t = text.trim_start();
    if t.starts_with('{') {
        let plan: Plan = serde_json::from_str(t)
            .with_context(|| format!("tenant {}: not a vmtune plan JSON", path.display()))?;
        let mut tenant = Tenant::from_plan(&plan);
        if plan.request.name.is_none() {
            tenant.name = path.display().to_string();
        }
        Ok(tenant)
    } else if t.starts_with('<') {
        emit::libvirt::tenant_from_domain_xml(t)
            .with_context(|| format!("tenant {}", path.display()))
    } else {
        bail!(
            "tenant {}: neither a plan JSON nor a libvirt domain XML",
            path.display()
        )
    }
}

pub fn run(args: Args) -> Result<ExitCode> {
    let host = args.host.load()?;
    let emit = match args.emit {
        Some(e) => Some(e),
        None if args.json => Some(EmitArg::Json),
        None if args.domain.is_some() => Some(EmitArg::Libvirt),
        None => None,
    };
    if let Some(e) = emit.filter(|&e| e != EmitArg::Json) {
        refuse_non_x86(&host, e)?;
    }
    let is_kata = matches!(
        emit,
        Some(EmitArg::Kata | EmitArg::KataConfig | EmitArg::KataPod)
    );
    check_kata_memory(args.kata_container_memory, is_kata)?;
    let tenants = args
        .tenants
        .iter()
        .map(|p| read_tenant(p))
        .collect::<Result<Vec<_>>>()?;
    let domain = args
        .domain
        .as_deref()
        .map(|d| given_domain(d, &args))
        .transpose()?;
    let (mut req, merged) = args.request(domain.as_ref().map(|(_, _, _, d)| d))?;
    let domain = domain.map(|(p, x, c, _)| (p, x, c));
    // the guest OS: --os, else what the domain shows; a contradiction is warned about
    let mut os_notes: (Option<String>, Option<String>) = (None, None);
    if let Some((_, xml, choices)) = &domain {
        os_notes = guest_os(args.os, &mut req, xml, choices)?;
    }
    // libvirt refuses hugepages with anonymous memory (TDX/SEV guides set it): plan 4K
    let anonymous = domain
        .as_ref()
        .is_some_and(|(_, _, c)| c.memory_source.as_deref() == Some("anonymous"));
    if anonymous {
        match req.hugepages {
            HugepagePolicy::Auto => req.hugepages = HugepagePolicy::None,
            HugepagePolicy::None => {}
            _ => bail!(
                "--hugepages {}: {} backs its memory with <source type='anonymous'/>, and libvirt refuses hugepages with it (remove that <source>, or plan with --hugepages none)",
                if req.hugepages == HugepagePolicy::Size1G { "1G" } else { "2M" },
                domain.as_ref().map_or(String::new(), |(_, _, c)| c.source.clone())
            ),
        }
    }
    let mut plan = plan::plan(&req, &host, &tenants)?;
    if let Some(us) = args.vcpu_slice_us {
        plan.vcpu_sched = Some(plan::VcpuSched { slice_us: us });
        plan.rationale.push(format!(
            "Each vCPU thread gets a {us} µs EEVDF slice (sched_setattr, Linux 6.12+; the \
             base slice is 0.75–3 ms by CPU count): a vCPU woken for an interrupt on a CPU it \
             shares preempts the running task sooner. Under the tick (4 ms at HZ=250) that \
             needs the HRTICK scheduler feature, or the slice ends at the tick: in the \
             simulator's fig5 (EEVDF) a 300 µs slice gave ping p99 0.99 ms with HRTICK and \
             12.0 ms without, against 8.99 ms with the base slice; `apply` says which you get."
        ));
    }
    if let Some(line) = os_notes.0 {
        plan.rationale.insert(0, line);
    }
    for (i, line) in merged.rationale.into_iter().enumerate() {
        plan.rationale.insert(i, line);
    }
    for (i, line) in merged.warnings.into_iter().enumerate() {
        plan.warnings.insert(i, line);
    }
    if let Some(line) = os_notes.1 {
        plan.warnings.insert(0, line);
    }
    if let Some((_, _, choices)) = &domain {
        plan::adopt_domain(&mut plan, choices);
        if anonymous {
            plan.warnings.insert(0, format!(
                "{} backs its memory with <source type='anonymous'/>, with which libvirt refuses hugepages: the plan uses 4 KiB pages (remove that <source> to get hugepages)",
                choices.source
            ));
        }
    }
    write_pictures(&args, &plan, &host, &tenants)?;
    let domain = domain.map(|(p, x, _)| (p, x));
    let kata = emit::kata::KataOptions {
        container_memory_mib: args.kata_container_memory.map(|b| b.div_ceil(1 << 20)),
    };
    if emit.is_some_and(|e| e != EmitArg::Json) {
        // the output is a file to save: what a person must know goes to stderr
        for w in &plan.warnings {
            eprintln!("vmtune: warning: {w}");
        }
    }
    print_plan(
        emit,
        &plan,
        &host,
        domain.as_ref().map(|(p, x)| (p.as_str(), x.as_str())),
        &kata,
    )
}

/// `--kata-container-memory`: only with a Kata format, and not below the least vmtune gives.
fn check_kata_memory(bytes: Option<u64>, is_kata: bool) -> Result<()> {
    if let Some(bytes) = bytes {
        if !is_kata {
            bail!("--kata-container-memory goes with --emit kata, kata-config or kata-pod");
        }
        let min = emit::kata::MIN_CONTAINER_MEMORY_MIB;
        if bytes < min << 20 {
            // exactly as much as was given: 63.99M must not read as 64M
            let given = if bytes % (1 << 20) == 0 {
                format!("{}M", bytes >> 20)
            } else if bytes % 1024 == 0 {
                format!("{}K", bytes >> 10)
            } else {
                format!("{bytes}B")
            };
            bail!(
                "--kata-container-memory {given} is below {min}M, the least vmtune gives a container (a Guaranteed pod needs a memory limit, and Kata applies it inside the guest as the container's ceiling)"
            );
        }
    }
    Ok(())
}

/// The `--domain` (a file, or a name libvirt has defined): its text, its CPU choices and the
/// definition the request is merged with.
fn given_domain(
    arg: &str,
    args: &Args,
) -> Result<(String, String, plan::DomainChoices, Definition)> {
    let virsh = apply::libvirt::Virsh::new(args.connect.clone());
    let (xml, defined) = read_domain(arg, &virsh)?;
    let label = if defined {
        format!("domain {arg}")
    } else {
        format!("domain {}", Path::new(arg).display())
    };
    let mut choices = emit::libvirt::domain_choices(&xml).with_context(|| label.clone())?;
    choices.source = label.clone();
    let shape = emit::libvirt::domain_shape(&xml).with_context(|| label.clone())?;
    let def = Definition {
        source: label,
        name: Some(shape.name),
        vcpus: shape.vcpus,
        memory_bytes: shape.memory_bytes,
        devices: shape.devices,
    };
    Ok((arg.to_string(), xml, choices, def))
}

/// The guest OS of a domain's plan: --os, else what the domain shows. A sentence for the
/// "Why" (the OS taken from the domain, or linux for want of a sign) and a warning where --os
/// contradicts the domain.
fn guest_os(
    os: Option<OsArg>,
    req: &mut Request,
    xml: &str,
    choices: &plan::DomainChoices,
) -> Result<(Option<String>, Option<String>)> {
    let mut os_notes: (Option<String>, Option<String>) = (None, None);
    let shown = emit::libvirt::domain_guest_os(xml).with_context(|| choices.source.clone())?;
    let name = |os: GuestOs| emit::text::plain(&os);
    match (os, shown) {
        (None, Some(d)) => {
            req.os = d.os;
            os_notes.0 = Some(format!(
                "guest OS {} from {}: {} (no --os given)",
                name(d.os),
                choices.source,
                d.evidence
            ));
        }
        (None, None) => {
            os_notes.0 = Some(format!(
                "guest OS linux: no --os given and {} does not show its OS (no libosinfo id, Hyper-V settings, direct kernel boot or local-time RTC)",
                choices.source
            ));
        }
        (Some(_), Some(d)) if d.os != req.os => {
            os_notes.1 = Some(format!(
                "--os {} but {} looks like a {} guest ({}): the plan follows --os",
                name(req.os),
                choices.source,
                name(d.os),
                d.evidence
            ));
        }
        (Some(_), _) => {}
    }
    Ok(os_notes)
}

/// The plan printed: the report, the JSON, or a VM manager's format (a given domain patched).
fn print_plan(
    emit: Option<EmitArg>,
    plan: &Plan,
    host: &Host,
    domain: Option<(&str, &str)>,
    kata: &emit::kata::KataOptions,
) -> Result<ExitCode> {
    match emit {
        None => print!("{}", emit::text::plan_report(plan, host)),
        Some(EmitArg::Json) => print_json(plan)?,
        Some(EmitArg::Libvirt) => match &domain {
            // exactly the patched bytes: a file without a final newline stays without one
            Some((arg, xml)) => print!(
                "{}",
                emit::libvirt::patch_domain(xml, plan).with_context(|| format!("domain {arg}"))?
            ),
            None => print!("{}", ensure_newline(emit::libvirt::domain_fragment(plan))),
        },
        Some(EmitArg::Qemu) => print!("{}", ensure_newline(emit::qemu::command_line(plan))),
        Some(EmitArg::Kata) => print!(
            "# ---- config.d/50-vmtune.toml ----\n{}# ---- pod.yaml ----\n{}",
            ensure_newline(emit::kata::config_toml_with(plan, kata)),
            ensure_newline(emit::kata::pod_spec_yaml_with(plan, kata))
        ),
        Some(EmitArg::KataConfig) => print!(
            "{}",
            ensure_newline(emit::kata::config_toml_with(plan, kata))
        ),
        Some(EmitArg::KataPod) => print!(
            "{}",
            ensure_newline(emit::kata::pod_spec_yaml_with(plan, kata))
        ),
        Some(EmitArg::Kubevirt) => {
            print!(
                "{}",
                ensure_newline(emit::kubevirt::vmi_fragment_yaml(plan))
            )
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `--svg` and `--html`: the picture of the plan and its page, each written whole to its file;
/// a note on stderr, so stdout stays the report or the emitted format.
fn write_pictures(args: &Args, plan: &Plan, host: &Host, tenants: &[Tenant]) -> Result<()> {
    if let Some(path) = &args.svg {
        let marks = emit::picture::Marks::plan(plan, host, tenants);
        std::fs::write(path, emit::picture::svg(host, &marks))
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("vmtune: picture of the plan written to {}", path.display());
    }
    if let Some(path) = &args.html {
        std::fs::write(path, emit::picture::html(plan, host, tenants))
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("vmtune: page of the plan written to {}", path.display());
    }
    Ok(())
}

/// The emitters write x86 VMs (QEMU's q35 with `-cpu host` and x86 flags and timers,
/// libvirt's and KubeVirt's x86 CPU features and clocks, Kata's x86 `cpu_features`): on a
/// host of another architecture they are refused, naming it; on one of unknown architecture
/// they are written as before. The report and the plan JSON still work.
fn refuse_non_x86(host: &Host, emit: EmitArg) -> Result<()> {
    let Some(arch) = host
        .arch
        .as_deref()
        .filter(|_| host.is_x86() == Some(false))
    else {
        return Ok(());
    };
    let name = match emit {
        EmitArg::Json => return Ok(()),
        EmitArg::Libvirt => "libvirt",
        EmitArg::Qemu => "qemu",
        EmitArg::Kata => "kata",
        EmitArg::KataConfig => "kata-config",
        EmitArg::KataPod => "kata-pod",
        EmitArg::Kubevirt => "kubevirt",
    };
    bail!(
        "--emit {name} is for x86 hosts (it writes x86 machine, CPU and timer settings), but the host {} is {arch}; the report and --emit json still work",
        host.name.as_deref().unwrap_or(&host.source)
    )
}

/// The report for the VFIO gaming-host write-up example: a 12-vCPU Windows gaming VM with the GPU at 01:00.0
/// (and its audio function) on `host` — what `vmtune` with no arguments shows.
pub fn demo_report(host: &Host) -> Result<String> {
    let req = Request {
        name: Some("win10".into()),
        vcpus: 12,
        memory_bytes: 16 << 30,
        devices: vec!["01:00.0".into()],
        profile: Profile::Gaming,
        os: GuestOs::Windows,
        hugepages: HugepagePolicy::Auto,
        host_cpus: None,
        move_host_cpus: false,
        threads: plan::ThreadPolicy::Auto,
    };
    let plan = plan::plan(&req, host, &[])?;
    Ok(emit::text::plan_report(&plan, host))
}

fn ensure_newline(mut s: String) -> String {
    if !s.ends_with('\n') {
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_report_is_the_seed_000_plan() {
        let host = topo::builtin::default_host();
        let r = demo_report(&host).unwrap();
        assert!(r.contains("Guest CPUs 2-7,10-15"), "{r}");
        assert!(r.contains("all others -> CPUs 0-1,8-9"), "{r}");
    }

    #[test]
    fn tenant_kind_is_told_by_content() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        std::fs::write(&p, "  \n").unwrap();
        let e = read_tenant(&p).unwrap_err().to_string();
        assert!(e.contains("neither a plan JSON"), "{e}");
        std::fs::write(&p, "{\"vcpus\": 3}").unwrap();
        let e = format!("{:#}", read_tenant(&p).unwrap_err());
        assert!(e.contains("not a vmtune plan JSON"), "{e}");
    }
}
