//! vmtune discrete-event simulator of vCPU scheduling and interrupt delivery
