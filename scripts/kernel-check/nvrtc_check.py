#!/usr/bin/env python3
"""Compiles kernel files with the real NVRTC, the way flashprof will see them.

A file that defines `attention_prefill` itself is compiled as it is; any other
file is a lab-editor body and is wrapped in the entry point's signature. Both
get a small prelude (INFINITY, NAN and, for bodies, the contract constants).
No GPU is needed: NVRTC only compiles. Register and spill counts come from
ptxas, which is how a kernel that silently spills shows up before timing.

Usage: LD_LIBRARY_PATH=/work/cuda-libs/nvidia/cu13/lib nvrtc_check.py FILE...
"""

import ctypes
import re
import sys

# Guarded so that the same wrapped text also compiles under nvcc, whose
# implicit headers already define INFINITY and NAN.
PRELUDE = (
    "#ifndef INFINITY\n#define INFINITY __int_as_float(0x7f800000)\n#endif\n"
    "#ifndef NAN\n#define NAN __int_as_float(0x7fffffff)\n#endif\n"
)
BODY_CONSTANTS = (
    "#define HQ 32\n#define HKV 8\n#define DH 64\n#define GROUP 4\n"
)
SIGNATURE = (
    'extern "C" __global__ void attention_prefill(const float* q, const float* kCache, '
    "const float* vCache, float* out, int chunkLen, int prefixLen)"
)


def wrap(source: str) -> str:
    if re.search(r"\battention_prefill\s*\(", source):
        return PRELUDE + source
    return PRELUDE + BODY_CONSTANTS + SIGNATURE + "\n{\n#line 1\n" + source + "\n}\n"


def compile_file(nvrtc, path: str, cubin_path: str = "") -> bool:
    """Compiles one file and prints its verdict; writes the cubin when asked."""
    with open(path, encoding="utf-8") as handle:
        source = wrap(handle.read()).encode()
    program = ctypes.c_void_p()
    status = nvrtc.nvrtcCreateProgram(ctypes.byref(program), source, path.encode(), 0, None, None)
    if status != 0:
        print(f"{path}: nvrtcCreateProgram failed ({status})")
        return False
    options = [b"-arch=sm_90", b"--std=c++17", b"--ptxas-options=-v"]
    option_array = (ctypes.c_char_p * len(options))(*options)
    status = nvrtc.nvrtcCompileProgram(program, len(options), option_array)
    log_size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(program, ctypes.byref(log_size))
    log = ctypes.create_string_buffer(log_size.value)
    nvrtc.nvrtcGetProgramLog(program, log)
    if status == 0 and cubin_path:
        cubin_size = ctypes.c_size_t()
        nvrtc.nvrtcGetCUBINSize(program, ctypes.byref(cubin_size))
        cubin = ctypes.create_string_buffer(cubin_size.value)
        nvrtc.nvrtcGetCUBIN(program, cubin)
        with open(cubin_path, "wb") as handle:
            handle.write(cubin.raw)
    nvrtc.nvrtcDestroyProgram(ctypes.byref(program))
    text = log.value.decode(errors="replace")
    usage = " ".join(re.findall(r"Used \d+ registers.*|\d+ bytes spill stores", text))
    verdict = "ok" if status == 0 else "FAILED"
    print(f"{path}: {verdict} {usage}")
    if status != 0 or "warning" in text:
        print(text)
    return status == 0


def load_nvrtc():
    """The NVRTC library, or None (with the reason printed) when it is absent."""
    try:
        return ctypes.CDLL("libnvrtc.so.13")
    except OSError as error:
        print(f"skipped: cannot load libnvrtc.so.13 ({error})")
        return None


def main() -> int:
    nvrtc = load_nvrtc()
    if nvrtc is None:
        return 0
    results = [compile_file(nvrtc, path) for path in sys.argv[1:]]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
