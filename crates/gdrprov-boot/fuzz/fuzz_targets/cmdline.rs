//! The kernel command-line parser: `split` behaves like the kernel's
//! `next_arg`, and `validate_arg` only accepts arguments that are one plain
//! word for the shell, GRUB and the kernel.
#![no_main]
use gdrprov_boot::cmdline::{self, is_kernel_space};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    let spans = cmdline::split_spans(&s);
    let mut last_end = 0;
    for &(a, b) in &spans {
        assert!(a >= last_end && a < b && b <= s.len(), "bad span {a}..{b}");
        last_end = b;
    }
    let args = cmdline::split(&s);
    assert_eq!(args.len(), spans.len());
    for a in &args {
        assert!(!a.is_empty());
        assert!(!a.starts_with(is_kernel_space));
        // Only the last argument may hold an unclosed quote (it runs to the end).
    }
    for a in args.iter().rev().skip(1) {
        assert!(!a.ends_with(is_kernel_space), "{a:?}");
        assert_eq!(a.matches('"').count() % 2, 0, "{a:?}");
    }
    // Splitting is stable: joining the arguments with one space and
    // splitting again gives the same arguments.
    assert_eq!(cmdline::split(&args.join(" ")), args, "{s:?}");
    for a in &args {
        let k = cmdline::key(a);
        match cmdline::value(a) {
            Some(v) => assert_eq!(format!("{k}={v}"), *a),
            None => assert_eq!(k, a),
        }
        if cmdline::validate_arg(a).is_ok() {
            assert!(!a.chars().any(|c| c.is_whitespace()
                || c.is_control()
                || !c.is_ascii()
                || "\"'`$;\\|&<>#".contains(c)));
            assert!(!a.starts_with('='));
            assert_eq!(cmdline::split(a), vec![a.clone()]);
        }
    }
    // Whole input as one argument: accepted only when it is one plain word.
    if cmdline::validate_arg(&s).is_ok() {
        assert_eq!(cmdline::split(&s), vec![s.to_string()]);
    }
});
