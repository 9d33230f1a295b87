fn main() {
    // Die quietly on a closed pipe (`gdrprov profile schema | head`), as Unix
    // tools do, instead of panicking in println!.
    // SAFETY: called first thing, before any thread exists; SIG_DFL is a
    // valid disposition for SIGPIPE.
    unsafe {
        nix::libc::signal(nix::libc::SIGPIPE, nix::libc::SIG_DFL);
    }
    std::process::exit(gdrprov::commands::main());
}
