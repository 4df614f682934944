//! The history's vector arithmetic: embeddings stored as 8-bit fixed point, their exact
//! integer dot product, and the sign bits (one plane for dense vectors, two for sparse ones)
//! that rank a large history before the exact rescan.

/// A vector whose fraction of zero components exceeds this is sparse (two sign planes).
pub const SPARSE: f64 = 0.25;

/// An embedding stored in the history: 8-bit fixed point (×127), a quarter of the memory of
/// f32. A lookup streams every entry, so it is bound by memory bandwidth (384-dim f32 MiniLM
/// vectors: 15 MB per prediction at 10 k entries); ranking by cosine barely changes.
pub(super) fn quantize(v: &[f32]) -> Box<[i8]> {
    v.iter()
        .map(|x| (x * 127.0).round().clamp(-127.0, 127.0) as i8)
        .collect()
}

/// How signs are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Signs {
    /// One bit per dimension (`x ≥ 0`).
    Binary,
    /// Positive and negative planes, word for word (`[p0, n0, p1, n1, …]`).
    Ternary,
}

impl Signs {
    pub(super) fn of(v: &[i8]) -> Signs {
        let zeros = v.iter().filter(|x| **x == 0).count();
        if zeros as f64 > SPARSE * v.len() as f64 {
            Signs::Ternary
        } else {
            Signs::Binary
        }
    }

    pub(super) fn words(self, dim: usize) -> usize {
        match self {
            Signs::Binary => dim.div_ceil(64),
            Signs::Ternary => 2 * dim.div_ceil(64),
        }
    }

    /// The signs of `v`.
    pub(super) fn bits(self, v: &[i8]) -> Vec<u64> {
        let plane = |c: &[i8], keep: fn(i8) -> bool| {
            c.iter()
                .enumerate()
                .fold(0u64, |w, (k, x)| w | (u64::from(keep(*x)) << k))
        };
        match self {
            Signs::Binary => v.chunks(64).map(|c| plane(c, |x| x >= 0)).collect(),
            Signs::Ternary => v
                .chunks(64)
                .flat_map(|c| [plane(c, |x| x > 0), plane(c, |x| x < 0)])
                .collect(),
        }
    }

    /// How alike two sign vectors are (higher is more alike).
    pub(super) fn similarity(self, a: &[u64], b: &[u64]) -> i32 {
        match self {
            Signs::Binary => {
                -(a.iter()
                    .zip(b)
                    .map(|(x, y)| (x ^ y).count_ones())
                    .sum::<u32>() as i32)
            }
            Signs::Ternary => a
                .chunks_exact(2)
                .zip(b.chunks_exact(2))
                .map(|(x, y)| {
                    let same = (x[0] & y[0]).count_ones() + (x[1] & y[1]).count_ones();
                    let opposite = (x[0] & y[1]).count_ones() + (x[1] & y[0]).count_ones();
                    same as i32 - opposite as i32
                })
                .sum(),
        }
    }
}

/// Integer dot product with sixteen independent lanes (vectorizable).
pub(super) fn dot(a: &[i8], b: &[i8]) -> i32 {
    let mut acc = [0i32; 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: i32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..16 {
            acc[k] += i32::from(x[k]) * i32::from(y[k]);
        }
    }
    acc.iter().sum::<i32>() + tail
}
