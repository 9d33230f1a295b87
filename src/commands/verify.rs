//! `gdrprov verify`: the host against profiles, down to the RDMA loopback
//! (src/ops/verify.rs), with the files it leaves for units and exporters.

use crate::commands::cli::VerifyArgs;
use crate::error::{exit, Result};
use crate::names;
use crate::ops::{self, VerifyFiles, VerifyRequest};
use crate::output::metrics::prometheus;
use crate::output::{Format, Output};

pub fn run(out: &Output, req: &VerifyRequest, a: &VerifyArgs) -> Result<i32> {
    let files = VerifyFiles {
        marker_dir: a.marker_dir.clone(),
        nfd_file: a.nfd_file.clone(),
        nfd_expiry: a.nfd_expiry,
        textfile: a.textfile.clone(),
    };
    let mut report = if a.in_job {
        ops::verify_in_job(&req.root)?
    } else {
        ops::verify_writing(req, &files)?
    };
    // Suggested commands keep the user's --root (and --format), in JSON too.
    crate::output::verify::keep_given(&mut report, &out.given(&req.root));
    match out.format {
        Format::Json => out.document(names::VERIFY, &req.root, &report),
        Format::Text | Format::Html => out.text(&req.root, &crate::output::verify::text(&report)),
        Format::Prometheus => out.exposition(&prometheus(&report)),
    }
    Ok(if report.ready {
        exit::OK
    } else {
        exit::NOT_READY
    })
}
