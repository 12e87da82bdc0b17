//! The timed launches' data (`lab::redraw`): the cases' hazards
//! (assets/cases.toml) at positions drawn for each launch. One KV group's
//! heads carry values eight times larger (`large-values-other-heads`), one
//! query row's largest score is its own key, the last it sees
//! (`last-key-of-sequence`), and one row meets three keys scoring 128
//! (`planted-overflow`). A kernel needs fp32-exact scores and a subtracted
//! row max on the timed launches as much as on the cases.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::contract::{Inputs, DH, GROUP, HKV, HQ};
use crate::lab::redraw::{PlantValue, Redraw};

/// What the cases plant: 4.0 in a query and a key scores 4 x 4 x 64 / 8 = 128.
const LARGE: f32 = 4.0;
/// The large-values case's factor on its heads.
const LARGE_HEADS: f32 = 8.0;

pub fn redraw(inputs: &Inputs, rng: &mut ChaCha8Rng) -> Redraw {
    let shape = inputs.shape;
    let (rows, keys) = (shape.chunk_len, shape.seq_len());
    let mut redraw = Redraw::default();
    let scaled = PlantValue::Drawn {
        low: -LARGE_HEADS,
        high: LARGE_HEADS,
    };
    let group = rng.random_range(0..HKV);
    for row in 0..rows {
        let first = (row * HQ + group * GROUP) * DH;
        redraw.plant("q", first..first + GROUP * DH, scaled);
    }
    for key in 0..keys {
        let first = (key * HKV + group) * DH;
        redraw.plant("kCache", first..first + DH, scaled);
        redraw.plant("vCache", first..first + DH, scaled);
    }
    // The two plants below go in the other groups, so their scores are the cases' own.
    let head_elsewhere = |rng: &mut ChaCha8Rng| {
        let other = (group + rng.random_range(1..HKV)) % HKV;
        other * GROUP + rng.random_range(0..GROUP)
    };
    let large = PlantValue::Constant(LARGE.to_bits());
    let plant = |redraw: &mut Redraw, kind, row: usize, head: usize, keys: &[usize]| {
        let query = (row * HQ + head) * DH;
        redraw.plant("q", query..query + DH, large);
        for &key in keys {
            let first = (key * HKV + head / GROUP) * DH;
            redraw.plant("kCache", first..first + DH, large);
        }
        redraw.decides(kind, row);
    };
    let row = rng.random_range(0..rows);
    let head = head_elsewhere(rng);
    plant(
        &mut redraw,
        "last-key",
        row,
        head,
        &[shape.prefix_len + row],
    );
    let row = rng.random_range(0..rows);
    let head = head_elsewhere(rng);
    let seen: Vec<usize> = (0..3)
        .map(|_| rng.random_range(0..=shape.prefix_len + row))
        .collect();
    plant(&mut redraw, "overflow", row, head, &seen);
    redraw
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::flash_prefill::contract::Shape;
    use rand::SeedableRng;

    #[test]
    fn the_plants_move_from_launch_to_launch_and_stay_inside_the_tensors() {
        let shape = Shape {
            chunk_len: 64,
            prefix_len: 100,
        };
        let inputs = Inputs {
            shape,
            q: Vec::new(),
            k: Vec::new(),
            v: Vec::new(),
        };
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let launches: Vec<Redraw> = (0..4).map(|_| redraw(&inputs, &mut rng)).collect();
        assert!(launches.windows(2).all(|w| w[0].plants != w[1].plants));
        for launch in &launches {
            let last = |input| launch.spans_of(input).last().map_or(0, |p| p.span.end);
            assert!(last("q") <= shape.q_elems());
            assert!(last("kCache") <= shape.kv_elems() && last("vCache") <= shape.kv_elems());
            let kinds: Vec<&str> = launch.rows.iter().map(|r| r.kind).collect();
            assert_eq!(kinds, ["last-key", "overflow"]);
            assert!(launch.planted_rows().iter().all(|&r| r < shape.chunk_len));
        }
    }
}
