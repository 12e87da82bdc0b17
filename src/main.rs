fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(flashprof::cli::main())
}
