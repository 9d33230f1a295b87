//! `gdrprov verify`: the host against profiles, down to the RDMA loopback.

use crate::commands::cli::VerifyArgs;
use crate::error::Result;
use crate::exit;
use crate::host::textfile::{write_marker, write_textfile, Dest};
use crate::names;
use crate::ops::{self, VerifyRequest};
use crate::output::metrics::{marker_text, prometheus};
use crate::output::{Format, Output};

pub fn run(out: &Output, req: &VerifyRequest, a: &VerifyArgs) -> Result<i32> {
    let report = match ops::verify(req) {
        Ok(r) => r,
        Err(e) => {
            // The marker says why, so that a unit's failure is visible without the journal.
            if let Some(dir) = &a.marker_dir {
                let _ = write_marker(&Dest::Local(dir.clone()), false, &e.to_string());
            }
            if let Some(path) = &a.nfd_file {
                let _ = crate::ops::write_nfd(
                    &Dest::Local(path.clone()),
                    None,
                    &a.profiles,
                    a.nfd_expiry,
                );
            }
            return Err(e);
        }
    };
    if let Some(dir) = &a.marker_dir {
        write_marker(
            &Dest::Local(dir.clone()),
            report.ready,
            &marker_text(&report),
        )?;
    }
    if let Some(path) = &a.nfd_file {
        crate::ops::write_nfd(
            &Dest::Local(path.clone()),
            Some(&report),
            &a.profiles,
            a.nfd_expiry,
        )?;
    }
    if let Some(path) = &a.textfile {
        write_textfile(path, &prometheus(&report))?;
    }
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
