//! `bench gds`: the facts of the live host, then cuFile's run (`bench::gds`), then the
//! node-exporter textfile when asked.

use crate::bench::gds::{GdsOptions, GdsReport};
use crate::error::{Error, Result};
use crate::facts::Facts;
use crate::host::Host;
use std::path::PathBuf;

/// `bench gds`, as the command line asks it.
#[derive(Debug, Clone)]
pub struct GdsRequest {
    pub dir: PathBuf,
    pub file: Option<PathBuf>,
    pub sizes: Vec<u64>,
    pub gpu: u32,
    pub threads: usize,
    pub chunk: usize,
    pub rounds: u32,
    pub textfile: Option<PathBuf>,
}

/// Runs `bench gds` on this host.
pub fn gds(req: &GdsRequest) -> Result<GdsReport> {
    let dir = std::path::absolute(&req.dir)
        .map_err(|e| Error::io("resolve", req.dir.display().to_string(), e))?;
    // Where it writes, checked before any work: never through a link.
    crate::host::door::check_scratch_dir(&dir)?;
    if let Some(path) = &req.textfile {
        crate::host::textfile::Dest::Local(path.clone()).refuse_links()?;
    }
    // cuFile's log, at DEBUG, in a private directory (its P2PDMA answer per GPU): libcufile
    // reads where from the environment, which is set here, while the process has one thread
    // and before the facts load CUDA.
    let log = crate::bench::gds_log::LogDir::make(&dir);
    if let Some(l) = &log {
        l.point_cufile_here();
    }
    let host = Host::open(std::path::Path::new("/"), false)?;
    let facts = Facts::gather(&host, None);
    let sizes = if req.sizes.is_empty() {
        vec![crate::bench::gds::DEFAULT_SIZE]
    } else {
        req.sizes.clone()
    };
    let report = crate::bench::gds::run(
        &GdsOptions {
            dir,
            sizes,
            gpu: req.gpu,
            threads: req.threads,
            chunk: req.chunk,
            rounds: req.rounds,
            file: req.file.clone(),
        },
        &facts,
        log,
    )?;
    if let Some(path) = &req.textfile {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let text = crate::output::gds::prometheus(&report, now);
        crate::host::textfile::write_textfile(path, &text)?;
    }
    Ok(report)
}
