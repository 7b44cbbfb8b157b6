//! Run a built-in scenario and print one line per run: `cargo run -p sim --example quick -- NAME [DURATION_MS]`.
fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "vbalance-fig5".into());
    let dur: Option<u64> = args.next().and_then(|d| d.parse().ok());
    let Ok(scs) = sim::builtin(&name) else {
        eprintln!("unknown scenario {name}");
        std::process::exit(2);
    };
    for mut sc in scs {
        if let Some(d) = dur {
            sc.duration_ms = d;
        }
        match sim::run_scenario(&sc, 2) {
            Ok(rs) => {
                for r in rs {
                    println!(
                        "{:<20} {:<6} {:<10} size={:<6} rtt={:?} tput={:?} drops={} moves={} cs={} ev={} ev/s={:.0}",
                        r.scenario, r.scheduler.name(), r.policy.name(), r.message_size.unwrap_or(0),
                        r.rtt_ms.map(|q| (q.p50, q.p99, q.max)), r.throughput_mbps.map(|t| t.round()),
                        r.drops, r.irq_moves, r.context_switches, r.events, r.events_per_sec
                    );
                }
            }
            Err(e) => eprintln!("{e}"),
        }
    }
}
