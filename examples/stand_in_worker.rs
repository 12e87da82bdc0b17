//! A STAND-IN for flashprof's worker process, used only by the protocol tests.
//!
//! It speaks the real protocol but runs no kernel: it answers compile and
//! load at once, and chooses a behaviour per case from the case's name, so a
//! test can exercise the caller's watchdog and restart logic on a machine
//! without a GPU:
//! - a name containing `hang` never answers (the watchdog must kill it);
//! - `crash` exits abruptly with no answer (a segfaulting driver, say);
//! - `signal` dies of SIGABRT with no answer;
//! - `timelimit` writes what slurmstepd writes when an allocation's time is up, and exits;
//! - `sticky` answers with a crash and then exits (a sticky CUDA error);
//! - `garbage` writes a line that is not a message;
//! - anything else passes.
//!
//! `FLASHPROF_STAND_IN_PROTOCOL=N` makes it greet with protocol N.
//!
//! Builds: a quick build and the optimized one give different images, and a
//! case's diagnosis says which image ran it. A case named `flaky-build`
//! passes on the quick image and fails on the optimized one; a case named
//! `slow...` takes half a second. The optimized build of a source text
//! containing `optimizer-takes-300ms` takes that long, and of one
//! containing `slow-optimizer` 30 s; with
//! `FLASHPROF_STAND_IN_MARKS=DIR` such a build first writes its process id
//! to `DIR/optimizing`, so a test can see that a stale build was stopped.
//! Started without a GPU (`FLASHPROF_GPU=none`, as the builder beside the
//! GPU worker is), it refuses to build a text containing `builder-fails`.
//!
//! Started with `FLASHPROF_WORKER_EXIT_ON_HANGUP=1` (as every remote worker
//! is), it ends when its caller hangs up, through the real worker's watch:
//! a `hang` case then shows that a worker stuck on a dropped link goes away.
//!
//! A case that arrives before any kernel was compiled or loaded in *this*
//! process fails, which is how the tests see that a restarted worker got
//! the kernel image again.

use std::io::{BufReader, Write};

use flashprof::facts::device::DeviceInfo;
use flashprof::gpu::compile::Build;
use flashprof::lab::flash_prefill::FLASH_PREFILL;
use flashprof::protocol::{
    read_message, write_message, CaseOutcome, CaseStatus, CompileOutcome, Event, Request,
    PROTOCOL_VERSION,
};

const OPTIMIZED_IMAGE: &[u8] = b"stand-in image";
const QUICK_IMAGE: &[u8] = b"stand-in quick image";

fn main() {
    flashprof::worker::exit_when_caller_hangs_up();
    let mut out = std::io::stdout();
    let mut input = BufReader::new(std::io::stdin());
    let device = DeviceInfo {
        ordinal: 0,
        name: "stand-in GPU".into(),
        compute_capability: (9, 0),
        sm_count: 1,
        l2_bytes: 1 << 20,
        max_sm_clock_mhz: 1000.0,
        memory_bytes: 1 << 30,
        driver_version: 13000,
        sm_attributes: None,
        memory_clock_mhz: 0.0,
        memory_bus_bits: 0,
        uuid: String::new(),
    };
    // A stand-in for a flashprof of another version (tests/remote.rs).
    let protocol = std::env::var("FLASHPROF_STAND_IN_PROTOCOL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(PROTOCOL_VERSION);
    let ready = Event::Ready {
        protocol,
        gpu: Ok(device),
        start_ms: 0.0,
        sandbox: None,
    };
    write_message(&mut out, &ready).expect("stdout");
    let mut loaded: Option<Vec<u8>> = None;
    while let Ok(request) = read_message::<Request>(&mut input) {
        let event = match request {
            Request::Shutdown => return,
            Request::Compile {
                build, source_text, ..
            } => {
                let image = match build {
                    Build::Optimized => OPTIMIZED_IMAGE,
                    Build::Quick(_) => QUICK_IMAGE,
                };
                if build == Build::Optimized && source_text.contains("slow-optimizer") {
                    if let Some(marks) = std::env::var_os("FLASHPROF_STAND_IN_MARKS") {
                        let mark = std::path::Path::new(&marks).join("optimizing");
                        std::fs::write(mark, std::process::id().to_string()).expect("mark");
                    }
                    std::thread::sleep(std::time::Duration::from_secs(30));
                }
                // The builder beside the GPU worker is started without a GPU.
                let builder = std::env::var("FLASHPROF_GPU").as_deref() == Ok("none");
                if builder && source_text.contains("builder-fails") {
                    let failed = Event::Failed {
                        message: "stand-in builder: simulated failure".into(),
                        fatal: false,
                    };
                    write_message(&mut out, &failed).expect("stdout");
                    continue;
                }
                if build == Build::Optimized && source_text.contains("optimizer-takes-300ms") {
                    std::thread::sleep(std::time::Duration::from_millis(300));
                }
                loaded = Some(image.to_vec());
                Event::Compiled(CompileOutcome {
                    build,
                    ok: true,
                    diagnostics: Vec::new(),
                    problem: None,
                    resources: None,
                    occupancy: None,
                    geometry: Some(FLASH_PREFILL.default_geometry()),
                    kernel_facts: Box::default(),
                    image: image.to_vec(),
                    compile_ms: 0.0,
                    load_ms: Some(0.0),
                })
            }
            Request::Load { image, .. } => {
                loaded = [QUICK_IMAGE, OPTIMIZED_IMAGE]
                    .contains(&image.as_slice())
                    .then_some(image);
                Event::Loaded { load_ms: 0.0 }
            }
            Request::RunCase { case, .. } => {
                let name = case.name.as_str();
                if name.starts_with("slow") {
                    std::thread::sleep(std::time::Duration::from_millis(500));
                }
                if name.contains("hang") {
                    std::thread::sleep(std::time::Duration::from_secs(3600));
                }
                if name.contains("timelimit") {
                    eprintln!("slurmstepd: error: *** STEP 4242.0 ON gpu17 CANCELLED AT 2026-11-30T12:00:00 DUE TO TIME LIMIT ***");
                    std::process::exit(143);
                }
                if name.contains("signal") {
                    eprintln!("stand-in worker: simulated fatal signal");
                    std::process::abort();
                }
                if name.contains("crash") {
                    eprintln!("stand-in worker: simulated abrupt exit");
                    std::process::exit(101);
                }
                if name.contains("garbage") {
                    let _ = writeln!(out, "this is not a protocol message");
                    let _ = out.flush();
                    continue;
                }
                let quick = loaded.as_deref() == Some(QUICK_IMAGE);
                let status = match (&loaded, name) {
                    (None, _) => CaseStatus::NotRun,
                    (Some(_), name) if name.contains("sticky") => CaseStatus::Crash,
                    (Some(_), "flaky-build") if !quick => CaseStatus::Fail,
                    (Some(_), _) => CaseStatus::Pass,
                };
                Event::Case(CaseOutcome {
                    name: case.name.clone(),
                    summary: case.summary.clone(),
                    shape: FLASH_PREFILL.problem(&case).expect("a generated case"),
                    status,
                    comparison: None,
                    integrity: None,
                    diagnosis: match &loaded {
                        None => "no kernel loaded".into(),
                        Some(_) if quick => "stand-in, quick image".into(),
                        Some(_) => "stand-in, optimized image".into(),
                    },
                    cause: None,
                    experiments: Default::default(),
                    elapsed_ms: 0.0,
                    oracle_ms: 0.0,
                })
            }
            Request::Time { .. } | Request::Counters { .. } => Event::Failed {
                message: "the stand-in worker does not time or profile".into(),
                fatal: false,
            },
        };
        let sticky = matches!(&event, Event::Case(c) if c.status == CaseStatus::Crash);
        write_message(&mut out, &event).expect("stdout");
        if sticky {
            std::process::exit(0);
        }
    }
}
