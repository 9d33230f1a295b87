//! The profile parser: any text is either a profile or a one-line error with
//! a position; never a panic, never unbounded time or memory (alias bombs and
//! deep nesting stop at the parser's budget).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match gdrprov::profile::parse(text, "fuzz.yaml") {
        Ok(doc) => {
            // What load() checks next must not panic either.
            for a in doc
                .boot
                .cmdline
                .present
                .iter()
                .chain(&doc.boot.cmdline.absent)
            {
                let _ = gdrprov_boot::cmdline::validate_arg(a);
            }
            for f in &doc.files {
                let _ = gdrprov::host::check_profile_path(&f.path);
                if let Some(m) = &f.mode {
                    let _ = gdrprov::profile::load::parse_mode(m);
                }
            }
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.starts_with("fuzz.yaml"),
                "error without the file: {msg}"
            );
        }
    }
});
