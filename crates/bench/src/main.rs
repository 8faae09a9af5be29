//! `watchkeeper-bench [SUITE...] [--smoke] [--runs N] [--out DIR]`: see the crate docs.

#[global_allocator]
static ALLOCATOR: watchkeeper_bench::alloc::Counting = watchkeeper_bench::alloc::Counting;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("__clients") {
        std::process::exit(watchkeeper_bench::clients::child_main(&args[1..]));
    }
    if args.first().map(String::as_str) == Some("__population-run") {
        std::process::exit(watchkeeper_bench::inproc::population_child_main(&args[1..]));
    }
    if args.first().map(String::as_str) == Some("__serve") {
        std::process::exit(watchkeeper_bench::restart::serve_main(&args[1..]));
    }
    let exe = std::env::current_exe().unwrap_or_else(|_| "watchkeeper-bench".into());
    if args.first().map(String::as_str) == Some("__profile") {
        std::process::exit(watchkeeper_bench::e2e::profile_main(exe, &args[1..]));
    }
    let options = match watchkeeper_bench::Options::parse(&args, exe) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    if let Err(message) = watchkeeper_bench::run(&options) {
        eprintln!("watchkeeper-bench: {message}");
        std::process::exit(1);
    }
}
