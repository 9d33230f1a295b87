//! `verify`, `recheck`, `doctor`, `inventory`: the commands that read a host
//! and say what it is, what it lacks, and whether it is ready.

use super::{ArchArg, CpuVendorArg};
use crate::ops;
use clap::Args;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `gdrprov inventory`
#[derive(Debug, Args)]
pub struct InventoryArgs {
    /// Copy every file the probes read, and the output of every command they ran, into DIR
    /// (a new directory): `--root DIR` then gives the same answers on any machine.
    #[arg(long, value_name = "DIR")]
    pub snapshot: Option<PathBuf>,
    #[command(flatten)]
    pub cpu: CpuVendorArg,
}

/// `gdrprov doctor`
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Profiles to check the host against (default: every built-in profile, and the best fit).
    #[arg(value_name = "PROFILE")]
    pub profiles: Vec<String>,
    /// An NCCL log (NCCL_DEBUG=INFO) whose lines are mapped to findings.
    #[arg(long, value_name = "FILE")]
    pub nccl_log: Option<PathBuf>,
    #[command(flatten)]
    pub cpu: CpuVendorArg,
}

/// `gdrprov verify`
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Built-in profile names or profile files the host must satisfy.
    #[arg(required_unless_present = "in_job", value_name = "PROFILE")]
    pub profiles: Vec<String>,
    /// Check what a job sees, from inside it (run by srun, mpirun, a Slurm prolog or in a
    /// container): its memlock limit, CAP_IPC_LOCK, /dev/infiniband, the RDMA providers of its
    /// root and NCCL_IB_HCA; it takes no profile, and exits 3 when one fails.
    #[arg(long, conflicts_with_all = ["profiles", "peer", "snapshot", "marker_dir", "nfd_file", "textfile", "no_loopback", "device", "duration", "min_gbps"])]
    pub in_job: bool,
    /// Skip the RDMA loopback bandwidth test.
    #[arg(long)]
    pub no_loopback: bool,
    /// RDMA device for the loopback (default: the first ACTIVE port).
    #[arg(long, value_name = "DEV", value_parser = crate::grammar::rail_port)]
    pub device: Option<String>,
    /// Seconds the loopback runs (default 3).
    #[arg(long, value_name = "SECS", value_parser = crate::grammar::seconds)]
    pub duration: Option<f64>,
    /// Loopback floor in Gb/s instead of the line-rate fraction (software RDMA devices).
    #[arg(long, value_name = "GBPS", value_parser = crate::grammar::rate)]
    pub min_gbps: Option<f64>,
    #[command(flatten)]
    pub cpu: CpuVendorArg,
    #[command(flatten)]
    pub arch: ArchArg,
    /// Write a readiness marker into DIR: `ready` (with the summary) or `failed` (with the
    /// reasons), removing the other; for the first-boot unit (`/run/gdrprov`).
    #[arg(long, value_name = "DIR")]
    pub marker_dir: Option<PathBuf>,
    /// Also write Prometheus metrics to FILE atomically (node-exporter's textfile collector,
    /// e.g. /var/lib/node_exporter/textfile_collector/gdrprov.prom).
    #[arg(long, value_name = "FILE")]
    pub textfile: Option<PathBuf>,
    /// Add the two-host check: `bench pair` from this host (client) to a listener on HOST
    /// (`gdrprov bench pair --listen` there), WRITE into its memory, data check and line rate.
    #[arg(long, value_name = "HOST[:PORT]", value_parser = crate::grammar::peer)]
    pub peer: Option<String>,
    /// The pair's shared secret [default: $GDRPROV_PAIR_TOKEN].
    #[arg(long, value_name = "FILE", requires = "peer")]
    pub token_file: Option<PathBuf>,
    /// Also write node-feature-discovery labels to FILE (gdrprov.ready, gdrprov.profile,
    /// gdrprov.rdma-path), e.g. /etc/kubernetes/node-feature-discovery/features.d/gdrprov.
    #[arg(long, value_name = "FILE")]
    pub nfd_file: Option<PathBuf>,
    /// How long NFD keeps those labels unless verify writes them again.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = humantime::parse_duration)]
    pub nfd_expiry: Duration,
    /// Copy every file verify's probes read, and the GPU copy figures it measured (each GPU
    /// alone and all together), into DIR (a new directory): `verify --root DIR` and `doctor
    /// --root DIR` then judge those figures on any machine.
    #[arg(long, value_name = "DIR")]
    pub snapshot: Option<PathBuf>,
}

impl VerifyArgs {
    pub fn request(&self, root: &Path) -> ops::VerifyRequest {
        ops::VerifyRequest {
            root: root.to_path_buf(),
            profiles: self.profiles.clone(),
            no_loopback: self.no_loopback,
            device: self.device.clone(),
            duration: self.duration,
            min_gbps: self.min_gbps,
            cpu_vendor: self.cpu.cpu_vendor,
            arch: self.arch.arch,
            peer: self.peer.clone(),
            token_file: self.token_file.clone(),
            composed: None,
            snapshot: self.snapshot.clone(),
        }
    }
}

/// `gdrprov recheck`
#[derive(Debug, Args)]
pub struct RecheckArgs {
    /// Profiles to check (default: those of the last apply in effect, from /var/lib/gdrprov;
    /// one that is not built in is read from /etc/gdrprov/NAME.yaml).
    #[arg(value_name = "PROFILE")]
    pub profiles: Vec<String>,
    /// Readiness marker directory: `ready` or `failed` (as `verify --marker-dir`); default:
    /// /run/gdrprov of the root (with --root R, R/run/gdrprov, never the machine's).
    #[arg(long, value_name = "DIR")]
    pub marker_dir: Option<PathBuf>,
    /// Prometheus textfile to refresh (default: the profile's `vars.gdrprov-textfile`, the file
    /// the first-boot unit writes; none when unset).
    #[arg(long, value_name = "FILE")]
    pub textfile: Option<PathBuf>,
    /// node-feature-discovery feature file to refresh, e.g.
    /// /etc/kubernetes/node-feature-discovery/features.d/gdrprov (default: the profile's
    /// `vars.gdrprov-nfd-file`; none when unset).
    #[arg(long, value_name = "FILE")]
    pub nfd_file: Option<PathBuf>,
    /// How long the node-feature labels live unless refreshed (they carry NFD's
    /// `# +expiry-time`); a re-check runs only when modules change, so a day.
    #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = humantime::parse_duration)]
    pub nfd_expiry: Duration,
    /// Give up after SECS: the marker then says `failed` (the re-check did not finish).
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub timeout: u64,
    /// What caused the re-check, for the summary line (e.g. `dpkg trigger /lib/modules`).
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
}
