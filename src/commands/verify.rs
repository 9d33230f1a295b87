//! `gdrprov verify`: the host against profiles, down to the RDMA loopback.

use crate::cli::VerifyArgs;
use crate::error::Result;
use crate::exit;
use crate::ops;
use crate::render::{Format, Output};

pub fn run(out: &Output, a: &VerifyArgs) -> Result<i32> {
    let report = match ops::verify(&a.request(&out.root)) {
        Ok(r) => r,
        Err(e) => {
            // The marker says why, so that a unit's failure is visible without the journal.
            if let Some(dir) = &a.marker_dir {
                let _ = crate::fleet::write_marker(dir, false, &e.to_string());
            }
            return Err(e);
        }
    };
    if let Some(dir) = &a.marker_dir {
        crate::fleet::write_marker(dir, report.ready, &crate::fleet::marker_text(&report))?;
    }
    if let Some(path) = &a.textfile {
        crate::fleet::write_textfile(path, &crate::fleet::prometheus(&report))?;
    }
    match out.format {
        Format::Json => out.document("verify", &report),
        Format::Text => out.text(&crate::verify::text(&report)),
        Format::Prometheus => print!("{}", crate::fleet::prometheus(&report)),
    }
    Ok(if report.ready {
        exit::OK
    } else {
        exit::NOT_READY
    })
}
