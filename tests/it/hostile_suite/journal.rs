//! The journal and the state as strict documents (issue 43), generated:
//! each tampering of a journal that a real apply wrote (on a copy of an
//! example root) × each reader of it (rollback, recover, journal check,
//! history). Every case: refused, the message naming the journal file and
//! the field, the tree unchanged (kind, mode, owner, content). Each tampering
//! runs twice, once with the step's `meta_sum` left as it was (the checksum
//! may catch it first: then the message names `meta_sum`) and once with it
//! recomputed, as someone able to write the journal would: the metadata
//! rules must refuse it all the same.
//!
//! `journal check` reports rather than refuses: exit 3 (docs/commands.md),
//! naming the file and the field, the tree unchanged.

use super::harness::{assert_refused, assert_unchanged, run_in, tree};
use crate::util::Root;
use serde_json::{json, Value};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

const STATE: &str = "var/lib/gdrprov";
const JOURNAL: &str = "var/lib/gdrprov/generations/1/journal.json";
/// The file the extra profile creates, in a directory that did not exist.
const CREATED: &str = "/etc/hostile-extra.d/x.conf";

/// The two journals every case starts from: `done`, an apply that completed;
/// `cut`, the same apply killed after the steps that matter (recover's).
struct Bases {
    _t: tempfile::TempDir,
    done: Root,
    cut: Root,
    /// Index of the step that edited /etc/default/grub, and of the one that
    /// created [`CREATED`].
    grub: usize,
    created: usize,
}

fn profile(dir: &Path) -> String {
    let p = dir.join("extra.yaml");
    std::fs::write(
        &p,
        format!("name: extra\nextends: rdma-dmabuf\nfiles:\n  - path: {CREATED}\n    content: \"x=1\\n\"\n"),
    )
    .unwrap();
    p.display().to_string()
}

fn apply(root: &Root, profile: &str, fault: Option<usize>) {
    let mut c = crate::common::gdrprov();
    c.args(["apply", profile, "--yes", "--no-exec", "--root", root.arg()]);
    if let Some(n) = fault {
        c.env("GDRPROV_FAULT_AFTER_STEP", n.to_string());
    }
    let out = c.output().unwrap();
    assert_eq!(
        out.status.success(),
        fault.is_none(),
        "apply (fault {fault:?}): {out:?}"
    );
}

fn journal(root: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(root.join(JOURNAL)).unwrap()).unwrap()
}

fn bases() -> Bases {
    let t = tempfile::tempdir().unwrap();
    let p = profile(t.path());
    let done = Root::example("ubuntu-22.04-h100");
    apply(&done, &p, None);
    let steps = journal(&done)["steps"].as_array().unwrap().clone();
    let at = |path: &str| steps.iter().position(|s| s["path"] == path).unwrap();
    let (grub, created) = (at("/etc/default/grub"), at(CREATED));
    assert!(steps[grub]["before_meta"].is_object(), "{:?}", steps[grub]);
    assert_eq!(
        steps[created]["created_dirs"],
        json!(["/etc/hostile-extra.d"])
    );
    let cut = Root::example("ubuntu-22.04-h100");
    apply(&cut, &p, Some(grub.max(created) + 1));
    assert_eq!(journal(&cut)["status"], "in-progress");
    Bases {
        _t: t,
        done,
        cut,
        grub,
        created,
    }
}

/// The step's `meta_sum` as gdrprov computes it (journal::rules): SHA-256
/// over `[path, before, before_meta, created_dirs]` as JSON.
fn reseal(step: &mut Value) {
    use sha2::Digest;
    let get = |k: &str, empty: Value| step.get(k).cloned().unwrap_or(empty);
    let covered = json!([
        get("path", Value::Null),
        get("before", Value::Null),
        get("before_meta", Value::Null),
        get("created_dirs", json!([]))
    ]);
    let d = sha2::Sha256::digest(covered.to_string().as_bytes());
    step["meta_sum"] = Value::String(d.iter().map(|b| format!("{b:02x}")).collect());
}

/// One way of tampering: what it does to the journal (or the root), and the
/// words the refusal must hold.
struct Tamper {
    name: &'static str,
    edit: fn(&mut Value, &Path, &Bases),
    /// The words (the field) every reader's message names.
    needle: &'static str,
    /// A rule on the root (owner, a user's directory): `history` only lists
    /// and does not refuse it; a step it edits, resealed or not.
    live: bool,
    /// The step it edits, whose `meta_sum` is recomputed; `None`: not a step.
    step: fn(&Bases) -> Option<usize>,
}

fn grub(b: &Bases) -> Option<usize> {
    Some(b.grub)
}
fn created(b: &Bases) -> Option<usize> {
    Some(b.created)
}
fn no_step(_: &Bases) -> Option<usize> {
    None
}

fn mode_or(bits: u32) -> impl Fn(&mut Value, &Path, &Bases) {
    move |j, _, b| {
        let m = &mut j["steps"][b.grub]["before_meta"]["mode"];
        *m = json!(m.as_u64().unwrap() as u32 | bits);
    }
}

/// A user's directory in the root, owned by uid 65534, empty.
fn user_dir(root: &Path) {
    let d = root.join("home/alice");
    std::fs::create_dir_all(&d).unwrap();
    std::os::unix::fs::chown(&d, Some(65534), Some(65534)).unwrap();
}

fn tampers() -> Vec<Tamper> {
    vec![
        Tamper {
            name: "mode past 7777",
            edit: |j, _, b| j["steps"][b.grub]["before_meta"]["mode"] = json!(0o17777),
            needle: "before_meta.mode",
            live: false,
            step: grub,
        },
        Tamper {
            name: "another uid",
            edit: |j, _, b| j["steps"][b.grub]["before_meta"]["uid"] = json!(1000),
            needle: "before_meta.uid",
            live: true,
            step: grub,
        },
        Tamper {
            name: "another gid",
            edit: |j, _, b| j["steps"][b.grub]["before_meta"]["gid"] = json!(1000),
            needle: "before_meta.gid",
            live: true,
            step: grub,
        },
        Tamper {
            name: "created_dirs naming a user's directory",
            edit: |j, r, b| {
                user_dir(r);
                j["steps"][b.created]["created_dirs"] =
                    json!(["/etc/hostile-extra.d", "/home/alice"]);
            },
            needle: "created_dirs",
            live: false,
            step: created,
        },
        Tamper {
            name: "a step path in gdrprov's state",
            edit: |j, _, b| j["steps"][b.created]["path"] = json!("/var/lib/gdrprov/state.json"),
            needle: "steps[",
            live: false,
            step: created,
        },
        Tamper {
            name: "a step path of the state dir itself",
            edit: |j, _, b| {
                j["steps"][b.created]["path"] = json!("/var/lib/gdrprov/generations/1/journal.json")
            },
            needle: "gdrprov's own state",
            live: false,
            step: created,
        },
        Tamper {
            name: "a before backup that climbs out",
            edit: |j, _, b| j["steps"][b.grub]["before"] = json!("../../../etc/shadow"),
            needle: ".before`",
            live: false,
            step: grub,
        },
        Tamper {
            name: "a before backup of another generation",
            edit: |j, _, b| {
                j["steps"][b.grub]["before"] = json!(format!("generations/2/{}.before", b.grub))
            },
            needle: ".before`",
            live: false,
            step: grub,
        },
        Tamper {
            name: "an after backup of another step",
            edit: |j, _, b| {
                j["steps"][b.grub]["after"] = json!(format!("generations/1/{}.after", b.created))
            },
            needle: ".after`",
            live: false,
            step: grub,
        },
        Tamper {
            name: "mode as a string",
            edit: |j, _, b| j["steps"][b.grub]["before_meta"]["mode"] = json!("0644"),
            needle: "before_meta.mode",
            live: false,
            step: no_step,
        },
        Tamper {
            name: "uid past u32",
            edit: |j, _, b| j["steps"][b.grub]["before_meta"]["uid"] = json!(1u64 << 40),
            needle: "before_meta.uid",
            live: false,
            step: no_step,
        },
        Tamper {
            name: "done missing",
            edit: |j, _, b| {
                j["steps"][b.grub].as_object_mut().unwrap().remove("done");
            },
            needle: "`done`",
            live: false,
            step: no_step,
        },
        Tamper {
            name: "status of another type",
            edit: |j, _, _| j["status"] = json!(3),
            needle: "status",
            live: false,
            step: no_step,
        },
        Tamper {
            name: "an unknown field",
            edit: |j, _, b| j["steps"][b.grub]["before_mode"] = json!(420),
            needle: "before_mode",
            live: false,
            step: no_step,
        },
        Tamper {
            name: "a future major version",
            edit: |j, _, _| j["format_version"] = json!("2.0"),
            needle: "format_version",
            live: false,
            step: no_step,
        },
        Tamper {
            name: "a version that is not one",
            edit: |j, _, _| j["format_version"] = json!(["1"]),
            needle: "format_version",
            live: false,
            step: no_step,
        },
        Tamper {
            name: "meta_sum missing",
            edit: |j, _, b| {
                j["steps"][b.grub]
                    .as_object_mut()
                    .unwrap()
                    .remove("meta_sum");
            },
            needle: "meta_sum",
            live: false,
            step: no_step,
        },
        Tamper {
            name: "state_after owning gdrprov's state",
            edit: |j, _, _| {
                j["state_after"]["files"]["/var/lib/gdrprov/state.json"] = json!({"original": null})
            },
            needle: "state_after.files",
            live: false,
            step: no_step,
        },
    ]
}

/// A copy of `base` (`cp -a`: modes and owners kept) to tamper with.
fn copy(base: &Path, t: &Path, name: &str) -> PathBuf {
    let to = t.join(name);
    let ok = std::process::Command::new("cp")
        .arg("-a")
        .arg(base)
        .arg(&to)
        .status()
        .unwrap();
    assert!(ok.success());
    to
}

/// Runs each reader on a tampered copy: rollback, history and journal check
/// on the completed apply's journal, recover on the cut one.
fn case(b: &Bases, t: &Path, tp: &Tamper, reseal_it: bool) {
    let label = format!(
        "{} ({})",
        tp.name,
        if reseal_it {
            "meta_sum recomputed"
        } else {
            "meta_sum as it was"
        }
    );
    let step = (tp.step)(b);
    // Without a recomputed sum, an edited step may be caught by its checksum first.
    let needles: Vec<&str> = match (reseal_it, step) {
        (false, Some(_)) if tp.live => vec!["meta_sum"],
        _ => vec![tp.needle],
    };
    for (which, base, readers) in [
        (
            "done",
            &b.done,
            &[
                &["rollback", "--yes"][..],
                &["history"],
                &["journal", "check"],
            ][..],
        ),
        (
            "cut",
            &b.cut,
            &[&["recover", "--yes"][..], &["journal", "check"]][..],
        ),
    ] {
        let root = copy(
            base,
            t,
            &format!("{}-{reseal_it}-{which}", tp.name.replace(' ', "_")),
        );
        let mut j = journal(&root);
        (tp.edit)(&mut j, &root, b);
        if let (true, Some(i)) = (reseal_it, step) {
            reseal(&mut j["steps"][i]);
        }
        std::fs::write(root.join(JOURNAL), serde_json::to_vec_pretty(&j).unwrap()).unwrap();
        let r = root.to_str().unwrap();
        for args in readers {
            if tp.live && args[0] == "history" {
                continue;
            }
            let case = format!("{label}: {}", args.join(" "));
            let before = tree(&root);
            let mut full = args.to_vec();
            full.extend(["--root", r]);
            let out = run_in(None, &full);
            let text = if args[0] == "journal" {
                let text = format!(
                    "{}{}",
                    crate::common::stdout_of(&out),
                    crate::common::stderr_of(&out)
                );
                assert_eq!(
                    out.status.code(),
                    Some(3),
                    "{case}: journal check exit {:?}\n{text}",
                    out.status.code()
                );
                text
            } else {
                assert_refused(&out, "journal.json", &case)
            };
            for n in needles.iter().chain(["generations/1/journal.json"].iter()) {
                assert!(
                    text.contains(n),
                    "{case}: the message does not name `{n}`\n{text}"
                );
            }
            assert_unchanged(&before, &tree(&root), &case);
        }
        // The user's directory is there still, whoever read the journal.
        if root.join("home/alice").exists() {
            assert_eq!(
                std::fs::metadata(root.join("home/alice")).unwrap().uid(),
                65534
            );
        }
    }
}

#[test]
fn every_tampered_journal_is_refused_by_every_reader() {
    let b = bases();
    let t = tempfile::tempdir().unwrap();
    for tp in tampers() {
        for reseal_it in [false, true] {
            case(&b, t.path(), &tp, reseal_it);
        }
    }
}

/// state.json as a strict document: wrong types, a missing field, a path in
/// gdrprov's own state, another major version. Refused by every reader,
/// naming `state.json` and the field; `journal check` reports it (exit 3).
#[test]
fn every_tampered_state_is_refused_by_every_reader() {
    let b = bases();
    let t = tempfile::tempdir().unwrap();
    type Edit = (&'static str, fn(&mut Value), &'static str);
    let edits: [Edit; 5] = [
        (
            "generation as a string",
            |s| s["generation"] = json!("1"),
            "generation",
        ),
        (
            "profiles missing",
            |s| {
                s.as_object_mut().unwrap().remove("profiles");
            },
            "profiles",
        ),
        (
            "owning gdrprov's state",
            |s| s["files"]["/var/lib/gdrprov/lock"] = json!({"original": null}),
            "files",
        ),
        (
            "a future major version",
            |s| s["format_version"] = json!("3.1"),
            "format_version",
        ),
        (
            "an unknown field",
            |s| s["owner_of_all"] = json!(true),
            "owner_of_all",
        ),
    ];
    for (i, (name, edit, needle)) in edits.iter().enumerate() {
        let root = copy(&b.done, t.path(), &format!("state-{i}"));
        let p = root.join(STATE).join("state.json");
        let mut s: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        edit(&mut s);
        std::fs::write(&p, serde_json::to_vec_pretty(&s).unwrap()).unwrap();
        let r = root.to_str().unwrap();
        for args in [
            &["rollback", "--yes"][..],
            &["recover", "--yes"],
            &["history"],
            &["apply", "rdma-dmabuf", "--yes", "--no-exec"],
        ] {
            let case = format!("state {name}: {}", args.join(" "));
            let before = tree(&root);
            let mut full = args.to_vec();
            full.extend(["--root", r]);
            let text = assert_refused(&run_in(None, &full), "state.json", &case);
            assert!(
                text.contains(needle),
                "{case}: the message does not name `{needle}`\n{text}"
            );
            assert_unchanged(&before, &tree(&root), &case);
        }
        let out = run_in(None, &["journal", "check", "--root", r]);
        assert_eq!(out.status.code(), Some(3), "state {name}: journal check");
    }
}

/// What gdrprov writes carries its format version, and a newer minor
/// version's fields are passed over: the journal still rolls back.
#[test]
fn a_newer_minor_version_still_rolls_back() {
    let b = bases();
    let t = tempfile::tempdir().unwrap();
    let root = copy(&b.done, t.path(), "newer-minor");
    let mut j = journal(&root);
    assert_eq!(j["format_version"], "1.0");
    j["format_version"] = json!("1.4");
    j["comment"] = json!("a field of 1.4");
    j["steps"][b.grub]["checked_by"] = json!({"tool": "x"});
    std::fs::write(root.join(JOURNAL), serde_json::to_vec_pretty(&j).unwrap()).unwrap();
    let r = root.to_str().unwrap();
    for args in [
        &["history", "--root", r][..],
        &["rollback", "--yes", "--root", r],
    ] {
        let out = run_in(None, args);
        assert!(out.status.success(), "{args:?}: {out:?}");
    }
    let grub = std::fs::read(root.join("etc/default/grub")).unwrap();
    let pristine = Root::example("ubuntu-22.04-h100");
    assert_eq!(
        grub,
        std::fs::read(pristine.join("etc/default/grub")).unwrap()
    );
}

/// A journal of an older gdrprov (no `format_version`, no `meta_sum`) reads
/// as 1.x and still rolls back.
#[test]
fn an_unversioned_journal_reads_as_1x_under_the_same_rules() {
    let b = bases();
    let t = tempfile::tempdir().unwrap();
    let strip = |j: &mut Value| {
        j.as_object_mut().unwrap().remove("format_version");
        for s in j["steps"].as_array_mut().unwrap() {
            s.as_object_mut().unwrap().remove("meta_sum");
        }
    };
    let root = copy(&b.done, t.path(), "old");
    let mut j = journal(&root);
    strip(&mut j);
    std::fs::write(root.join(JOURNAL), serde_json::to_vec_pretty(&j).unwrap()).unwrap();
    let r = root.to_str().unwrap();
    for args in [
        &["history", "--root", r][..],
        &["journal", "check", "--root", r],
        &["rollback", "--yes", "--root", r],
    ] {
        let out = run_in(None, args);
        assert!(out.status.success(), "{args:?}: {out:?}");
    }
    let pristine = Root::example("ubuntu-22.04-h100");
    assert_eq!(
        std::fs::read(root.join("etc/default/grub")).unwrap(),
        std::fs::read(pristine.join("etc/default/grub")).unwrap()
    );
    assert!(
        !root.join("etc/hostile-extra.d").exists(),
        "the directory apply made is removed"
    );
}

/// A mode with set-id, sticky or world-write bits in a journal a release
/// wrote (a 0666 nccl.conf, a file of an ESP mounted umask=000), versioned
/// or of an older release: the journal loads (history, journal check), and
/// rollback puts the file back without those bits, saying so.
#[test]
fn a_set_id_or_world_writable_mode_is_put_back_without_those_bits() {
    let b = bases();
    let t = tempfile::tempdir().unwrap();
    let mode = std::fs::metadata(b.done.join("etc/default/grub"))
        .unwrap()
        .mode()
        & 0o7777;
    let pristine = Root::example("ubuntu-22.04-h100");
    let want_mode = std::fs::metadata(pristine.join("etc/default/grub"))
        .unwrap()
        .mode()
        & 0o7777;
    let _ = mode;
    for (bits, word) in [
        (0o4000, "setuid"),
        (0o2000, "setgid"),
        (0o1000, "sticky"),
        (0o0002, "write permission for others"),
    ] {
        for versioned in [true, false] {
            let root = copy(&b.done, t.path(), &format!("bits-{bits:o}-{versioned}"));
            let mut j = journal(&root);
            mode_or(bits)(&mut j, &root, &b);
            if versioned {
                reseal(&mut j["steps"][b.grub]);
            } else {
                j.as_object_mut().unwrap().remove("format_version");
                for s in j["steps"].as_array_mut().unwrap() {
                    s.as_object_mut().unwrap().remove("meta_sum");
                }
            }
            std::fs::write(root.join(JOURNAL), serde_json::to_vec_pretty(&j).unwrap()).unwrap();
            let r = root.to_str().unwrap();
            let case = format!("{word} (versioned {versioned})");
            for args in [
                &["history", "--root", r][..],
                &["journal", "check", "--root", r],
            ] {
                let out = run_in(None, args);
                assert!(out.status.success(), "{case}: {args:?}: {out:?}");
            }
            let out = run_in(None, &["rollback", "--yes", "--root", r]);
            let text = format!(
                "{}{}",
                crate::common::stdout_of(&out),
                crate::common::stderr_of(&out)
            );
            assert!(out.status.success(), "{case}: rollback: {text}");
            assert!(
                text.contains(word) && text.contains("etc/default/grub"),
                "{case}: no note\n{text}"
            );
            let grub = root.join("etc/default/grub");
            assert_eq!(
                std::fs::read(&grub).unwrap(),
                std::fs::read(pristine.join("etc/default/grub")).unwrap()
            );
            assert_eq!(
                std::fs::metadata(&grub).unwrap().mode() & 0o7777,
                want_mode & !0o7002,
                "{case}"
            );
        }
    }
}

/// A directory gdrprov made, taken over since (a package or an admin
/// chowned it): rollback and recover leave it in place, say so, and finish.
#[test]
fn a_created_directory_taken_over_since_is_left_and_named() {
    let b = bases();
    let t = tempfile::tempdir().unwrap();
    for (which, base, cmd) in [("done", &b.done, "rollback"), ("cut", &b.cut, "recover")] {
        let root = copy(base, t.path(), &format!("taken-{which}"));
        let d = root.join("etc/hostile-extra.d");
        std::os::unix::fs::chown(&d, Some(65534), Some(65534)).unwrap();
        let r = root.to_str().unwrap();
        let out = run_in(None, &[cmd, "--yes", "--root", r]);
        let text = format!(
            "{}{}",
            crate::common::stdout_of(&out),
            crate::common::stderr_of(&out)
        );
        assert!(out.status.success(), "{cmd}: {text}");
        assert!(
            text.contains("etc/hostile-extra.d") && text.contains("leaves it in place"),
            "{cmd}: no note\n{text}"
        );
        assert!(d.is_dir(), "{cmd}: the directory stays");
        assert_eq!(std::fs::metadata(&d).unwrap().uid(), 65534);
        assert!(
            !d.join("x.conf").exists(),
            "{cmd}: the file gdrprov created is gone"
        );
    }
}
