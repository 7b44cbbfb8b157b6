//! vmtune GPU VM boot-time profiler and estimator
