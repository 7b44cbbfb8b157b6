//! vmtune micro-benchmarks and comparison reports
