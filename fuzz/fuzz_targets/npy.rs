//! `.npy` reading (`lab::npy::decode_f32`, `decode_f64`, `decode_i32`, which
//! `read_*` wrap) and writing.
//!
//! Properties: no panic and no allocation beyond the input (a header that
//! promises more than the file holds is refused); what decodes holds exactly
//! the elements its shape counts, and encoding it decodes to the same shape
//! and the same bits. Then encode-of-decode the other way: the input's tail
//! as elements of a shape chosen by its first bytes must round-trip.
#![no_main]

use flashprof::lab::npy;
use libfuzzer_sys::fuzz_target;

fn count(shape: &[usize]) -> usize {
    shape.iter().product()
}

fuzz_target!(|data: &[u8]| {
    if let Ok((shape, values)) = npy::decode_f32(data) {
        assert_eq!(count(&shape), values.len());
        let bytes = npy::encode_f32(&shape, &values).expect("decoded arrays encode");
        let (s, v) = npy::decode_f32(&bytes).expect("encoded arrays decode");
        assert_eq!(s, shape);
        assert!(v
            .iter()
            .zip(&values)
            .all(|(a, b)| a.to_bits() == b.to_bits()));
    }
    if let Ok((shape, values)) = npy::decode_f64(data) {
        assert_eq!(count(&shape), values.len());
        let bytes = npy::encode_f64(&shape, &values).expect("decoded arrays encode");
        let (s, v) = npy::decode_f64(&bytes).expect("encoded arrays decode");
        assert_eq!(s, shape);
        assert!(v
            .iter()
            .zip(&values)
            .all(|(a, b)| a.to_bits() == b.to_bits()));
    }
    if let Ok((shape, values)) = npy::decode_i32(data) {
        assert_eq!(count(&shape), values.len());
        let bytes = npy::encode_i32(&shape, &values).expect("decoded arrays encode");
        assert_eq!(
            npy::decode_i32(&bytes).expect("encoded arrays decode"),
            (shape, values)
        );
    }

    // Encode first: a shape of up to 3 dimensions from the first bytes, then
    // the rest of the input as elements (a shape that does not fit is refused).
    let Some((&rank, rest)) = data.split_first() else {
        return;
    };
    let rank = usize::from(rank % 4);
    if rest.len() < rank {
        return;
    }
    let (dims, payload) = rest.split_at(rank);
    let shape: Vec<usize> = dims.iter().map(|&d| usize::from(d % 16)).collect();
    let f32s: Vec<f32> = payload
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    match npy::encode_f32(&shape, &f32s) {
        Ok(bytes) => {
            assert_eq!(count(&shape), f32s.len());
            assert_eq!(bytes.len() % 4, 0);
            let (s, v) = npy::decode_f32(&bytes).expect("encoded arrays decode");
            assert_eq!(s, shape);
            assert!(v.iter().zip(&f32s).all(|(a, b)| a.to_bits() == b.to_bits()));
        }
        Err(_) => assert_ne!(count(&shape), f32s.len()),
    }
    let i32s: Vec<i32> = payload
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    if let Ok(bytes) = npy::encode_i32(&shape, &i32s) {
        assert_eq!(
            npy::decode_i32(&bytes).expect("encoded arrays decode"),
            (shape.clone(), i32s)
        );
    }
    let f64s: Vec<f64> = payload
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    if let Ok(bytes) = npy::encode_f64(&shape, &f64s) {
        let (s, v) = npy::decode_f64(&bytes).expect("encoded arrays decode");
        assert_eq!(s, shape);
        assert!(v.iter().zip(&f64s).all(|(a, b)| a.to_bits() == b.to_bits()));
    }
});
