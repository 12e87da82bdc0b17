//! The text NVRTC compiles in front of, and around, the student's own.
//!
//! nvcc includes the CUDA runtime and the C math library into every `.cu`
//! file implicitly and finds system headers on disk; NVRTC does neither. A
//! file written for nvcc should still compile unchanged, so this module
//! supplies the few things such files lean on: the `INFINITY`/`NAN` macros,
//! the lab's shape constants (from the lab itself), and stand-ins for the headers kernels commonly
//! include. Which headers need a stand-in was settled against NVRTC 13.0
//! itself: it ships none of them (not even `cuda_fp16.h`), while the device
//! functions they declare (`expf`, `printf`, `__shfl_xor_sync`, ...) are
//! built in.

use crate::lab::definition::LabRef;

/// A header NVRTC receives with the program, so `#include <name>` resolves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StandInHeader {
    /// The name as written between `<>` or `""`.
    pub name: &'static str,
    pub text: &'static str,
}

/// The device functions these headers declare under nvcc are NVRTC
/// built-ins, so the stand-in only needs to exist.
const BUILT_IN: &str = "// flashprof: NVRTC provides this header's device functions itself.\n";

/// `__half` and friends where the real header was not found (NVRTC does not
/// ship it; [`CUDA_TYPE_HEADERS`]): the fp32 labs' files include it
/// harmlessly, and using `__half` is reported by the compiler at the
/// student's line.
const NO_HALF: &str =
    "// flashprof: stand-in; the fp16 types are not available under NVRTC here.\n";

const FIXED_WIDTH_INTS: &str = "#pragma once\n\
typedef signed char int8_t; typedef unsigned char uint8_t;\n\
typedef short int16_t; typedef unsigned short uint16_t;\n\
typedef int int32_t; typedef unsigned int uint32_t;\n\
typedef long long int64_t; typedef unsigned long long uint64_t;\n";

const FLOAT_LIMITS: &str = "#pragma once\n\
#define FLT_MAX 3.402823466e+38F\n\
#define FLT_MIN 1.175494351e-38F\n\
#define FLT_EPSILON 1.192092896e-07F\n";

/// Headers only host code needs. They are empty: flashprof compiles the
/// device side of a file and drops the host code that uses them
/// (`super::host`); device code that uses what they declare fails to
/// compile at the student's line, as it would under nvcc.
const HOST_ONLY: &str =
    "// flashprof: host-only header, empty here; flashprof drops the host code that uses it.\n";

/// `size_t` is built into NVRTC, but not its `std::` spelling.
const STDDEF: &str = "#pragma once\nnamespace std { using ::size_t; }\n";

/// The CUDA headers of the 16- and 8-bit float types. NVRTC ships none of
/// them; where flashprof finds them (`gpu::headers`) the compiler reads the
/// real ones from their folder, and they are the only headers of that folder
/// a submission may name. `cuda_fp16.h` also has a stand-in for machines
/// without them; the other two do not, and a file that includes one is
/// refused there with the fix.
pub const CUDA_TYPE_HEADERS: [&str; 3] = ["cuda_fp16.h", "cuda_bf16.h", "cuda_fp8.h"];

/// Headers a kernel file may include, and what stands in for each.
pub const STAND_IN_HEADERS: &[StandInHeader] = &[
    StandInHeader {
        name: "cuda_runtime.h",
        text: BUILT_IN,
    },
    StandInHeader {
        name: "math.h",
        text: BUILT_IN,
    },
    StandInHeader {
        name: "cmath",
        text: BUILT_IN,
    },
    StandInHeader {
        name: "stdio.h",
        text: BUILT_IN,
    },
    StandInHeader {
        name: "cstdio",
        text: BUILT_IN,
    },
    StandInHeader {
        name: "cuda_fp16.h",
        text: NO_HALF,
    },
    StandInHeader {
        name: "stdint.h",
        text: FIXED_WIDTH_INTS,
    },
    StandInHeader {
        name: "cstdint",
        text: FIXED_WIDTH_INTS,
    },
    StandInHeader {
        name: "float.h",
        text: FLOAT_LIMITS,
    },
    StandInHeader {
        name: "cfloat",
        text: FLOAT_LIMITS,
    },
    StandInHeader {
        name: "cstddef",
        text: STDDEF,
    },
    StandInHeader {
        name: "stddef.h",
        text: STDDEF,
    },
    // `assert`, `memcpy` and `memset` are NVRTC built-ins on the device.
    StandInHeader {
        name: "cassert",
        text: BUILT_IN,
    },
    StandInHeader {
        name: "assert.h",
        text: BUILT_IN,
    },
    StandInHeader {
        name: "cstring",
        text: BUILT_IN,
    },
    StandInHeader {
        name: "string.h",
        text: BUILT_IN,
    },
    StandInHeader {
        name: "cstdlib",
        text: HOST_ONLY,
    },
    StandInHeader {
        name: "stdlib.h",
        text: HOST_ONLY,
    },
    StandInHeader {
        name: "vector",
        text: HOST_ONLY,
    },
    StandInHeader {
        name: "algorithm",
        text: HOST_ONLY,
    },
    StandInHeader {
        name: "iostream",
        text: HOST_ONLY,
    },
    StandInHeader {
        name: "chrono",
        text: HOST_ONLY,
    },
    StandInHeader {
        name: "random",
        text: HOST_ONLY,
    },
    StandInHeader {
        name: "cuda.h",
        text: HOST_ONLY,
    },
];

/// The file name diagnostics carry for lines of the prelude itself, so they
/// can never be mistaken for lines of the student's file.
pub const PRELUDE_FILE: &str = "<flashprof prelude>";

/// Names the prelude defines, each with its definition. A bit cast rather
/// than `1.0f/0.0f` keeps the macros constant expressions without a
/// division-by-zero warning.
pub(super) fn definitions(lab: LabRef) -> Vec<(&'static str, String)> {
    let mut names = vec![
        (
            "INFINITY",
            "#define INFINITY __builtin_bit_cast(float, 0x7f800000u)".into(),
        ),
        (
            "NAN",
            "#define NAN __builtin_bit_cast(float, 0x7fc00000u)".into(),
        ),
    ];
    names.extend(lab.body_constants());
    names
}

/// The prelude for a file, leaving out any name the file defines itself so
/// that its own `#define HQ 32` or `constexpr int DH = 64;` does not clash.
pub fn prelude_for(lab: LabRef, declares: impl Fn(&str) -> bool) -> String {
    let mut text = format!("#line 1 \"{PRELUDE_FILE}\"\n");
    for (name, definition) in definitions(lab) {
        if !declares(name) {
            text.push_str(&definition);
            text.push('\n');
        }
    }
    text
}

/// A `#line` directive that makes what follows line `line` of `path`.
pub fn line_marker(line: usize, path: &str) -> String {
    // A raw line break would end the directive mid-name (file names may hold one).
    let escaped = path
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
        .replace('\r', "\\r");
    format!("#line {line} \"{escaped}\"\n")
}
