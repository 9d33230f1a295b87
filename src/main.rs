fn main() {
    // Die quietly on a closed pipe (`gdrprov profile schema | head`), as Unix
    // tools do, instead of panicking in println!.
    // First thing, before any thread exists.
    gdrprov_sys::default_sigpipe();
    std::process::exit(gdrprov::commands::main());
}
