//! Every command's name as the JSON envelope, the Ansible module, the
//! journal and the messages spell it (`boot list`, `fleet sweep plan`): the
//! command words, spelled once. clap derives the words from the variants in
//! src/commands/cli/; a test there walks clap's tree and checks that every
//! command it has is in [`ALL`], and that `Command::name` says the same.
//! And what each command takes of the options several commands share
//! ([`takes`]: `--root`, `--format` and its values, `--color`), which the
//! parser adds to it alone and a suggested command keeps only where it is
//! taken. Nothing here imports anything, so every layer may use it.

pub const PLAN: &str = "plan";
pub const APPLY: &str = "apply";
pub const ROLLBACK: &str = "rollback";
pub const RECOVER: &str = "recover";
pub const VERIFY: &str = "verify";
pub const HISTORY: &str = "history";
pub const JOURNAL_CHECK: &str = "journal check";
pub const PROFILE_LIST: &str = "profile list";
pub const PROFILE_SHOW: &str = "profile show";
pub const PROFILE_VALIDATE: &str = "profile validate";
pub const PROFILE_SCHEMA: &str = "profile schema";
pub const BENCH: &str = "bench";
pub const BENCH_LOOPBACK: &str = "bench loopback";
pub const BENCH_PROBE: &str = "bench probe";
pub const BENCH_COPY: &str = "bench copy";
pub const BENCH_PAIR: &str = "bench pair";
pub const BENCH_P2P: &str = "bench p2p";
pub const BENCH_NCCL: &str = "bench nccl";
pub const BENCH_GDS: &str = "bench gds";
pub const FLEET_SWEEP_PLAN: &str = "fleet sweep plan";
pub const FLEET_SWEEP_REPORT: &str = "fleet sweep report";
pub const FLEET_SWEEP_SIMULATE: &str = "fleet sweep simulate";
pub const INVENTORY: &str = "inventory";
pub const DOCTOR: &str = "doctor";
pub const BOOT_LIST: &str = "boot list";
pub const BOOT_SET_DEFAULT: &str = "boot set-default";
pub const BOOT_ONCE: &str = "boot once";
pub const COMMIT: &str = "commit";
pub const ANSIBLE_MODULE: &str = "ansible-module";
pub const COMPLETIONS: &str = "completions";
pub const MAN: &str = "man";
pub const RECHECK: &str = "recheck";

/// Every command, as its words (the groups `bench`, `boot`, ... are the
/// first word of several).
pub const ALL: &[&str] = &[
    PLAN,
    APPLY,
    ROLLBACK,
    RECOVER,
    VERIFY,
    HISTORY,
    JOURNAL_CHECK,
    PROFILE_LIST,
    PROFILE_SHOW,
    PROFILE_VALIDATE,
    PROFILE_SCHEMA,
    BENCH_LOOPBACK,
    BENCH_PROBE,
    BENCH_COPY,
    BENCH_PAIR,
    BENCH_P2P,
    BENCH_NCCL,
    BENCH_GDS,
    FLEET_SWEEP_PLAN,
    FLEET_SWEEP_REPORT,
    FLEET_SWEEP_SIMULATE,
    INVENTORY,
    DOCTOR,
    BOOT_LIST,
    BOOT_SET_DEFAULT,
    BOOT_ONCE,
    COMMIT,
    ANSIBLE_MODULE,
    COMPLETIONS,
    MAN,
    RECHECK,
];

/// Whether WORD is a group of commands (`boot` of `boot list`).
pub fn is_group(word: &str) -> bool {
    ALL.iter().any(|n| {
        n.strip_prefix(word)
            .is_some_and(|rest| rest.starts_with(' '))
    })
}

/// The command a command line names (`boot once E --root R` is
/// `boot once`): the longest run of its first words that is a command.
pub fn command_of(line: &str) -> Option<&'static str> {
    let words: Vec<&str> = line.split_whitespace().take(3).collect();
    (1..=words.len())
        .rev()
        .find_map(|n| ALL.iter().find(|c| **c == words[..n].join(" ")).copied())
}

/// What a command does with `--root`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootUse {
    /// Takes none (it acts on this machine, or on files named on its command line).
    None,
    /// Reads the root, changes nothing in it.
    Read,
    /// Reads and changes the root.
    Change,
}

/// What a command takes of the options several commands share.
#[derive(Debug, Clone, Copy)]
pub struct Takes {
    pub root: RootUse,
    /// The `--format` values it writes; none: one fixed output, no `--format`.
    pub formats: &'static [&'static str],
    /// Whether it shows diffs (`--color`).
    pub color: bool,
}

const TEXT_JSON: &[&str] = &["text", "json"];

/// What each command (as its words) takes of `--root`, `--format` and
/// `--color`; `None` for words that are no command (a group such as `bench`).
/// src/commands/cli/shared.rs adds exactly these to each command's parser.
pub fn takes(path: &str) -> Option<Takes> {
    let t = |root, formats, color| {
        Some(Takes {
            root,
            formats,
            color,
        })
    };
    match path {
        PLAN => t(RootUse::Read, TEXT_JSON, true),
        APPLY | ROLLBACK | RECOVER | COMMIT | BOOT_SET_DEFAULT => {
            t(RootUse::Change, TEXT_JSON, true)
        }
        BOOT_ONCE | RECHECK => t(RootUse::Change, TEXT_JSON, false),
        VERIFY => t(RootUse::Read, &["text", "json", "prometheus"], false),
        HISTORY | JOURNAL_CHECK | INVENTORY | DOCTOR | BOOT_LIST => {
            t(RootUse::Read, TEXT_JSON, false)
        }
        PROFILE_LIST | PROFILE_SHOW | PROFILE_VALIDATE => t(RootUse::None, TEXT_JSON, false),
        BENCH_LOOPBACK | BENCH_PROBE | BENCH_COPY | BENCH_PAIR | BENCH_P2P | BENCH_NCCL
        | BENCH_GDS => t(RootUse::None, TEXT_JSON, false),
        FLEET_SWEEP_PLAN => t(RootUse::None, TEXT_JSON, false),
        FLEET_SWEEP_REPORT => t(
            RootUse::None,
            &["text", "json", "prometheus", "html"],
            false,
        ),
        FLEET_SWEEP_SIMULATE => t(RootUse::None, &["text", "json", "html"], false),
        PROFILE_SCHEMA | COMPLETIONS | MAN | ANSIBLE_MODULE => t(RootUse::None, &[], false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_names_its_command() {
        assert_eq!(command_of("boot once E --root R"), Some(BOOT_ONCE));
        assert_eq!(command_of("fleet sweep report d"), Some(FLEET_SWEEP_REPORT));
        assert_eq!(command_of("plan"), Some(PLAN));
        assert_eq!(command_of("boot"), None);
        assert_eq!(command_of(""), None);
    }

    #[test]
    fn every_command_says_what_it_takes() {
        for n in ALL {
            assert!(takes(n).is_some(), "{n}");
        }
        assert!(takes(BENCH).is_none() && takes("fleet sweep").is_none());
    }

    #[test]
    fn groups_are_first_words() {
        for g in ["profile", "boot", BENCH, "fleet", "journal"] {
            assert!(is_group(g), "{g}");
        }
        for w in ["plan", "bo", "sweep", "boot list", ""] {
            assert!(!is_group(w), "{w}");
        }
    }
}
