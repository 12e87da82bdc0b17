//! A kernel's arguments as the grader lays them out: each argument's kind,
//! its value for one launch, and the bit patterns that surround and fill its
//! buffer (guard bands, the output's poison, a scratch buffer's reset).
//!
//! Everything here is pure data, so the bytes a launch will see can be
//! checked on a machine without a GPU; `gpu::device` only uploads them.

use serde::{Deserialize, Serialize};

use super::sparse::{SparseBlocks, SparseImage};
use crate::grade::compare::POISON_BITS;

/// Elements of guard band on each side of every buffer: 16 Ki elements
/// (64 KiB of floats), wider than any plausible stray index, so an
/// off-by-a-tile access lands in a guard.
pub const GUARD_ELEMS: usize = 16 * 1024;
/// What a float input's guard bands hold: a quiet NaN with its own payload,
/// so a read past an input's end turns the result into NaN (int32 inputs
/// hold the same bits: a far-out index).
pub const INPUT_GUARD_BITS: u32 = 0x7FC0_0BAD;
/// What the float output's guard bands hold; any other value there was written by the kernel.
pub const OUTPUT_GUARD_BITS: u32 = 0x7F80_BEEF;
/// A bf16 input's guard: a quiet bf16 NaN with a payload of its own.
pub const BF16_INPUT_GUARD_BITS: u16 = 0x7FCB;
/// A uint8 input's guard: `0x7F`, a NaN in both FP8 formats (E4M3 and E5M2),
/// so an FP8 read past the end turns the result into NaN.
pub const U8_INPUT_GUARD: u8 = 0x7F;
/// What a bf16 output holds before a launch: a quiet NaN no arithmetic
/// produces (the canonical bf16 NaN is `0x7FC0`).
pub const BF16_POISON_BITS: u16 = 0x7FDE;
/// What a bf16 output's guard bands hold (a signalling NaN, like the float output's).
pub const BF16_OUTPUT_GUARD_BITS: u16 = 0x7FBE;
/// What a float scratch buffer holds before every launch: a NaN, so a kernel
/// that reads scratch it did not write this launch computes NaN.
pub const SCRATCH_F32_BITS: u32 = 0x7FC0_5C4A;

/// How an argument of the entry point is passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ArgKind {
    /// `const float*`: an input tensor, guarded and checked unchanged after the launch.
    F32Input,
    /// `const int*`: an input tensor of int32 indices or lengths.
    I32Input,
    /// `const float*` that may be null (an optional input such as ALiBi slopes).
    OptionalF32Input,
    /// `const __nv_bfloat16*`: an input tensor of bf16 values (bits).
    Bf16Input,
    /// `const uint8_t*`: an input tensor of bytes (FP8 values, say).
    U8Input,
    /// `int`, by value.
    I32Scalar,
    /// `float`, by value.
    F32Scalar,
    /// `float*`: the output, poisoned before each launch.
    F32Output,
    /// `__nv_bfloat16*`: the output in bf16, poisoned with its own NaN.
    Bf16Output,
    /// `float*` the grader owns: NaN before every launch, guarded, never graded.
    ScratchF32,
    /// `unsigned*` the grader owns: zero before every launch, guarded, never graded.
    ScratchU32,
}

impl ArgKind {
    /// Whether this is the entry point's output (exactly one per signature).
    pub fn is_output(self) -> bool {
        matches!(self, Self::F32Output | Self::Bf16Output)
    }

    /// Whether the kernel gets a pointer (everything but the by-value scalars).
    pub fn is_pointer(self) -> bool {
        !matches!(self, Self::I32Scalar | Self::F32Scalar)
    }

    /// Bytes of one element of the buffer this argument points to (`None` for a scalar).
    pub fn element_bytes(self) -> Option<usize> {
        match self {
            Self::I32Scalar | Self::F32Scalar => None,
            Self::U8Input => Some(1),
            Self::Bf16Input | Self::Bf16Output => Some(2),
            Self::F32Input
            | Self::I32Input
            | Self::OptionalF32Input
            | Self::F32Output
            | Self::ScratchF32
            | Self::ScratchU32 => Some(4),
        }
    }

    /// The C parameter type the signature spells for this kind.
    pub fn c_type(self) -> &'static str {
        match self {
            Self::F32Input | Self::OptionalF32Input => "const float*",
            Self::I32Input => "const int*",
            Self::Bf16Input => "const __nv_bfloat16*",
            Self::U8Input => "const uint8_t*",
            Self::I32Scalar => "int",
            Self::F32Scalar => "float",
            Self::F32Output | Self::ScratchF32 => "float*",
            Self::Bf16Output => "__nv_bfloat16*",
            Self::ScratchU32 => "unsigned*",
        }
    }
}

/// One parameter of the entry point, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgSpec {
    pub name: &'static str,
    pub kind: ArgKind,
}

/// One argument's value for one launch, borrowed from a case's inputs, in
/// signature order (what a lab's argument table packs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ArgValue<'a> {
    F32(&'a [f32]),
    I32(&'a [i32]),
    /// bf16 values as their bits.
    Bf16(&'a [u16]),
    U8(&'a [u8]),
    /// A float input whose compact blocks sit at places of a far larger
    /// virtual buffer ([`crate::lab::sparse`]): only they are mapped.
    PlacedF32(&'a [f32], &'a SparseBlocks),
    /// A byte input placed the same way.
    PlacedU8(&'a [u8], &'a SparseBlocks),
    /// A scalar `int`.
    Scalar(i32),
    /// A scalar `float`.
    F32Scalar(f32),
    /// A null pointer for an optional input.
    Null,
    /// The output buffer; its size is the problem's output shape.
    Output,
    /// A scratch buffer of this many elements, reset before every launch.
    Scratch(usize),
}

impl ArgValue<'_> {
    /// Whether this is an input placed across a far larger virtual range,
    /// which has no fresh copies for timed or profiled launches.
    pub fn is_placed(&self) -> bool {
        matches!(self, Self::PlacedF32(..) | Self::PlacedU8(..))
    }

    /// Whether this value may be passed for an argument of `kind`.
    pub fn fits(&self, kind: ArgKind) -> bool {
        matches!(
            (kind, self),
            (ArgKind::F32Input, Self::F32(_) | Self::PlacedF32(..))
                | (ArgKind::I32Input, Self::I32(_))
                | (ArgKind::OptionalF32Input, Self::F32(_) | Self::Null)
                | (ArgKind::Bf16Input, Self::Bf16(_))
                | (ArgKind::U8Input, Self::U8(_) | Self::PlacedU8(..))
                | (ArgKind::I32Scalar, Self::Scalar(_))
                | (ArgKind::F32Scalar, Self::F32Scalar(_))
                | (ArgKind::F32Output | ArgKind::Bf16Output, Self::Output)
                | (ArgKind::ScratchF32 | ArgKind::ScratchU32, Self::Scratch(_))
        )
    }
}

/// One argument as a launch gets it: a buffer's host image (guard band,
/// contents, guard band) or a value. What `gpu::device` uploads, and what a
/// CPU stand-in for the GPU can read the same way.
#[derive(Debug, Clone, PartialEq)]
pub enum Laid {
    F32Input(Vec<f32>),
    I32Input(Vec<i32>),
    Bf16Input(Vec<u16>),
    U8Input(Vec<u8>),
    /// A placed input: no guard bands, the unmapped range around its
    /// blocks faults instead, and the mapped slack holds the guard element.
    Placed(SparseImage),
    Scalar(i32),
    F32Scalar(f32),
    Null,
    /// The output, poisoned.
    F32Output(Vec<f32>),
    Bf16Output(Vec<u16>),
    /// Scratch as it is reset before every launch.
    ScratchF32(Vec<f32>),
    ScratchU32(Vec<u32>),
}

impl Laid {
    /// An argument of `kind` with `value`; the output has `output_elements`
    /// elements poisoned with the float pattern `poison_bits` (a bf16 output
    /// with its own poison for it). `None` when the value does not fit the kind.
    pub fn new(
        kind: ArgKind,
        value: ArgValue<'_>,
        output_elements: usize,
        poison_bits: u32,
    ) -> Option<Self> {
        if !value.fits(kind) {
            return None;
        }
        Some(match value {
            ArgValue::F32(values) => {
                Self::F32Input(guarded(values, f32::from_bits(INPUT_GUARD_BITS)))
            }
            ArgValue::I32(values) => Self::I32Input(guarded(values, INPUT_GUARD_BITS as i32)),
            ArgValue::Bf16(values) => Self::Bf16Input(guarded(values, BF16_INPUT_GUARD_BITS)),
            ArgValue::U8(values) => Self::U8Input(guarded(values, U8_INPUT_GUARD)),
            ArgValue::PlacedF32(values, blocks) => Self::Placed(SparseImage {
                blocks: blocks.clone(),
                elem_bytes: 4,
                compact: values.iter().flat_map(|x| x.to_le_bytes()).collect(),
                fill: INPUT_GUARD_BITS.to_le_bytes().to_vec(),
            }),
            ArgValue::PlacedU8(values, blocks) => Self::Placed(SparseImage {
                blocks: blocks.clone(),
                elem_bytes: 1,
                compact: values.to_vec(),
                fill: vec![U8_INPUT_GUARD],
            }),
            ArgValue::Scalar(n) => Self::Scalar(n),
            ArgValue::F32Scalar(x) => Self::F32Scalar(x),
            ArgValue::Null => Self::Null,
            ArgValue::Output if kind == ArgKind::Bf16Output => Self::Bf16Output(guarded(
                &vec![bf16_output_start(poison_bits); output_elements],
                BF16_OUTPUT_GUARD_BITS,
            )),
            ArgValue::Output => Self::F32Output(guarded(
                &vec![f32::from_bits(poison_bits); output_elements],
                f32::from_bits(OUTPUT_GUARD_BITS),
            )),
            ArgValue::Scratch(len) if kind == ArgKind::ScratchU32 => {
                Self::ScratchU32(guarded(&vec![0; len], OUTPUT_GUARD_BITS))
            }
            ArgValue::Scratch(len) => Self::ScratchF32(guarded(
                &vec![f32::from_bits(SCRATCH_F32_BITS); len],
                f32::from_bits(OUTPUT_GUARD_BITS),
            )),
        })
    }
}

/// Elements of a guarded image inside its guard bands.
pub fn inner_len(image_len: usize) -> usize {
    image_len.saturating_sub(2 * GUARD_ELEMS)
}

/// A buffer as it is uploaded: guard band, contents, guard band.
pub fn guarded<T: Copy>(contents: &[T], guard: T) -> Vec<T> {
    let mut host = Vec::with_capacity(contents.len() + 2 * GUARD_ELEMS);
    host.extend(std::iter::repeat_n(guard, GUARD_ELEMS));
    host.extend_from_slice(contents);
    host.extend(std::iter::repeat_n(guard, GUARD_ELEMS));
    host
}

/// Guard elements of a scratch buffer that no longer hold their guard: writes past its ends.
pub fn scratch_guards_written<T: Copy + PartialEq>(host: &[T], len: usize, guard: T) -> usize {
    let (before, rest) = host.split_at(GUARD_ELEMS.min(host.len()));
    let after = rest.get(len..).unwrap_or_default();
    before
        .iter()
        .chain(after)
        .filter(|&&value| value != guard)
        .count()
}

/// Elements at which two buffers of the same layout differ (a longer one's tail counts too).
pub fn differing<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    a.iter().zip(b).filter(|(x, y)| x != y).count() + a.len().abs_diff(b.len())
}

/// The bf16 nearest `x` (ties to even), as bits; a NaN stays a quiet NaN.
pub fn bf16_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) as u16) | 0x0040;
    }
    let round = 0x7FFF + ((bits >> 16) & 1);
    (bits.wrapping_add(round) >> 16) as u16
}

/// The float a bf16 value is (exact: bf16 is the top half of a float).
pub fn bf16_value(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}

/// A bf16 output element as the float grading reads: the bf16 poison reads
/// as the float output's poison, so unwritten elements are found the same
/// way for both outputs; anything else is its exact value.
pub fn bf16_output_value(bits: u16) -> f32 {
    if bits == BF16_POISON_BITS {
        f32::from_bits(POISON_BITS)
    } else {
        bf16_value(bits)
    }
}

/// What a bf16 output starts as when an experiment asks for the float
/// `start` (the poison, or a finite value such as 0).
pub fn bf16_output_start(start_bits: u32) -> u16 {
    if start_bits == POISON_BITS {
        BF16_POISON_BITS
    } else {
        bf16_bits(f32::from_bits(start_bits))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLOAT_POISON: u32 = POISON_BITS;

    #[test]
    fn element_sizes_match_the_c_types() {
        let sizes: Vec<(ArgKind, Option<usize>)> = [
            ArgKind::F32Input,
            ArgKind::I32Input,
            ArgKind::Bf16Input,
            ArgKind::U8Input,
            ArgKind::F32Scalar,
            ArgKind::Bf16Output,
            ArgKind::ScratchU32,
        ]
        .into_iter()
        .map(|kind| (kind, kind.element_bytes()))
        .collect();
        assert_eq!(
            sizes,
            vec![
                (ArgKind::F32Input, Some(4)),
                (ArgKind::I32Input, Some(4)),
                (ArgKind::Bf16Input, Some(2)),
                (ArgKind::U8Input, Some(1)),
                (ArgKind::F32Scalar, None),
                (ArgKind::Bf16Output, Some(2)),
                (ArgKind::ScratchU32, Some(4)),
            ]
        );
        assert!(ArgKind::Bf16Output.is_output() && !ArgKind::ScratchF32.is_output());
        assert!(!ArgKind::F32Scalar.is_pointer() && ArgKind::ScratchU32.is_pointer());
    }

    #[test]
    fn every_guard_and_poison_is_a_nan_no_arithmetic_makes() {
        assert!(bf16_value(BF16_INPUT_GUARD_BITS).is_nan());
        assert!(bf16_value(BF16_POISON_BITS).is_nan());
        assert!(bf16_value(BF16_OUTPUT_GUARD_BITS).is_nan());
        assert!(f32::from_bits(SCRATCH_F32_BITS).is_nan());
        // The canonical NaNs a kernel writes (0/0 in float, then rounded to bf16).
        let canonical = bf16_bits(f32::NAN);
        for pattern in [
            BF16_INPUT_GUARD_BITS,
            BF16_POISON_BITS,
            BF16_OUTPUT_GUARD_BITS,
        ] {
            assert_ne!(pattern, canonical);
        }
        assert_ne!(SCRATCH_F32_BITS, f32::NAN.to_bits());
        // 0x7F is NaN in E4M3 (S.1111.111) and in E5M2 (S.11111.11, mantissa nonzero).
        assert_eq!(U8_INPUT_GUARD & 0x7F, 0x7F);
    }

    #[test]
    fn a_guarded_buffer_has_its_contents_between_two_bands() {
        let host = guarded(&[1u8, 2, 3], U8_INPUT_GUARD);
        assert_eq!(host.len(), 3 + 2 * GUARD_ELEMS);
        assert_eq!(&host[GUARD_ELEMS..GUARD_ELEMS + 3], &[1, 2, 3]);
        assert!(host[..GUARD_ELEMS].iter().all(|&b| b == 0x7F));
        assert!(host[GUARD_ELEMS + 3..].iter().all(|&b| b == 0x7F));
    }

    #[test]
    fn scratch_is_reset_to_nan_or_zero_inside_its_guards() {
        let Some(Laid::ScratchF32(floats)) =
            Laid::new(ArgKind::ScratchF32, ArgValue::Scratch(5), 0, 0)
        else {
            panic!("float scratch");
        };
        assert_eq!(inner_len(floats.len()), 5);
        assert!(floats[GUARD_ELEMS..GUARD_ELEMS + 5]
            .iter()
            .all(|x| x.to_bits() == SCRATCH_F32_BITS));
        assert!(floats[..GUARD_ELEMS]
            .iter()
            .all(|x| x.to_bits() == OUTPUT_GUARD_BITS));
        let Some(Laid::ScratchU32(mut words)) =
            Laid::new(ArgKind::ScratchU32, ArgValue::Scratch(3), 0, 0)
        else {
            panic!("uint32 scratch");
        };
        assert!(words[GUARD_ELEMS..GUARD_ELEMS + 3].iter().all(|&w| w == 0));
        assert_eq!(scratch_guards_written(&words, 3, OUTPUT_GUARD_BITS), 0);
        // One word past the end and one before the start were written.
        words[GUARD_ELEMS + 3] = 1;
        words[GUARD_ELEMS - 1] = 1;
        words[GUARD_ELEMS] = 9; // inside: allowed
        assert_eq!(scratch_guards_written(&words, 3, OUTPUT_GUARD_BITS), 2);
    }

    #[test]
    fn each_kind_is_laid_out_with_its_own_guard_and_poison() {
        let bf16 = [0x3F80u16, 0xC020];
        let Some(Laid::Bf16Input(image)) =
            Laid::new(ArgKind::Bf16Input, ArgValue::Bf16(&bf16), 0, 0)
        else {
            panic!("bf16 input");
        };
        assert_eq!(&image[GUARD_ELEMS..GUARD_ELEMS + 2], &bf16);
        assert_eq!(image[GUARD_ELEMS - 1], BF16_INPUT_GUARD_BITS);
        assert_eq!(image[GUARD_ELEMS + 2], BF16_INPUT_GUARD_BITS);
        let Some(Laid::Bf16Output(out)) =
            Laid::new(ArgKind::Bf16Output, ArgValue::Output, 3, FLOAT_POISON)
        else {
            panic!("bf16 output");
        };
        assert_eq!(inner_len(out.len()), 3);
        assert!(out[GUARD_ELEMS..GUARD_ELEMS + 3]
            .iter()
            .all(|&b| b == BF16_POISON_BITS));
        assert!(out[..GUARD_ELEMS]
            .iter()
            .all(|&b| b == BF16_OUTPUT_GUARD_BITS));
        // An experiment's finite start (0.0) reaches a bf16 output as bf16 zero.
        let Some(Laid::Bf16Output(zeroed)) = Laid::new(ArgKind::Bf16Output, ArgValue::Output, 2, 0)
        else {
            panic!("bf16 output");
        };
        assert_eq!(&zeroed[GUARD_ELEMS..GUARD_ELEMS + 2], &[0, 0]);
        let Some(Laid::F32Output(floats)) =
            Laid::new(ArgKind::F32Output, ArgValue::Output, 2, FLOAT_POISON)
        else {
            panic!("float output");
        };
        assert!(floats[GUARD_ELEMS..GUARD_ELEMS + 2]
            .iter()
            .all(|x| x.to_bits() == FLOAT_POISON));
        assert_eq!(
            Laid::new(ArgKind::F32Scalar, ArgValue::F32Scalar(0.5), 0, 0),
            Some(Laid::F32Scalar(0.5))
        );
        assert_eq!(Laid::new(ArgKind::F32Input, ArgValue::U8(&[1]), 0, 0), None);
    }

    #[test]
    fn differing_counts_changed_elements_and_a_changed_length() {
        assert_eq!(differing(&[1u8, 2, 3], &[1, 9, 3]), 1);
        assert_eq!(differing(&[1u16, 2], &[1, 2, 7]), 1);
        assert_eq!(differing::<u8>(&[], &[]), 0);
    }

    #[test]
    fn bf16_rounds_to_nearest_even_and_reads_back_exactly() {
        assert_eq!(bf16_bits(1.0), 0x3F80);
        assert_eq!(bf16_value(0x3F80), 1.0);
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to the even 1.0.
        assert_eq!(bf16_bits(1.0 + 2f32.powi(-8)), 0x3F80);
        // Just above halfway rounds up.
        assert_eq!(bf16_bits(1.0 + 2f32.powi(-8) + 2f32.powi(-20)), 0x3F81);
        // 1 + 3 * 2^-8 is halfway between 0x3F81 and 0x3F82: ties to the even 0x3F82.
        assert_eq!(bf16_bits(1.0 + 3.0 * 2f32.powi(-8)), 0x3F82);
        assert_eq!(bf16_bits(-2.5), 0xC020);
        assert_eq!(bf16_bits(f32::INFINITY), 0x7F80);
        assert!(bf16_value(bf16_bits(f32::NAN)).is_nan());
        for bits in [0x0000u16, 0x8000, 0x3F81, 0xC2F7, 0x7F7F] {
            assert_eq!(bf16_bits(bf16_value(bits)), bits);
        }
    }

    #[test]
    fn a_bf16_output_reads_its_poison_as_the_float_poison() {
        assert_eq!(bf16_output_value(BF16_POISON_BITS).to_bits(), FLOAT_POISON);
        // Another NaN is a NaN the kernel wrote, not an unwritten element.
        let written = bf16_output_value(0x7FC0);
        assert!(written.is_nan() && written.to_bits() != FLOAT_POISON);
        assert_eq!(bf16_output_value(0x3F80), 1.0);
        assert_eq!(bf16_output_start(FLOAT_POISON), BF16_POISON_BITS);
        assert_eq!(bf16_output_start(0f32.to_bits()), 0);
    }

    #[test]
    fn a_value_fits_only_its_own_kind() {
        assert!(ArgValue::Bf16(&[]).fits(ArgKind::Bf16Input));
        assert!(!ArgValue::Bf16(&[]).fits(ArgKind::F32Input));
        assert!(ArgValue::Null.fits(ArgKind::OptionalF32Input));
        assert!(!ArgValue::Null.fits(ArgKind::F32Input));
        assert!(ArgValue::Output.fits(ArgKind::Bf16Output));
        assert!(ArgValue::Scratch(4).fits(ArgKind::ScratchU32));
        assert!(!ArgValue::Scalar(1).fits(ArgKind::F32Scalar));
        let blocks = SparseBlocks {
            block_elems: 1,
            at: vec![7],
        };
        assert!(ArgValue::PlacedF32(&[1.0], &blocks).fits(ArgKind::F32Input));
        assert!(!ArgValue::PlacedF32(&[1.0], &blocks).fits(ArgKind::U8Input));
        assert!(ArgValue::PlacedU8(&[1], &blocks).fits(ArgKind::U8Input));
    }

    #[test]
    fn a_placed_input_is_its_compact_bytes_with_the_guard_as_fill() {
        let blocks = SparseBlocks {
            block_elems: 2,
            at: vec![3, -1],
        };
        let laid = Laid::new(
            ArgKind::F32Input,
            ArgValue::PlacedF32(&[1.0, 2.0, 3.0, 4.0], &blocks),
            0,
            POISON_BITS,
        );
        let Some(Laid::Placed(image)) = laid else {
            panic!("{laid:?}");
        };
        let mapped = image.mapped(8);
        // Block 1 at -8..0, block 0 at 24..32: two chunks of 8 bytes.
        use crate::lab::sparse::MARGIN;
        assert_eq!(mapped.reserve, -8 - MARGIN..32 + MARGIN);
        let floats = |bytes: &[u8]| -> Vec<u32> {
            bytes
                .chunks(4)
                .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
                .collect()
        };
        assert_eq!(
            floats(&mapped.extents[0].bytes),
            [3.0f32.to_bits(), 4.0f32.to_bits()]
        );
        assert_eq!(
            floats(&mapped.extents[1].bytes),
            [1.0f32.to_bits(), 2.0f32.to_bits()]
        );
        let bytes = Laid::new(
            ArgKind::U8Input,
            ArgValue::PlacedU8(&[9, 9, 9, 9], &blocks),
            0,
            POISON_BITS,
        );
        let Some(Laid::Placed(image)) = bytes else {
            panic!("{bytes:?}");
        };
        assert_eq!(image.fill, [U8_INPUT_GUARD]);
    }
}
