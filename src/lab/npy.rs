//! Reading and writing NumPy `.npy` files of little-endian `f32`, `f64`,
//! `i32` or bytes (`u8`: FP8 caches) in C order, the only kinds the labs
//! exchange (golden cases, dumped outputs for a student to inspect in Python).
//!
//! The format is small enough to handle by hand: a magic string, a version,
//! a header that is a Python dict literal, then the raw elements. Writing it
//! here rather than pulling in a general crate keeps every failure mode in
//! one [`NpyError`] whose message says exactly what was wrong with the file.
//! The byte-level `decode_*`/`encode_*` functions exist so that files
//! embedded in the binary go through the same checks as files on disk.

use std::path::{Path, PathBuf};

/// Why a `.npy` file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("not a .npy file: it does not start with \\x93NUMPY")]
    BadMagic,
    #[error("unsupported .npy format version {major}.{minor} (known: 1.0, 2.0, 3.0)")]
    UnsupportedVersion { major: u8, minor: u8 },
    #[error("malformed .npy header: {0}")]
    MalformedHeader(String),
    #[error("element type is `{found}`, expected `{expected}`")]
    WrongDtype {
        found: String,
        expected: &'static str,
    },
    #[error("array is stored in Fortran (column-major) order; only C order is supported")]
    FortranOrder,
    #[error("truncated: the header promises {expected} bytes of elements, the file holds {found}")]
    Truncated { expected: usize, found: usize },
    #[error("{extra} unexpected bytes after the last element")]
    TrailingBytes { extra: usize },
    #[error("shape {shape:?} holds {expected} elements but {found} were given")]
    ShapeMismatch {
        shape: Vec<usize>,
        expected: usize,
        found: usize,
    },
}

/// An element type this module can store, with its NumPy type string.
trait Element: Copy {
    const DESCR: &'static str;
    const SIZE: usize;
    fn from_le(bytes: &[u8]) -> Self;
    fn append_le(self, out: &mut Vec<u8>);
}

/// The numbers NumPy stores little-endian (`<`): each the same reading and
/// writing, at its own width.
macro_rules! little_endian_elements {
    ($($ty:ty => $descr:literal),* $(,)?) => {$(
        impl Element for $ty {
            const DESCR: &'static str = $descr;
            const SIZE: usize = std::mem::size_of::<$ty>();
            fn from_le(bytes: &[u8]) -> Self {
                let mut raw = [0; std::mem::size_of::<$ty>()];
                raw.copy_from_slice(bytes);
                <$ty>::from_le_bytes(raw)
            }
            fn append_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}

little_endian_elements!(f32 => "<f4", f64 => "<f8", i32 => "<i4");

impl Element for u8 {
    /// NumPy writes single bytes with `|`: byte order does not apply.
    const DESCR: &'static str = "|u1";
    const SIZE: usize = 1;
    fn from_le(bytes: &[u8]) -> Self {
        bytes[0]
    }
    fn append_le(self, out: &mut Vec<u8>) {
        out.push(self);
    }
}

const MAGIC: &[u8] = b"\x93NUMPY";
/// NumPy pads the header so that the elements start on this boundary.
const ALIGNMENT: usize = 64;

/// Reads a `.npy` file of `f32`: its shape and its elements in C order.
pub fn read_f32(path: &Path) -> Result<(Vec<usize>, Vec<f32>), NpyError> {
    decode(&read_bytes(path)?)
}

/// Reads a `.npy` file of `f64`: its shape and its elements in C order.
pub fn read_f64(path: &Path) -> Result<(Vec<usize>, Vec<f64>), NpyError> {
    decode(&read_bytes(path)?)
}

/// Writes `data` with `shape` as a `.npy` file of `f32`.
pub fn write_f32(path: &Path, shape: &[usize], data: &[f32]) -> Result<(), NpyError> {
    write_bytes(path, &encode(shape, data)?)
}

/// Writes `data` with `shape` as a `.npy` file of `f64`.
pub fn write_f64(path: &Path, shape: &[usize], data: &[f64]) -> Result<(), NpyError> {
    write_bytes(path, &encode(shape, data)?)
}

/// Parses the bytes of a `.npy` file of `f32`.
pub fn decode_f32(bytes: &[u8]) -> Result<(Vec<usize>, Vec<f32>), NpyError> {
    decode(bytes)
}

/// Parses the bytes of a `.npy` file of `f64`.
pub fn decode_f64(bytes: &[u8]) -> Result<(Vec<usize>, Vec<f64>), NpyError> {
    decode(bytes)
}

/// The bytes of a `.npy` file (format 1.0) holding `data` with `shape`.
pub fn encode_f32(shape: &[usize], data: &[f32]) -> Result<Vec<u8>, NpyError> {
    encode(shape, data)
}

/// The bytes of a `.npy` file (format 1.0) holding `data` with `shape`.
pub fn encode_f64(shape: &[usize], data: &[f64]) -> Result<Vec<u8>, NpyError> {
    encode(shape, data)
}

/// Reads a `.npy` file of little-endian `i32` (block tables, offsets).
pub fn read_i32(path: &Path) -> Result<(Vec<usize>, Vec<i32>), NpyError> {
    decode(&read_bytes(path)?)
}

/// Parses the bytes of a `.npy` file of `i32`.
pub fn decode_i32(bytes: &[u8]) -> Result<(Vec<usize>, Vec<i32>), NpyError> {
    decode(bytes)
}

/// The bytes of a `.npy` file (format 1.0) holding `i32` `data` with `shape`.
pub fn encode_i32(shape: &[usize], data: &[i32]) -> Result<Vec<u8>, NpyError> {
    encode(shape, data)
}

/// Parses the bytes of a `.npy` file of `uint8` (FP8 bytes).
pub fn decode_u8(bytes: &[u8]) -> Result<(Vec<usize>, Vec<u8>), NpyError> {
    decode(bytes)
}

/// The bytes of a `.npy` file (format 1.0) holding `uint8` `data` with `shape`.
pub fn encode_u8(shape: &[usize], data: &[u8]) -> Result<Vec<u8>, NpyError> {
    encode(shape, data)
}

/// The largest `.npy` file flashprof reads: above a paged-decode cache of
/// 64 sequences of 8192 keys (1 GiB), far below what would exhaust memory.
pub const MAX_FILE_BYTES: u64 = 2 << 30;

/// The bytes of the `.npy` file at `path`, read as outside input: a regular
/// file (a FIFO or a device is refused without blocking), not through a
/// link, at most [`MAX_FILE_BYTES`]; `None` when there is no such file.
pub fn read_file(path: &Path) -> Result<Option<Vec<u8>>, NpyError> {
    use crate::lab::source::{read_regular_file, FollowLinks, SourceError};
    let io = |source| NpyError::Io {
        path: path.to_owned(),
        source,
    };
    let read = match read_regular_file(path, FollowLinks::No, MAX_FILE_BYTES) {
        Ok(read) => read,
        Err(SourceError::Missing { .. }) => return Ok(None),
        Err(error) => {
            // The refusal without its path, which the error names once.
            let said = error.to_string();
            let prefix = format!("{}: ", path.display());
            let reason = said.strip_prefix(&prefix).unwrap_or(&said).to_owned();
            return Err(io(std::io::Error::other(reason)));
        }
    };
    if read.size > MAX_FILE_BYTES || read.bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(io(std::io::Error::other(format!(
            "{} bytes, more than the {MAX_FILE_BYTES} a tensor file may hold",
            read.size.max(read.bytes.len() as u64)
        ))));
    }
    Ok(Some(read.bytes))
}

/// The tensor files a case's folder `dir` offers the worker: the regular
/// `.npy` files directly in it, none through a link and none larger than
/// [`MAX_FILE_BYTES`]. The worker's sandbox lets it read these files and
/// nothing else of the folder, so a case naming `/` or a home folder as its
/// tensors reaches only `.npy` files that [`read_file`] would accept.
pub fn tensor_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|entry| {
            entry.path().extension().is_some_and(|e| e == "npy")
                // The grants travel `:`-separated; no lab reads such a name,
                // and one would cost every grant of the run.
                && !entry.file_name().as_encoded_bytes().contains(&b':')
                // DirEntry::metadata does not follow a link.
                && entry
                    .metadata()
                    .is_ok_and(|m| m.file_type().is_file() && m.len() <= MAX_FILE_BYTES)
        })
        .map(|entry| entry.path())
        .collect();
    files.sort();
    files
}

fn read_bytes(path: &Path) -> Result<Vec<u8>, NpyError> {
    read_file(path)?.ok_or_else(|| NpyError::Io {
        path: path.to_owned(),
        source: std::io::Error::from(std::io::ErrorKind::NotFound),
    })
}

fn write_bytes(path: &Path, bytes: &[u8]) -> Result<(), NpyError> {
    std::fs::write(path, bytes).map_err(|source| NpyError::Io {
        path: path.to_owned(),
        source,
    })
}

fn decode<T: Element>(bytes: &[u8]) -> Result<(Vec<usize>, Vec<T>), NpyError> {
    let (header, body) = split_header(bytes)?;
    let shape = parse_header(header, T::DESCR)?;
    let count = element_count(&shape)
        .ok_or_else(|| NpyError::MalformedHeader(format!("shape {shape:?} is too large")))?;
    let expected = count
        .checked_mul(T::SIZE)
        .ok_or_else(|| NpyError::MalformedHeader(format!("shape {shape:?} is too large")))?;
    if body.len() < expected {
        return Err(NpyError::Truncated {
            expected,
            found: body.len(),
        });
    }
    if body.len() > expected {
        return Err(NpyError::TrailingBytes {
            extra: body.len() - expected,
        });
    }
    let data = body.chunks_exact(T::SIZE).map(T::from_le).collect();
    Ok((shape, data))
}

fn encode<T: Element>(shape: &[usize], data: &[T]) -> Result<Vec<u8>, NpyError> {
    let expected = element_count(shape).unwrap_or(usize::MAX);
    if expected != data.len() {
        return Err(NpyError::ShapeMismatch {
            shape: shape.to_vec(),
            expected,
            found: data.len(),
        });
    }
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
        T::DESCR,
        python_tuple(shape)
    );
    // Preamble: magic (6) + version (2) + header length (2); the header ends in '\n'.
    let unpadded = MAGIC.len() + 4 + header.len() + 1;
    header.extend(std::iter::repeat_n(
        ' ',
        unpadded.next_multiple_of(ALIGNMENT) - unpadded,
    ));
    header.push('\n');
    let header_len = u16::try_from(header.len()).map_err(|_| {
        NpyError::MalformedHeader(format!("shape {shape:?} needs too long a header"))
    })?;

    let mut out = Vec::with_capacity(MAGIC.len() + 4 + header.len() + data.len() * T::SIZE);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&header_len.to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for &value in data {
        value.append_le(&mut out);
    }
    Ok(out)
}

/// Splits the file into its header text and its element bytes.
fn split_header(bytes: &[u8]) -> Result<(&str, &[u8]), NpyError> {
    let rest = bytes.strip_prefix(MAGIC).ok_or(NpyError::BadMagic)?;
    let truncated = || NpyError::MalformedHeader("the file ends inside the header".into());
    let (&[major, minor], rest) = rest.split_first_chunk::<2>().ok_or_else(truncated)?;
    // Version 1 stores the header length in 2 bytes, versions 2 and 3 in 4.
    let (header_len, rest) = match (major, minor) {
        (1, 0) => {
            let (len, rest) = rest.split_first_chunk::<2>().ok_or_else(truncated)?;
            (usize::from(u16::from_le_bytes(*len)), rest)
        }
        (2, 0) | (3, 0) => {
            let (len, rest) = rest.split_first_chunk::<4>().ok_or_else(truncated)?;
            (u32::from_le_bytes(*len) as usize, rest)
        }
        _ => return Err(NpyError::UnsupportedVersion { major, minor }),
    };
    if rest.len() < header_len {
        return Err(truncated());
    }
    let (header, body) = rest.split_at(header_len);
    let header = std::str::from_utf8(header)
        .map_err(|_| NpyError::MalformedHeader("the header is not text".into()))?;
    Ok((header, body))
}

/// Checks the dtype and order entries of the header dict and returns the shape.
fn parse_header(header: &str, expected_descr: &'static str) -> Result<Vec<usize>, NpyError> {
    let descr = dict_value(header, "descr")?;
    let descr = descr.trim_matches(|c| c == '\'' || c == '"');
    if descr != expected_descr {
        return Err(NpyError::WrongDtype {
            found: descr.to_owned(),
            expected: expected_descr,
        });
    }
    match dict_value(header, "fortran_order")? {
        "False" => {}
        "True" => return Err(NpyError::FortranOrder),
        other => {
            return Err(NpyError::MalformedHeader(format!(
                "fortran_order is `{other}`"
            )))
        }
    }
    parse_shape(dict_value(header, "shape")?)
}

/// The raw text of `key`'s value in the header's dict literal.
///
/// The three values NumPy writes are a quoted string, a bool and a tuple, so
/// a value ends at the first comma outside parentheses, or at the closing brace.
fn dict_value<'a>(header: &'a str, key: &str) -> Result<&'a str, NpyError> {
    let missing = || NpyError::MalformedHeader(format!("no `{key}` entry"));
    let start = ["'", "\""]
        .iter()
        .find_map(|quote| {
            let quoted = format!("{quote}{key}{quote}");
            header.find(&quoted).map(|at| at + quoted.len())
        })
        .ok_or_else(missing)?;
    let value = header[start..]
        .trim_start()
        .strip_prefix(':')
        .ok_or_else(missing)?
        .trim_start();
    let mut depth = 0usize;
    for (at, c) in value.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' | '}' if depth == 0 => return Ok(value[..at].trim_end()),
            _ => {}
        }
    }
    Err(NpyError::MalformedHeader(format!(
        "the `{key}` entry is not terminated"
    )))
}

fn parse_shape(text: &str) -> Result<Vec<usize>, NpyError> {
    let inner = text
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| NpyError::MalformedHeader(format!("shape `{text}` is not a tuple")))?;
    inner
        .split(',')
        .map(str::trim)
        .filter(|dim| !dim.is_empty())
        .map(|dim| {
            dim.trim_end_matches('L').parse::<usize>().map_err(|_| {
                NpyError::MalformedHeader(format!("shape `{text}` has a bad dimension `{dim}`"))
            })
        })
        .collect()
}

/// Elements in an array of `shape` (1 for the empty shape of a scalar).
fn element_count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, &dim| n.checked_mul(dim))
}

fn python_tuple(shape: &[usize]) -> String {
    match shape {
        [only] => format!("({only},)"),
        _ => {
            let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
            format!("({})", dims.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file as NumPy 1.x `np.save` writes it for `np.arange(6, dtype='<f4').reshape(2, 3)`.
    fn numpy_written_2x3() -> Vec<u8> {
        let mut header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }".to_owned();
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        for v in 0..6 {
            bytes.extend_from_slice(&(v as f32).to_le_bytes());
        }
        bytes
    }

    #[test]
    fn reads_what_numpy_writes() {
        let (shape, data) = decode_f32(&numpy_written_2x3()).unwrap();
        assert_eq!(shape, vec![2, 3]);
        assert_eq!(data, vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    }

    #[test]
    fn encoding_matches_numpy_byte_for_byte() {
        let data: Vec<f32> = (0..6).map(|v| v as f32).collect();
        assert_eq!(encode_f32(&[2, 3], &data).unwrap(), numpy_written_2x3());
    }

    #[test]
    fn round_trips_through_a_file_keeping_every_bit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.npy");
        let data = [-0.0, f64::MIN_POSITIVE / 4.0, f64::INFINITY, 1.0 / 3.0];
        write_f64(&path, &[4], &data).unwrap();
        let (shape, back) = read_f64(&path).unwrap();
        assert_eq!(shape, vec![4]);
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back), bits(&data));

        let nan_payload = f32::from_bits(0x7FC0_DEAD);
        write_f32(&path, &[1, 1], &[nan_payload]).unwrap();
        let (shape, back) = read_f32(&path).unwrap();
        assert_eq!(shape, vec![1, 1]);
        assert_eq!(back[0].to_bits(), 0x7FC0_DEAD);
    }

    #[test]
    fn scalars_and_empty_arrays() {
        let (shape, data) = decode_f64(&encode_f64(&[], &[2.5]).unwrap()).unwrap();
        assert!(shape.is_empty());
        assert_eq!(data, vec![2.5]);
        let (shape, data) = decode_f32(&encode_f32(&[0, 7], &[]).unwrap()).unwrap();
        assert_eq!(shape, vec![0, 7]);
        assert!(data.is_empty());
    }

    #[test]
    fn header_is_aligned_for_any_rank() {
        for shape in [vec![], vec![3], vec![1, 2, 3, 4, 5, 6, 7, 8]] {
            let n = element_count(&shape).unwrap();
            let bytes = encode_f32(&shape, &vec![1.0; n]).unwrap();
            assert_eq!((bytes.len() - 4 * n) % ALIGNMENT, 0, "shape {shape:?}");
        }
    }

    #[test]
    fn int32_arrays_round_trip_and_are_told_from_floats() {
        let data = [0, -1, i32::MAX, i32::MIN, 7, 4608];
        let bytes = encode_i32(&[2, 3], &data).unwrap();
        assert_eq!(decode_i32(&bytes).unwrap(), (vec![2, 3], data.to_vec()));
        assert!(matches!(
            decode_f32(&bytes),
            Err(NpyError::WrongDtype { found, .. }) if found == "<i4"
        ));
        let floats = encode_f32(&[1], &[1.0]).unwrap();
        assert!(matches!(
            decode_i32(&floats),
            Err(NpyError::WrongDtype {
                expected: "<i4",
                ..
            })
        ));
    }

    #[test]
    fn uint8_arrays_round_trip_as_numpy_writes_them() {
        let data: Vec<u8> = (0..=255).collect();
        let bytes = encode_u8(&[16, 16], &data).unwrap();
        assert!(String::from_utf8_lossy(&bytes).contains("'descr': '|u1'"));
        assert_eq!(bytes.len() % ALIGNMENT, 0);
        assert_eq!(decode_u8(&bytes).unwrap(), (vec![16, 16], data));
        let err = decode_f32(&bytes).unwrap_err().to_string();
        assert!(err.contains("`|u1`, expected `<f4`"), "{err}");
    }

    #[test]
    fn reads_version_2_headers() {
        let v1 = encode_f32(&[2], &[1.0, 2.0]).unwrap();
        let header = &v1[10..];
        let mut v2 = b"\x93NUMPY\x02\x00".to_vec();
        let header_len = header.len() - 8; // the two elements follow the header
        v2.extend_from_slice(&(header_len as u32).to_le_bytes());
        v2.extend_from_slice(header);
        assert_eq!(decode_f32(&v2).unwrap(), (vec![2], vec![1.0, 2.0]));
    }

    /// Rewrites text inside a format-1.0 header, keeping its length.
    fn edit_header(bytes: &[u8], from: &str, to: &str) -> Vec<u8> {
        assert_eq!(from.len(), to.len());
        let end = 10 + usize::from(u16::from_le_bytes([bytes[8], bytes[9]]));
        let header = std::str::from_utf8(&bytes[10..end]).unwrap();
        assert!(header.contains(from));
        [
            &bytes[..10],
            header.replace(from, to).as_bytes(),
            &bytes[end..],
        ]
        .concat()
    }

    #[test]
    fn wrong_dtype_names_both_types() {
        let err = decode_f32(&encode_f64(&[1], &[1.0]).unwrap()).unwrap_err();
        assert_eq!(err.to_string(), "element type is `<f8`, expected `<f4`");
        let big_endian = edit_header(&encode_f32(&[1], &[1.0]).unwrap(), "<f4", ">f4");
        let err = decode_f32(&big_endian).unwrap_err();
        assert_eq!(err.to_string(), "element type is `>f4`, expected `<f4`");
    }

    #[test]
    fn fortran_order_is_refused() {
        let bytes = encode_f32(&[2, 2], &[1.0; 4]).unwrap();
        let fortran = edit_header(&bytes, "False", "True ");
        assert!(matches!(decode_f32(&fortran), Err(NpyError::FortranOrder)));
    }

    #[test]
    fn truncation_and_trailing_bytes_are_reported_with_sizes() {
        let bytes = encode_f32(&[3], &[1.0, 2.0, 3.0]).unwrap();
        let err = decode_f32(&bytes[..bytes.len() - 1]).unwrap_err();
        assert!(matches!(
            err,
            NpyError::Truncated {
                expected: 12,
                found: 11
            }
        ));
        let err = decode_f32(&bytes[..20]).unwrap_err();
        assert!(matches!(err, NpyError::MalformedHeader(_)), "{err}");
        let longer = [&bytes[..], &[0u8; 3]].concat();
        assert!(matches!(
            decode_f32(&longer),
            Err(NpyError::TrailingBytes { extra: 3 })
        ));
    }

    #[test]
    fn bad_magic_and_versions() {
        assert!(matches!(decode_f32(b"PK\x03\x04"), Err(NpyError::BadMagic)));
        assert!(matches!(decode_f32(b""), Err(NpyError::BadMagic)));
        let mut bytes = encode_f32(&[1], &[1.0]).unwrap();
        bytes[6] = 9;
        assert!(matches!(
            decode_f32(&bytes),
            Err(NpyError::UnsupportedVersion { major: 9, minor: 0 })
        ));
    }

    #[test]
    fn encode_refuses_a_shape_that_does_not_fit_the_data() {
        assert!(matches!(
            encode_f32(&[2, 2], &[1.0; 3]),
            Err(NpyError::ShapeMismatch {
                expected: 4,
                found: 3,
                ..
            })
        ));
    }

    #[test]
    fn missing_file_names_the_path() {
        let err = read_f32(Path::new("/nonexistent/q.npy")).unwrap_err();
        assert!(err.to_string().starts_with("/nonexistent/q.npy: "), "{err}");
    }
}

#[cfg(test)]
mod outside_files {
    use super::*;

    /// A case's tensor file is outside input: a FIFO is refused at once
    /// (it once hung `check --cases` for good), a link is not followed (it
    /// reached any file, `/dev/zero` among them), and a missing file is
    /// `None` for the lab to judge.
    #[test]
    fn a_fifo_or_a_link_is_refused_and_a_missing_file_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("q.npy");
        crate::sys::make_fifo(&fifo);
        let err = read_file(&fifo).unwrap_err().to_string();
        assert!(err.contains("q.npy: is a FIFO"), "{err}");
        let real = dir.path().join("real.npy");
        write_f32(&real, &[2], &[1.0, 2.0]).unwrap();
        let link = dir.path().join("k.npy");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let err = read_file(&link).unwrap_err().to_string();
        assert!(err.contains("k.npy: is a symlink"), "{err}");
        assert_eq!(read_f32(&real).unwrap(), (vec![2], vec![1.0, 2.0]));
        assert!(read_file(&dir.path().join("none.npy")).unwrap().is_none());
    }
}
