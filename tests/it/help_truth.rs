//! Help that is true per command (issue 45): each command lists and takes
//! only the shared options it uses (`--root`, `--format` and its values,
//! `--color`), refuses the rest in one line naming the fix, and the top-level
//! descriptions and the manual page say what the commands do now. The parser's
//! side of it, every command against its help, is
//! `commands::cli::tests::help_says_what_each_command_takes`.

use crate::common::*;

fn run(args: &[&str]) -> (i32, String, String) {
    let out = gdrprov().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        stdout_of(&out),
        stderr_of(&out),
    )
}

fn option_lines(help: &str, option: &str) -> usize {
    help.lines()
        .filter(|l| l.trim_start().starts_with(&format!("{option} <")))
        .count()
}

/// The fleet commands took `--root` and ignored it; `bench` listed it and
/// refused it when it ran. Now none lists it, and each refuses it in one
/// line that says why and what to do, having done nothing.
#[test]
fn commands_without_a_root_neither_list_nor_take_it() {
    let (_t, root) = example_root("ubuntu-22.04-h100");
    let r = root.display().to_string();
    for args in [
        vec![
            "fleet",
            "sweep",
            "simulate",
            "--nodes",
            "8",
            "--bad-nodes",
            "1",
            "--bad-rails",
            "1",
        ],
        vec!["fleet", "sweep", "report", "/nonexistent-results"],
        vec!["fleet", "sweep", "plan", "--nodelist", "a,b"],
        vec!["bench", "probe"],
        vec!["profile", "list"],
    ] {
        let (_, help, _) = run(&[&args[..2], &["--help"]].concat());
        let help = if args[0] == "fleet" {
            run(&[&args[..3], &["--help"]].concat()).1
        } else {
            help
        };
        assert_eq!(
            option_lines(&help, "--root"),
            0,
            "{args:?} lists --root:\n{help}"
        );
        for full in [
            [&args[..], &["--root", &r]].concat(),
            [&["--root", &r][..], &args[..]].concat(),
        ] {
            let (code, out, err) = run(&full);
            assert_eq!(code, 1, "{full:?}: {out}");
            assert!(out.is_empty(), "{full:?}: {out}");
            assert_eq!(err.lines().count(), 1, "{full:?}: {err}");
            assert!(
                err.contains("takes no --root") && err.contains("--root"),
                "{err}"
            );
        }
    }
}

/// `--format`: every help said prometheus was "`verify` only" while
/// `fleet sweep report` wrote it; now each command lists what it writes.
#[test]
fn each_command_lists_the_formats_it_writes() {
    for (args, writes, not) in [
        (
            vec!["fleet", "sweep", "report"],
            vec!["prometheus", "html"],
            vec![],
        ),
        (
            vec!["fleet", "sweep", "simulate"],
            vec!["html"],
            vec!["prometheus"],
        ),
        (vec!["verify"], vec!["prometheus"], vec!["html"]),
        (vec!["plan"], vec!["json"], vec!["prometheus", "html"]),
        (vec!["doctor"], vec!["json"], vec!["prometheus", "html"]),
    ] {
        let (_, help, _) = run(&[&args[..], &["--help"]].concat());
        assert!(!help.contains("` only"), "{args:?}:\n{help}");
        let section: String = help
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("--format <"))
            .take(12)
            .collect::<Vec<_>>()
            .join("\n");
        for f in writes {
            assert!(
                section.contains(f),
                "{args:?} does not list {f}:\n{section}"
            );
        }
        for f in not {
            assert!(!section.contains(f), "{args:?} lists {f}:\n{section}");
        }
    }
    // The html refusal names what the command writes, not another command
    // with the user's --root added to it.
    let (code, _, err) = run(&["plan", "rdma-dmabuf", "--root", "/tmp", "--format", "html"]);
    assert_eq!(code, 1);
    assert_eq!(
        err.trim(),
        "gdrprov: error: `gdrprov plan` writes --format text or json, not \"html\""
    );
}

/// Before the command, as scripts and the README write them, the shared
/// options still work where the command takes them.
#[test]
fn shared_options_before_the_command_still_work() {
    let (_t, root) = example_root("ubuntu-22.04-h100");
    let r = root.display().to_string();
    let out = gdrprov()
        .args(["--format", "json", "--root", &r, "doctor"])
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(v["command"], "doctor");
    assert_eq!(v["root"], r.as_str());
    let (code, _, err) = run(&["--color", "never", "doctor", "--root", &r]);
    assert_eq!(code, 1);
    assert!(err.contains("`gdrprov doctor` takes no --color"), "{err}");
    // Without a command, or with a word that is none, that is what is said.
    let (code, _, err) = run(&["--root", &r]);
    assert_eq!(code, 1);
    assert!(err.contains("--root needs a command after it"), "{err}");
    let (code, _, err) = run(&["--root", &r, "nosuch"]);
    assert_eq!(code, 1);
    assert!(err.contains("`nosuch` is not a gdrprov command"), "{err}");
}

/// The top level lists no option as if every command took it, says which
/// command takes which, and describes bench as all it is; the manual page
/// says the same.
#[test]
fn the_top_level_help_and_the_manual_say_what_is_true() {
    let (_, help, _) = run(&["--help"]);
    for o in ["--root", "--format", "--color"] {
        assert_eq!(
            option_lines(&help, o),
            0,
            "gdrprov --help lists {o}:\n{help}"
        );
    }
    assert!(
        help.contains("--format text|json|prometheus|html: fleet sweep report"),
        "{help}"
    );
    let bench = help
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("bench "))
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    for what in ["loopback", "pair", "probe", "copy", "p2p", "NCCL"] {
        assert!(
            bench.contains(what),
            "bench's description lacks {what}: {bench}"
        );
    }
    let (code, man, _) = run(&["man"]);
    assert_eq!(code, 0);
    assert!(
        !man.contains("` only"),
        "the manual says a format is one command's only"
    );
    assert!(
        man.contains("fleet sweep report"),
        "the manual lacks the options' table"
    );
    assert!(
        !man.contains("\\fB\\-\\-root\\fR \\fI<DIR>\\fR"),
        "the manual lists --root as global"
    );
}
