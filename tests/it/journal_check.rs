//! `gdrprov journal check` (issue 29): the whole journal against the root,
//! each thing wrong named with its fix, exit 3 when anything is; and a step
//! whose path climbs out of the root is refused by rollback, never skipped.

use crate::common::{gdrprov, json_of, snapshot, stderr_of, stdout_of};
use crate::util::{gd, Root};

const STATE: &str = "var/lib/gdrprov";

fn check(root: &Root) -> (Option<i32>, serde_json::Value) {
    let out = gd(root, &["journal", "check", "--format", "json"]);
    (out.status.code(), json_of(&out))
}

/// The problems of a report, as (kind, path) pairs.
fn kinds(v: &serde_json::Value) -> Vec<(String, String)> {
    v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["kind"].as_str().unwrap().to_string(),
                p["path"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn applied() -> Root {
    let root = Root::example("ubuntu-22.04-h100");
    let out = gd(&root, &["apply", "rdma-dmabuf", "--yes", "--no-exec"]);
    assert!(out.status.success(), "apply: {}", stderr_of(&out));
    root
}

#[test]
fn a_sound_journal_checks_ok() {
    let root = Root::example("ubuntu-22.04-h100");
    let (code, v) = check(&root);
    assert_eq!((code, v["ok"].as_bool()), (Some(0), Some(true)), "{v:#}");
    let root = applied();
    let (code, v) = check(&root);
    assert_eq!(code, Some(0), "{v:#}");
    assert_eq!(v["command"], "journal check");
    assert_eq!(v["generations"][0]["result"], "in-effect");
    assert_eq!(v["generations"][0]["backups_checked"], 4, "{v:#}");
    let out = gd(&root, &["journal", "check"]);
    assert!(
        stdout_of(&out).contains("Journal OK"),
        "{}",
        stdout_of(&out)
    );
    // Rolled back, it is still sound.
    assert!(gd(&root, &["rollback", "-y", "--no-exec"]).status.success());
    let (code, v) = check(&root);
    assert_eq!(code, Some(0), "{v:#}");
    assert_eq!(v["generations"][0]["result"], "rolled-back");
    assert_eq!(v["generations"][1]["result"], "complete");
}

#[test]
fn every_damage_is_named_with_its_fix() {
    let root = applied();
    let gen1 = root.join(STATE).join("generations/1");
    // A damaged backup, a file gdrprov owns edited, a step path that climbs.
    let good = std::fs::read(gen1.join("1.before")).unwrap();
    std::fs::write(gen1.join("1.before"), "garbage\n").unwrap();
    let nccl = root.join("etc/nccl.conf");
    let mut text = std::fs::read_to_string(&nccl).unwrap();
    text.push_str("NCCL_DEBUG=INFO\n");
    std::fs::write(&nccl, text).unwrap();
    let before = snapshot(&root);
    let (code, v) = check(&root);
    assert_eq!(code, Some(3), "{v:#}");
    assert_eq!(v["ok"], false);
    let k = kinds(&v);
    assert!(
        k.iter()
            .any(|(kind, p)| kind == "backup-mismatch" && p.ends_with("generations/1/1.before")),
        "{k:?}"
    );
    assert!(
        k.iter()
            .any(|(kind, p)| kind == "changed-since" && p.ends_with("/etc/nccl.conf")),
        "{k:?}"
    );
    assert!(v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| !p["fix"].as_str().unwrap().is_empty()));
    let text = stdout_of(&gd(&root, &["journal", "check"]));
    assert!(
        text.contains("2 problem(s)") && text.contains("fix:"),
        "{text}"
    );
    assert_eq!(snapshot(&root), before, "journal check changed the root");

    // A step path that climbs: the journal is refused when it is read
    // (issue 43: its record breaks the rules), naming the field.
    let jpath = gen1.join("journal.json");
    let mut j: serde_json::Value = serde_json::from_slice(&std::fs::read(&jpath).unwrap()).unwrap();
    let climbing = format!("/../../../..{}", j["steps"][0]["path"].as_str().unwrap());
    j["steps"][0]["path"] = climbing.clone().into();
    std::fs::write(&jpath, serde_json::to_vec_pretty(&j).unwrap()).unwrap();
    let (code, v) = check(&root);
    assert_eq!(code, Some(3), "{v:#}");
    let unreadable = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["kind"] == "journal-unreadable")
        .unwrap_or_else(|| panic!("{v:#}"));
    let m = unreadable["message"].as_str().unwrap();
    assert!(m.contains("steps[0].path") && m.contains(&climbing), "{m}");

    // The climbing step is refused by rollback even with --force, not
    // skipped (issue 29, case 2). The damaged backup put back first.
    std::fs::write(gen1.join("1.before"), good).unwrap();
    let out = gd(&root, &["rollback", "-y", "--no-exec", "--force"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains(&climbing) && err.contains("steps[0].path"),
        "{err}"
    );
}

#[test]
fn an_unfinished_or_unreadable_generation_and_a_lost_journal_are_named() {
    let root = Root::example("ubuntu-22.04-h100");
    let out = gdrprov()
        .env("GDRPROV_FAULT_AFTER_STEP", "1")
        .args([
            "apply",
            "rdma-dmabuf",
            "-y",
            "--no-exec",
            "--root",
            root.arg(),
        ])
        .output()
        .unwrap();
    assert!(out.status.code().is_none(), "the fault did not fire");
    let (code, v) = check(&root);
    assert_eq!(code, Some(3), "{v:#}");
    let p = &v["problems"][0];
    assert_eq!(p["kind"], "unfinished", "{v:#}");
    assert!(
        p["message"].as_str().unwrap().contains("still changed"),
        "{p}"
    );
    assert!(
        p["fix"].as_str().unwrap().contains("gdrprov recover"),
        "{p}"
    );
    assert!(gd(&root, &["recover", "-y", "--no-exec"]).status.success());
    assert_eq!(check(&root).0, Some(0));

    let root = applied();
    std::fs::write(root.join(STATE).join("generations/1/journal.json"), "{").unwrap();
    // recover cannot tell whether that run finished: an error, not "nothing".
    let out = gd(&root, &["recover", "-y", "--no-exec"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout_of(&out));
    assert!(
        stderr_of(&out).contains("journal.json is damaged")
            && stderr_of(&out).contains("journal check"),
        "{}",
        stderr_of(&out)
    );
    let (code, v) = check(&root);
    assert_eq!(code, Some(3));
    let k = kinds(&v);
    assert_eq!(k[0].0, "journal-unreadable", "{v:#}");
    assert_eq!(v["generations"][0]["result"], "unreadable");
    assert!(k.iter().any(|(kind, _)| kind == "state-mismatch"), "{k:?}");

    let root = applied();
    std::fs::remove_dir_all(root.join(STATE).join("generations")).unwrap();
    let (code, v) = check(&root);
    assert_eq!(code, Some(3));
    assert_eq!(kinds(&v)[0].0, "state-mismatch", "{v:#}");
}
