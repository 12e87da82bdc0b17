//! The timed launches' data (`lab::redraw`): the cases' hazards
//! (assets/cases.toml) at positions drawn for each launch: one query row's
//! largest score is its own key, the last it sees (`last-key-of-sequence`),
//! and one row meets three keys scoring about 128 (`planted-overflow`),
//! each at a random head. The planted values are drawn from [3.5, 4.5), not
//! the cases' exact 4.0: close large scores then decide each other's
//! weights, so a kernel needs fp32-exact scores and a subtracted row max on
//! the timed launches as much as on the cases. (A head scaled eight times,
//! `large-values-other-heads`, is left out: at the timing shape's 4,096 keys
//! it takes honest split-precision tensor-core kernels past the tolerance,
//! H100 2026-12-06.)

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::contract::{Inputs, DH, GROUP, HKV, HQ};
use crate::lab::redraw::{PlantValue, Redraw};

/// Large values about the cases' 4.0: 4 x 4 x 64 / 8 = 128.
pub const LARGE: PlantValue = PlantValue::Drawn {
    low: 3.5,
    high: 4.5,
};

pub fn redraw(inputs: &Inputs, rng: &mut ChaCha8Rng) -> Redraw {
    let shape = inputs.shape;
    let mut redraw = Redraw::default();
    let plant = |redraw: &mut Redraw, kind, row: usize, keys: &[usize], rng: &mut ChaCha8Rng| {
        let head = rng.random_range(0..HQ);
        let query = (row * HQ + head) * DH;
        redraw.plant("q", query..query + DH, LARGE);
        for &key in keys {
            let first = (key * HKV + head / GROUP) * DH;
            redraw.plant("kCache", first..first + DH, LARGE);
        }
        redraw.decides(kind, row);
    };
    let row = rng.random_range(0..shape.chunk_len);
    plant(&mut redraw, "last-key", row, &[shape.prefix_len + row], rng);
    let row = rng.random_range(0..shape.chunk_len);
    let seen: Vec<usize> = (0..3)
        .map(|_| rng.random_range(0..=shape.prefix_len + row))
        .collect();
    plant(&mut redraw, "overflow", row, &seen, rng);
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
