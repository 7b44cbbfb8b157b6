//! One module per subcommand. Shared argument helpers live in `common`.

pub mod apply;
pub mod bench;
pub mod bench_import;
pub mod bench_matrix;
pub mod boot;
pub mod cdi;
pub mod common;
pub mod demo;
pub mod dra;
pub mod generate;
pub mod irq;
pub mod irq_boost;
pub mod irq_wait;
pub mod nri;
pub mod plan;
pub mod sim;
pub mod topo;
