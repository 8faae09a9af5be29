//! `watchkeeper-sim`: see the library's [`watchkeeper_sim::main_with_args`].

fn main() {
    if let Err(message) = watchkeeper_sim::main_with_args(std::env::args()) {
        eprintln!("{message}");
        std::process::exit(1);
    }
}
