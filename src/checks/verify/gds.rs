//! Verify's `gds` check, for a profile with `gds.mode`: on the running system, a short
//! `bench gds` (64 MiB, one round) on the first mount the profile names (`/`: in /var/tmp) says
//! which mode cuFile really used, and the check fails when it is not the mode wanted, naming
//! the causes and their fixes; on another root, what the facts allow of it.

use super::cx::Cx;
use crate::bench::gds::{GdsOptions, GdsReport};
use crate::checks::doctor::gds_rules::{evaluate, mounts};
use crate::checks::Check;
use crate::facts::gds::GdsMode;
use crate::facts::gds_causes::Cause;
use crate::profile::gds::GdsWant;

const NAME: &str = "gds";

fn wanted(want: GdsWant, mode: GdsMode) -> bool {
    match want {
        GdsWant::P2pdma => mode == GdsMode::P2pdma,
        GdsWant::Nvfs => mode == GdsMode::Nvfs,
        GdsWant::AnyDirect => mode != GdsMode::Compat,
    }
}

fn failed(what: &str, causes: &[Cause]) -> Check {
    let why: Vec<&str> = causes.iter().map(|c| c.what.as_str()).collect();
    let fix: Vec<&str> = causes.iter().map(|c| c.fix.as_str()).collect();
    Check::fail(NAME, format!("{what}: {}", why.join("; ")), fix.join("; "))
}

/// The directory the short bench writes in: the mount point, `/var/tmp` for `/`.
fn bench_dir(mount: &str) -> String {
    if mount == "/" {
        "/var/tmp".into()
    } else {
        mount.to_string()
    }
}

fn live(cx: &Cx, want: GdsWant, mount: &str) -> Check {
    let dir = bench_dir(mount);
    let o = GdsOptions {
        dir: dir.clone().into(),
        sizes: vec![64 << 20],
        gpu: 0,
        threads: 8,
        chunk: 4 << 20,
        rounds: 1,
        file: None,
    };
    // No cuFile log: its place is set before CUDA loads, which verify's facts have done.
    let r: GdsReport = match crate::bench::gds::run(&o, cx.facts, None) {
        Ok(r) => r,
        Err(e) => return Check::fail_with_cause(NAME, format!("bench gds in {dir}: {e}")),
    };
    let x = r.results.first();
    let figures = x
        .map(|x| {
            format!(
                "{:.2} GB/s read, {:.2} GB/s write, data {}",
                x.read_cold_gbs,
                x.write_gbs,
                if x.data_ok { "ok" } else { "WRONG" }
            )
        })
        .unwrap_or_default();
    if !r.passed {
        return Check::fail_with_cause(
            NAME,
            format!("bench gds in {dir}: the data read back was wrong ({figures})"),
        );
    }
    if wanted(want, r.mode) {
        Check::pass(
            NAME,
            format!("GDS ran in {} mode in {dir} ({figures})", r.mode.name()),
        )
    } else {
        failed(
            &format!(
                "GDS ran in {} mode in {dir}, not {} ({figures})",
                r.mode.name(),
                want.name()
            ),
            &r.compat_causes,
        )
    }
}

/// The check (none for a profile without `gds.mode`).
pub(super) fn check(cx: &Cx) -> Option<Check> {
    let want = cx.desired.doc.gds.mode?;
    let mount = mounts(&cx.desired.doc.gds.mounts).into_iter().next()?;
    if cx.host.is_live() && !cx.facts.gpus.is_empty() {
        return Some(live(cx, want, &mount));
    }
    let e = evaluate(cx.facts, want, &mount);
    let mut causes = e.open.clone();
    causes.extend(e.direct.iter().cloned());
    Some(match e.possible {
        Some(m) if causes.is_empty() => Check::pass(NAME, format!("nothing on this root closes {} mode on {mount} (not measured: not the running system)", m.name())),
        _ if causes.is_empty() => Check::skip(NAME, "not the running system: nothing to measure"),
        _ => failed(&format!("GDS would run in compat mode on {mount}, not {}", want.name()), &causes),
    })
}
