//! `gdrprov verify`: the host against profiles, down to the RDMA loopback.

use crate::commands::cli::VerifyArgs;
use crate::error::Result;
use crate::exit;
use crate::ops;
use crate::output::{Format, Output};

pub fn run(out: &Output, a: &VerifyArgs) -> Result<i32> {
    let report = match ops::verify(&a.request(&out.root)) {
        Ok(r) => r,
        Err(e) => {
            // The marker says why, so that a unit's failure is visible without the journal.
            if let Some(dir) = &a.marker_dir {
                let _ = crate::commands::fleet::write_marker(dir, false, &e.to_string());
            }
            if let Some(path) = &a.nfd_file {
                let _ = crate::fleet::nfd::write(path, None, &a.profiles, a.nfd_expiry);
            }
            return Err(e);
        }
    };
    if let Some(dir) = &a.marker_dir {
        crate::commands::fleet::write_marker(
            dir,
            report.ready,
            &crate::commands::fleet::marker_text(&report),
        )?;
    }
    if let Some(path) = &a.nfd_file {
        crate::fleet::nfd::write(path, Some(&report), &a.profiles, a.nfd_expiry)?;
    }
    if let Some(path) = &a.textfile {
        crate::commands::fleet::write_textfile(path, &crate::commands::fleet::prometheus(&report))?;
    }
    match out.format {
        Format::Json => out.document("verify", &report),
        Format::Text => out.text(&crate::checks::verify::text(&report)),
        Format::Prometheus => print!("{}", crate::commands::fleet::prometheus(&report)),
    }
    Ok(if report.ready {
        exit::OK
    } else {
        exit::NOT_READY
    })
}
