//! Prints where each SASS instruction of a kernel comes from, as flashprof's
//! line table reads it: one row per instruction (offset, innermost file and
//! line, the student's line it is charged to, the frames on the way).
//!
//! Used by scripts/gpu-line-spike.sh to set flashprof's reading of a cubin
//! beside Nsight Compute's on the GPU machine, where the NVRTC that builds
//! the kernel is the one the worker uses.
//!
//!     line_table LAB FILE.cu          the lab's entry point of FILE, built by NVRTC for sm_90
//!     line_table --cubin FILE FUNC    FUNC of a cubin built elsewhere (charged to no student file)

use std::path::Path;
use std::process::ExitCode;

use flashprof::gpu::compile::line_table::{
    attribute, Attribution, LineTable, SASS_INSTRUCTION_BYTES,
};
use flashprof::gpu::compile::{compile, CompileOptions};
use flashprof::lab::definition::LabRef;
use flashprof::lab::registry::find;
use flashprof::lab::source::StudentSource;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.as_slice() {
        [flag, cubin, function] if flag == "--cubin" => std::fs::read(cubin)
            .map_err(|e| format!("{cubin}: {e}"))
            .and_then(|image| print_rows(&image, function, None)),
        [lab, file] => from_source(lab, file),
        _ => Err("usage: line_table LAB FILE.cu | line_table --cubin FILE FUNCTION".into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("line_table: {e}");
            ExitCode::FAILURE
        }
    }
}

fn from_source(lab: &str, file: &str) -> Result<(), String> {
    let lab = find(lab).ok_or_else(|| format!("no lab named {lab}"))?;
    let src = StudentSource::from_path(Path::new(file), LabRef(lab)).map_err(|e| e.to_string())?;
    let kernel = compile(&src, &CompileOptions::default()).map_err(|e| e.to_string())?;
    let lines = src.text().lines().count() as u32;
    print_rows(
        &kernel.image,
        lab.abi().entry_point,
        Some((&src.marker_name(), lines)),
    )
}

/// One tab-separated row per instruction of `function`.
fn print_rows(image: &[u8], function: &str, student: Option<(&str, u32)>) -> Result<(), String> {
    let table = LineTable::from_cubin(image).map_err(|e| e.to_string())?;
    let bytes = table
        .functions()
        .find(|(name, _)| *name == function)
        .map(|(_, bytes)| bytes)
        .ok_or_else(|| format!("no line table for {function}"))?;
    println!("offset\tfile\tline\tcharged_line\tthrough");
    for offset in (0..bytes).step_by(SASS_INSTRUCTION_BYTES as usize) {
        let Some(frames) = table.frames(function, offset) else {
            println!("{offset:#x}\t-\t-\t-\t-");
            continue;
        };
        let charged = match student.map(|(name, lines)| attribute(&frames, name, lines)) {
            Some(Attribution::Student { line, .. }) => line.to_string(),
            Some(Attribution::Own) => "own".into(),
            None => "-".into(),
        };
        let through: Vec<String> = frames
            .iter()
            .skip(1)
            .map(|f| format!("{}:{}", f.file.rsplit('/').next().unwrap_or(""), f.line))
            .collect();
        println!(
            "{offset:#x}\t{}\t{}\t{charged}\t{}",
            frames[0].file,
            frames[0].line,
            through.join(" < ")
        );
    }
    Ok(())
}
