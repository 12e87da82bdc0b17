//! Worker framing (`protocol::read_message`), both directions: a stream of
//! requests (what the worker reads) and a stream of events with binary
//! frames (what the caller reads).
//!
//! Properties: no panic, no allocation past the input for a frame header
//! that promises more; every message accepted, written again with
//! `write_message`, reads back equal, and writing that gives the same bytes
//! (a fixed point of the framing, frames included).
#![no_main]

use std::fmt::Debug;
use std::io::Cursor;

use flashprof::protocol::{read_message, write_message, Event, Request};
use libfuzzer_sys::fuzz_target;
use serde::de::DeserializeOwned;
use serde::Serialize;

fn stream<T: DeserializeOwned + Serialize + PartialEq + Debug>(data: &[u8]) {
    let mut input = Cursor::new(data);
    // At most as many messages as lines, so a stream always ends.
    for _ in 0..64 {
        let Ok(message) = read_message::<T>(&mut input) else {
            break;
        };
        let mut bytes = Vec::new();
        write_message(&mut bytes, &message).expect("an accepted message writes");
        let back: T = read_message(&mut Cursor::new(&bytes)).expect("a written message reads");
        assert_eq!(back, message);
        let mut again = Vec::new();
        write_message(&mut again, &back).unwrap();
        assert_eq!(again, bytes);
    }
}

fuzz_target!(|data: &[u8]| {
    stream::<Request>(data);
    stream::<Event>(data);
});
