//! The integration tests: one binary (ripgrep's shape), a module per area, with
//! the shared helpers in `common` (example roots, the gdrprov command, snapshots)
//! and `hostgen` (synthetic host trees).
// Test code: fixtures are built with std::fs and the binary is run as a
// process; the house's doors (clippy.toml) are for the product's code.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::disallowed_macros,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod common;
mod hostgen;
mod util;

mod ansible;
mod bench_cli;
mod boot;
mod boot_booted;
mod boot_entries;
mod boot_shapes;
mod boot_switch;
mod boot_switch_bls;
mod doctor_fit;
mod durable;
mod efa;
mod examples;
mod facts;
mod field_lines;
mod fleet;
mod foundation;
mod front_door;
mod gds_plan;
mod gds_roots;
mod gpu_node;
mod gpu_node_copy;
mod gpu_node_fabric;
mod gpu_node_kit;
mod grub_corpus;
mod guard_rails;
mod health;
mod help_truth;
mod hostile;
mod hostile_bounds;
mod hostile_journal;
mod hostile_json;
mod hostile_lock;
mod hostile_peer;
mod hostile_recheck;
mod hostile_suite;
mod hostile_text;
mod in_job;
mod interface;
mod journal_check;
mod journal_sums;
mod kill_window;
mod kills;
mod kills_random;
mod kmod;
mod monitoring;
mod monitoring_html;
mod monitoring_prometheus;
mod monitoring_rules;
mod nic;
mod openibd;
mod owed;
mod pair_rails;
mod pcie_path;
mod plan_snapshot;
mod profile_checks;
mod progress;
mod read_door;
mod recovery;
mod reliability;
mod roce_fabric;
mod scripts;
mod suggested;
mod sweep;
mod trial;
mod uki;
mod verify;
mod when;
