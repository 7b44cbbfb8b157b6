//! vmtune vBalance-style interrupt balancing policy and daemon
