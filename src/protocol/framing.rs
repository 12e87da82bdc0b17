//! Line framing: one JSON document per line, and raw binary frames for
//! compiled images.
//!
//! JSON lines keep the stream debuggable by eye and make a torn message
//! (a worker killed mid-write) detectable as a parse error on a single line.
//! Byte payloads (a kernel image can be tens of MB: a large `__device__`
//! table) do not travel as JSON numbers: a message holding any is preceded
//! by a header line `#frames N1 N2 ...` and the frames' raw bytes, and the
//! JSON refers to each by its index ([`image_bytes`]). Every frame is
//! bounded by [`MAX_FRAME_BYTES`], checked before anything is allocated.

use std::cell::RefCell;
use std::io::{BufRead, Read, Write};

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Longest line accepted; images travel as frames, so lines stay small.
const MAX_LINE_BYTES: usize = 64 << 20;

/// Largest binary frame (a compiled kernel image) either side sends or accepts.
pub const MAX_FRAME_BYTES: u64 = 256 << 20;

/// Most frames one message may carry.
const MAX_FRAMES: usize = 4;

/// The header line that announces frames.
const FRAMES_HEADER: &[u8] = b"#frames ";

#[derive(Debug, thiserror::Error)]
pub enum FramingError {
    #[error("the other side closed the pipe")]
    Closed,
    #[error("pipe error: {0}")]
    Io(#[from] std::io::Error),
    #[error("malformed message ({error}): {excerpt}")]
    Malformed { error: String, excerpt: String },
    #[error("message longer than {MAX_LINE_BYTES} bytes")]
    TooLong,
    #[error(
        "a binary frame of {size} bytes (a compiled kernel image) is more than the \
         {MAX_FRAME_BYTES}-byte limit"
    )]
    FrameTooLarge { size: u64 },
}

thread_local! {
    /// Frames collected while a message is serialized on this thread.
    static OUTGOING: RefCell<Option<Vec<Vec<u8>>>> = const { RefCell::new(None) };
    /// Frames received ahead of the message being deserialized on this thread.
    static INCOMING: RefCell<Option<Vec<Option<Vec<u8>>>>> = const { RefCell::new(None) };
}

/// Clears a thread-local slot however the (de)serialization ends.
struct Reset(fn());

impl Drop for Reset {
    fn drop(&mut self) {
        (self.0)();
    }
}

pub fn write_message<T: Serialize>(out: &mut impl Write, message: &T) -> Result<(), FramingError> {
    OUTGOING.with(|o| *o.borrow_mut() = Some(Vec::new()));
    let _reset = Reset(|| OUTGOING.with(|o| *o.borrow_mut() = None));
    let line = serde_json::to_vec(message);
    let frames = OUTGOING.with(|o| o.borrow_mut().take()).unwrap_or_default();
    let mut line = line.map_err(|e| FramingError::Malformed {
        error: e.to_string(),
        excerpt: String::new(),
    })?;
    line.push(b'\n');
    if let Some(big) = frames.iter().find(|f| f.len() as u64 > MAX_FRAME_BYTES) {
        return Err(FramingError::FrameTooLarge {
            size: big.len() as u64,
        });
    }
    if !frames.is_empty() {
        let lengths: Vec<String> = frames.iter().map(|f| f.len().to_string()).collect();
        let mut header = FRAMES_HEADER.to_vec();
        header.extend_from_slice(lengths.join(" ").as_bytes());
        header.push(b'\n');
        out.write_all(&header)?;
        for frame in &frames {
            out.write_all(frame)?;
        }
    }
    out.write_all(&line)?;
    out.flush()?;
    Ok(())
}

fn read_line(input: &mut impl BufRead) -> Result<Vec<u8>, FramingError> {
    let mut line = Vec::new();
    let read = Read::take(&mut *input, MAX_LINE_BYTES as u64 + 1).read_until(b'\n', &mut line)?;
    if read == 0 {
        return Err(FramingError::Closed);
    }
    if line.len() > MAX_LINE_BYTES {
        return Err(FramingError::TooLong);
    }
    if line.last() != Some(&b'\n') {
        return Err(FramingError::Closed);
    }
    Ok(line)
}

fn malformed(error: impl ToString, line: &[u8]) -> FramingError {
    FramingError::Malformed {
        error: error.to_string(),
        excerpt: String::from_utf8_lossy(&line[..line.len().min(120)]).into_owned(),
    }
}

/// The frames a `#frames` header announces, read in full.
fn read_frames(header: &[u8], input: &mut impl BufRead) -> Result<Vec<Vec<u8>>, FramingError> {
    let text = std::str::from_utf8(&header[FRAMES_HEADER.len()..])
        .map_err(|e| malformed(e, header))?
        .trim_end();
    let lengths: Vec<u64> = text
        .split(' ')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(|e| malformed(e, header))?;
    if lengths.is_empty() || lengths.len() > MAX_FRAMES {
        return Err(malformed(
            format!("1 to {MAX_FRAMES} frames expected"),
            header,
        ));
    }
    if let Some(&size) = lengths.iter().find(|&&n| n > MAX_FRAME_BYTES) {
        return Err(FramingError::FrameTooLarge { size });
    }
    let mut frames = Vec::with_capacity(lengths.len());
    for length in lengths {
        let mut frame = Vec::new();
        let got = Read::take(&mut *input, length).read_to_end(&mut frame)?;
        if got as u64 != length {
            return Err(FramingError::Closed);
        }
        frames.push(frame);
    }
    Ok(frames)
}

pub fn read_message<T: DeserializeOwned>(input: &mut impl BufRead) -> Result<T, FramingError> {
    let mut line = read_line(input)?;
    let mut frames = None;
    if line.starts_with(FRAMES_HEADER) {
        frames = Some(read_frames(&line, input)?);
        line = read_line(input)?;
    }
    INCOMING.with(|i| *i.borrow_mut() = frames.map(|f| f.into_iter().map(Some).collect()));
    let _reset = Reset(|| INCOMING.with(|i| *i.borrow_mut() = None));
    serde_json::from_slice(&line).map_err(|e| malformed(e, &line))
}

/// `#[serde(with = "image_bytes")]` for a `Vec<u8>` field: inside
/// [`write_message`] the bytes go out as a raw frame and the JSON holds the
/// frame's index; anywhere else (a report printed as JSON) they are a base64
/// string. Reading accepts a frame index, base64, or a JSON array of bytes
/// (protocol 1).
pub mod image_bytes {
    use serde::de::{Error, SeqAccess, Visitor};
    use serde::{Deserializer, Serializer};

    use super::{INCOMING, OUTGOING};

    pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        let index = OUTGOING.with(|o| {
            o.borrow_mut().as_mut().map(|frames| {
                frames.push(bytes.to_vec());
                frames.len() - 1
            })
        });
        match index {
            Some(index) => serializer.serialize_u64(index as u64),
            None => serializer.serialize_str(&crate::base64::encode(bytes)),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        deserializer.deserialize_any(BytesVisitor)
    }

    struct BytesVisitor;

    impl<'de> Visitor<'de> for BytesVisitor {
        type Value = Vec<u8>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a binary frame index, a base64 string or an array of bytes")
        }

        fn visit_u64<E: Error>(self, index: u64) -> Result<Vec<u8>, E> {
            INCOMING
                .with(|i| {
                    i.borrow_mut()
                        .as_mut()
                        .and_then(|frames| frames.get_mut(usize::try_from(index).ok()?))
                        .and_then(Option::take)
                })
                .ok_or_else(|| E::custom(format!("binary frame {index} did not arrive")))
        }

        fn visit_str<E: Error>(self, text: &str) -> Result<Vec<u8>, E> {
            crate::base64::decode(text).ok_or_else(|| E::custom("invalid base64 image"))
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
            let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
            while let Some(b) = seq.next_element::<u8>()? {
                bytes.push(b);
            }
            Ok(bytes)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::registry::default_lab;
    use crate::protocol::{LabId, Request, TimingConfig, WireCase};

    /// Found by the framing fuzz target: a float in a case's recipe came back
    /// one unit in the last place off (6.666666666666667e41 read as
    /// ...665e41), so a case could differ between caller and worker.
    #[test]
    fn a_cases_floats_cross_the_pipe_bit_for_bit() {
        let timing = default_lab().timing_case(&[]).expect("timing case");
        let mut case = WireCase::from(&timing);
        case.recipe["value"] = serde_json::json!(6.666_666_666_666_667e41);
        let sent = Request::RunCase { case, seed: 1 };
        let mut wire = Vec::new();
        write_message(&mut wire, &sent).unwrap();
        let got: Request = read_message(&mut std::io::Cursor::new(wire)).unwrap();
        assert_eq!(got, sent);
    }

    #[test]
    fn messages_round_trip_one_per_line() {
        let sent = vec![
            Request::Time {
                case: (&default_lab()
                    .timing_case(&[])
                    .expect("the default timing shape"))
                    .into(),
                seed: 42,
                config: TimingConfig::default(),
            },
            Request::Shutdown,
        ];
        let mut wire = Vec::new();
        for m in &sent {
            write_message(&mut wire, m).unwrap();
        }
        assert_eq!(wire.iter().filter(|&&b| b == b'\n').count(), 2);
        let mut reader = std::io::Cursor::new(wire);
        let got: Vec<Request> = (0..2).map(|_| read_message(&mut reader).unwrap()).collect();
        assert_eq!(got, sent);
        assert!(matches!(
            read_message::<Request>(&mut reader),
            Err(FramingError::Closed)
        ));
    }

    #[test]
    fn an_image_too_large_for_a_json_line_travels_as_a_binary_frame() {
        // 80 MB, a table of 20M floats: as JSON numbers this passed the line limit.
        let image: Vec<u8> = (0..80_000_000u32).map(|i| (i % 251) as u8).collect();
        let sent = Request::Load {
            lab: LabId::of(crate::lab::flash_prefill::FLASH_PREFILL),
            image,
            geometry: crate::lab::flash_prefill::FLASH_PREFILL.default_geometry(),
        };
        let mut wire = Vec::new();
        write_message(&mut wire, &sent).unwrap();
        assert!(
            wire.len() < 80_001_000,
            "no JSON number array: {} bytes",
            wire.len()
        );
        write_message(&mut wire, &Request::Shutdown).unwrap();
        let mut reader = std::io::Cursor::new(wire);
        assert_eq!(read_message::<Request>(&mut reader).unwrap(), sent);
        assert_eq!(
            read_message::<Request>(&mut reader).unwrap(),
            Request::Shutdown
        );
    }

    #[test]
    fn a_frame_past_the_limit_is_refused_with_its_size_before_allocating() {
        let header = format!("#frames {}\n", MAX_FRAME_BYTES + 1);
        let mut reader = std::io::Cursor::new(header.into_bytes());
        let error = read_message::<Request>(&mut reader).unwrap_err();
        assert!(matches!(error, FramingError::FrameTooLarge { .. }));
        assert!(error.to_string().contains("limit"), "{error}");
        let mut missing =
            std::io::Cursor::new(b"{\"request\":\"load\",\"image\":0,\"geometry\":{}}\n".to_vec());
        assert!(read_message::<Request>(&mut missing).is_err());
    }

    #[test]
    fn images_outside_the_protocol_are_base64_and_old_arrays_still_read() {
        for bytes in [&b""[..], b"f", b"fo", b"foo", b"foob", b"\xff\x00\x10"] {
            let text = crate::base64::encode(bytes);
            assert_eq!(
                crate::base64::decode(&text).as_deref(),
                Some(bytes),
                "{text}"
            );
        }
        assert_eq!(crate::base64::encode(b"foobar"), "Zm9vYmFy");
        let sent = Request::Load {
            lab: LabId::of(crate::lab::flash_prefill::FLASH_PREFILL),
            image: vec![1, 2, 3],
            geometry: crate::lab::flash_prefill::FLASH_PREFILL.default_geometry(),
        };
        let text = serde_json::to_string(&sent).unwrap();
        assert!(text.contains("\"AQID\""), "{text}");
        assert_eq!(serde_json::from_str::<Request>(&text).unwrap(), sent);
        let old = text.replace("\"AQID\"", "[1,2,3]");
        assert_eq!(serde_json::from_str::<Request>(&old).unwrap(), sent);
    }

    #[test]
    fn torn_and_garbled_lines_are_errors() {
        let mut torn = std::io::Cursor::new(b"{\"request\":\"shut".to_vec());
        assert!(matches!(
            read_message::<Request>(&mut torn),
            Err(FramingError::Closed)
        ));
        let mut garbled = std::io::Cursor::new(b"hello from printf\n".to_vec());
        let err = read_message::<Request>(&mut garbled).unwrap_err();
        assert!(err.to_string().contains("hello from printf"));
    }
}
