//! Line framing: one JSON document per line.
//!
//! JSON lines keep the stream debuggable by eye and make a torn message
//! (a worker killed mid-write) detectable as a parse error on a single line.

use std::io::{BufRead, Write};

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Longest line accepted; a compiled image is the largest message (a few MB as JSON).
const MAX_LINE_BYTES: usize = 64 << 20;

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
}

pub fn write_message<T: Serialize>(out: &mut impl Write, message: &T) -> Result<(), FramingError> {
    let mut line = serde_json::to_vec(message).map_err(|e| FramingError::Malformed {
        error: e.to_string(),
        excerpt: String::new(),
    })?;
    line.push(b'\n');
    out.write_all(&line)?;
    out.flush()?;
    Ok(())
}

pub fn read_message<T: DeserializeOwned>(input: &mut impl BufRead) -> Result<T, FramingError> {
    let mut line = Vec::new();
    let read =
        std::io::Read::take(&mut *input, MAX_LINE_BYTES as u64 + 1).read_until(b'\n', &mut line)?;
    if read == 0 {
        return Err(FramingError::Closed);
    }
    if line.len() > MAX_LINE_BYTES {
        return Err(FramingError::TooLong);
    }
    if line.last() != Some(&b'\n') {
        return Err(FramingError::Closed);
    }
    serde_json::from_slice(&line).map_err(|e| FramingError::Malformed {
        error: e.to_string(),
        excerpt: String::from_utf8_lossy(&line[..line.len().min(120)]).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::registry::default_lab;
    use crate::protocol::{Request, TimingConfig};

    #[test]
    fn messages_round_trip_one_per_line() {
        let sent = vec![
            Request::Time {
                case: default_lab()
                    .timing_case(&[])
                    .expect("the default timing shape"),
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
