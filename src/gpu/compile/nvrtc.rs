//! The NVRTC calls flashprof needs, over cudarc's raw `sys` bindings.
//!
//! cudarc's safe `nvrtc` layer cannot pass headers to the program, has no
//! CUBIN getter and panics when reading a log fails, so this module owns one
//! NVRTC program handle directly and turns each call into a `Result`.
//!
//! Thread safety: NVRTC is safe across programs but not within one, and a
//! [`Program`] is neither `Send` nor `Sync` (it holds a raw handle), so each
//! compile stays on its own thread. The only global state is cudarc's: the
//! loaded library and its function pointers, each initialised once in a
//! `OnceLock`.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, CString};

use cudarc::nvrtc::sys::{self, nvrtcResult};

/// An NVRTC call that returned something other than success.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{call} returned {code:?}")]
pub struct CallError {
    pub call: &'static str,
    pub code: nvrtcResult,
}

fn check(call: &'static str, code: nvrtcResult) -> Result<(), CallError> {
    match code {
        nvrtcResult::NVRTC_SUCCESS => Ok(()),
        code => Err(CallError { call, code }),
    }
}

/// Whether libnvrtc can be loaded. cudarc panics on the first NVRTC call
/// when it cannot, so this must be asked first.
pub fn library_present() -> bool {
    // A by-name open that could take an untrusted file is never made
    // (cudarc opens NVRTC by name).
    if !crate::gpu::libraries::preload_nvrtc() && crate::gpu::libraries::nvrtc_by_name_blocked() {
        return false;
    }
    // SAFETY: only attempts to dlopen cudarc's candidate library names; no
    // NVRTC function is called.
    unsafe { sys::is_culib_present() }
}

/// What was tried, for the message: the library found (which failed to
/// load), or the versioned names flashprof looks for.
pub fn library_candidates() -> Vec<String> {
    match &crate::gpu::found::current().nvrtc {
        Some(found) => vec![found.library.display().to_string()],
        None => vec!["libnvrtc.so.13".into(), "libnvrtc.so.12".into()],
    }
}

/// NVRTC's own version (major, minor). Call only after [`library_present`].
pub fn version() -> Option<(i32, i32)> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: NVRTC is loaded (the caller asked `library_present`); the
    // call writes two ints through valid pointers.
    let code = unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
    (code == nvrtcResult::NVRTC_SUCCESS).then_some((major, minor))
}

/// One NVRTC program, destroyed on drop.
pub struct Program {
    handle: sys::nvrtcProgram,
    // NVRTC is handed pointers into these; they live as long as the handle.
    _strings: Vec<CString>,
}

impl Program {
    /// Creates a program from `source`, naming it `name` and giving it
    /// `headers` as `(include name, contents)` pairs.
    pub fn create(
        source: CString,
        name: CString,
        headers: Vec<(CString, CString)>,
    ) -> Result<Self, CallError> {
        let names: Vec<*const c_char> = headers.iter().map(|(n, _)| n.as_ptr()).collect();
        let texts: Vec<*const c_char> = headers.iter().map(|(_, t)| t.as_ptr()).collect();
        let count = c_int::try_from(headers.len()).map_err(|_| CallError {
            call: "nvrtcCreateProgram",
            code: nvrtcResult::NVRTC_ERROR_INVALID_INPUT,
        })?;
        let mut handle: sys::nvrtcProgram = std::ptr::null_mut();
        // SAFETY: every pointer refers to a NUL-terminated string owned by
        // `source`, `name` or `headers`, all moved into the returned Program
        // (moving a CString does not move its heap buffer); the two header
        // arrays hold `count` entries each.
        let code = unsafe {
            sys::nvrtcCreateProgram(
                &mut handle,
                source.as_ptr(),
                name.as_ptr(),
                count,
                texts.as_ptr(),
                names.as_ptr(),
            )
        };
        check("nvrtcCreateProgram", code)?;
        let mut strings = vec![source, name];
        strings.extend(headers.into_iter().flat_map(|(n, t)| [n, t]));
        Ok(Self {
            handle,
            _strings: strings,
        })
    }

    /// Compiles with `options`; the log is available whatever the outcome.
    pub fn compile(&self, options: &[CString]) -> Result<(), CallError> {
        let pointers: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        let count = c_int::try_from(pointers.len()).map_err(|_| CallError {
            call: "nvrtcCompileProgram",
            code: nvrtcResult::NVRTC_ERROR_INVALID_OPTION,
        })?;
        // SAFETY: `self.handle` is a live program; `pointers` holds `count`
        // NUL-terminated strings borrowed from `options` for the call.
        let code = unsafe { sys::nvrtcCompileProgram(self.handle, count, pointers.as_ptr()) };
        check("nvrtcCompileProgram", code)
    }

    /// The compiler's log, lossily decoded (it echoes the student's text).
    pub fn log(&self) -> Result<String, CallError> {
        let bytes = self.read_sized(
            ("nvrtcGetProgramLogSize", sys::nvrtcGetProgramLogSize),
            ("nvrtcGetProgramLog", sys::nvrtcGetProgramLog),
        )?;
        Ok(String::from_utf8_lossy(trim_nul(&bytes)).into_owned())
    }

    /// The CUBIN image; only produced when compiling for a real `sm_` arch.
    pub fn cubin(&self) -> Result<Vec<u8>, CallError> {
        self.read_sized(
            ("nvrtcGetCUBINSize", sys::nvrtcGetCUBINSize),
            ("nvrtcGetCUBIN", sys::nvrtcGetCUBIN),
        )
    }

    /// The PTX text, without its terminating NUL.
    pub fn ptx(&self) -> Result<Vec<u8>, CallError> {
        let bytes = self.read_sized(
            ("nvrtcGetPTXSize", sys::nvrtcGetPTXSize),
            ("nvrtcGetPTX", sys::nvrtcGetPTX),
        )?;
        Ok(trim_nul(&bytes).to_vec())
    }

    /// NVRTC's size-then-fill pattern, shared by the log and both images.
    fn read_sized(
        &self,
        (size_call, size_fn): (
            &'static str,
            unsafe fn(sys::nvrtcProgram, *mut usize) -> nvrtcResult,
        ),
        (fill_call, fill_fn): (
            &'static str,
            unsafe fn(sys::nvrtcProgram, *mut c_char) -> nvrtcResult,
        ),
    ) -> Result<Vec<u8>, CallError> {
        let mut size = 0usize;
        // SAFETY: `self.handle` is a live program and `size` a valid out-pointer.
        check(size_call, unsafe { size_fn(self.handle, &mut size) })?;
        let mut buffer = vec![0u8; size];
        if size > 0 {
            // SAFETY: `buffer` has exactly the `size` bytes NVRTC asked for.
            check(fill_call, unsafe {
                fill_fn(self.handle, buffer.as_mut_ptr().cast())
            })?;
        }
        Ok(buffer)
    }
}

fn trim_nul(bytes: &[u8]) -> &[u8] {
    bytes.strip_suffix(&[0]).unwrap_or(bytes)
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the handle came from nvrtcCreateProgram and is destroyed
        // once, here. A failure would only leak the program, and Drop has
        // no way to report it, so the result is deliberately ignored.
        let _ = unsafe { sys::nvrtcDestroyProgram(&mut self.handle) };
    }
}
