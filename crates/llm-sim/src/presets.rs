//! Engine presets: a model on a GPU, served by vLLM at its defaults, each number with where it
//! comes from (`xsched llm presets` prints the table).
//!
//! - **Batch limits** are vLLM's defaults for its OpenAI server (`vllm serve`), V1 engine
//!   (v0.9 onward), set in `vllm/engine/arg_utils.py`, `EngineArgs.get_batch_defaults`: on a
//!   GPU with ≥ 70 GiB whose name does not contain "a100", `max_num_seqs` 1024 and
//!   `max_num_batched_tokens` 8192; otherwise 256 and 2048.
//! - **KV blocks**: (GPU memory × `gpu_memory_utilization` 0.9, vLLM's default in
//!   `vllm/config/cache.py`, − the BF16 weights) / (16 tokens × the model's KV bytes per token).
//!   vLLM also subtracts the activations' peak it profiles; that is left out (it is a few GiB).
//! - **Step time** `β0 + β1·prefill + β2·decode + β3·(context tokens the decodes attend)`, µs:
//!   β0–β2 are the published fits where there are some (PAPERS.md §3: Llama-3.1-8B on A100-80G
//!   and H100); elsewhere derived from the hardware by the relations those two fits satisfy:
//!   β1 = 2 × parameters / peak dense BF16 FLOP/s (the fits: 0.93× and 1.06× of it),
//!   β2 = 0.364 β1 (the fits' mean β2/β1: 0.381, 0.348), and
//!   β0 = 1.64 × weight bytes / memory bandwidth (the fits: 2.09× and 1.20×: estimated).
//!   β3 = KV bytes per token / memory bandwidth on every preset (derived: a decode step reads
//!   every attended token's keys and values once; the published fits have no such term, so
//!   their β2 already holds the cost of their own data's mean context, and counting β3 on top
//!   over-charges decode by that much).
//! - **Swap** (pausing a running request, which FastServe and TRAIL do): its KV crosses the
//!   host link (PCIe 4.0 x16 on the A100 and A40, 5.0 x16 on the H100 and H800: the vendors'
//!   data sheets, per direction) into host memory, 128 GiB of it per GPU (estimated: a DGX
//!   A100's 1 TiB over its 8 GPUs). vLLM V0's `--swap-space` defaults to 4 GiB (16 k tokens of
//!   Qwen3-32B's KV), but FastServe keeps paused requests' KV in host memory by design, so its
//!   baseline gets room for it. vLLM V1 preempts by recompute only.
//! - **Window** (`max_model_len`): the model's own maximum, vLLM's default when the KV blocks
//!   hold one full sequence (they do on every preset).
//!
//! The LLM figures measured before these presets (`max_num_seqs` 16, no KV term, an engine that
//! could pause a running request) are reproducible at commit e928533.

use crate::engine::EngineConfig;
pub use crate::provenance::{Fact, Provenance};

/// A GPU's data-sheet facts.
struct Gpu {
    name: &'static str,
    /// Memory as the driver reports it (MiB).
    memory_mib: f64,
    /// Memory bandwidth (GB/s).
    bandwidth_gbs: f64,
    /// Peak dense BF16 tensor throughput (TFLOP/s).
    bf16_tflops: f64,
    /// Host link bandwidth per direction (GB/s).
    host_link_gbs: f64,
}

const A100_80G: Gpu = Gpu {
    name: "A100-SXM4-80GB",
    memory_mib: 81_920.0,
    bandwidth_gbs: 2_039.0,
    bf16_tflops: 312.0,
    host_link_gbs: 31.5,
};
const H100: Gpu = Gpu {
    name: "H100-SXM5-80GB",
    memory_mib: 81_559.0,
    bandwidth_gbs: 3_350.0,
    bf16_tflops: 989.0,
    host_link_gbs: 63.0,
};
const A40: Gpu = Gpu {
    name: "A40",
    memory_mib: 46_068.0,
    bandwidth_gbs: 696.0,
    bf16_tflops: 149.7,
    host_link_gbs: 31.5,
};
/// The H800 is an H100 SXM with less interconnect bandwidth: the same memory and compute.
const H800: Gpu = Gpu {
    name: "H800-SXM5-80GB",
    memory_mib: 81_559.0,
    bandwidth_gbs: 3_350.0,
    bf16_tflops: 989.0,
    host_link_gbs: 63.0,
};

/// A model's facts (its `config.json`).
struct Model {
    name: &'static str,
    /// Parameters (billions); the weights are BF16.
    params_b: f64,
    /// 2 (K and V) × layers × KV heads × head dimension × 2 bytes.
    kv_bytes_per_token: u32,
    /// `max_position_embeddings`.
    max_model_len: u32,
}

/// Llama-3.1-8B: 32 layers, 8 KV heads of 128: 128 KiB per token; 131 072 positions.
const LLAMA_8B: Model = Model {
    name: "Llama-3.1-8B",
    params_b: 8.03,
    kv_bytes_per_token: 131_072,
    max_model_len: 131_072,
};
/// Qwen3-32B: 64 layers, 8 KV heads of 128: 256 KiB per token; 40 960 positions.
const QWEN3_32B: Model = Model {
    name: "Qwen3-32B",
    params_b: 32.8,
    kv_bytes_per_token: 262_144,
    max_model_len: 40_960,
};

/// vLLM's default `gpu_memory_utilization`.
pub const GPU_MEMORY_UTILIZATION: f64 = 0.9;
/// vLLM's default KV block size (tokens).
pub const BLOCK_TOKENS: u32 = 16;
/// Host memory per GPU for paused requests' KV (GiB; estimated, see the module docs).
pub const SWAP_GIB: f64 = 128.0;

struct Preset {
    name: &'static str,
    model: Model,
    gpu: Gpu,
    /// A published step-time fit `[β0, β1, β2]` (µs), if there is one.
    fit: Option<[f64; 3]>,
}

const PRESETS: [Preset; 4] = [
    Preset {
        name: "llama3.1-8b-a100",
        model: LLAMA_8B,
        gpu: A100_80G,
        fit: Some([16_441.5, 47.84, 18.21]),
    },
    Preset {
        name: "llama3.1-8b-h100",
        model: LLAMA_8B,
        gpu: H100,
        fit: Some([5_752.7, 17.25, 6.00]),
    },
    Preset {
        name: "llama3.1-8b-a40",
        model: LLAMA_8B,
        gpu: A40,
        fit: None,
    },
    Preset {
        name: "qwen3-32b-h800",
        model: QWEN3_32B,
        gpu: H800,
        fit: None,
    },
];

/// Every preset name.
pub const NAMES: &[&str] = &[
    "llama3.1-8b-a100",
    "llama3.1-8b-h100",
    "llama3.1-8b-a40",
    "qwen3-32b-h800",
    crate::measured::SMOLLM2_CPU,
];

/// A [`Fact`] from its parameter and its value, source and how.
fn fact(what: &'static str, (value, source, how): (f64, Provenance, String)) -> Fact {
    Fact {
        what,
        value,
        source,
        how,
    }
}

/// The β-relations of the module docs (fitted on the two published fits).
const PREFILL_PER_PEAK: f64 = 1.0;
const DECODE_PER_PREFILL: f64 = 0.364;
const FIXED_PER_WEIGHT_READ: f64 = 1.64;

impl Preset {
    fn weight_bytes(&self) -> f64 {
        self.model.params_b * 1e9 * 2.0
    }

    /// vLLM's batch limits for its server on this GPU (the rule of the module docs).
    fn batch_limits(&self) -> (usize, u32) {
        let big =
            self.gpu.memory_mib >= 70.0 * 1024.0 && !self.gpu.name.to_lowercase().contains("a100");
        if big { (1024, 8192) } else { (256, 2048) }
    }

    /// Every number of the preset, in the report's order, with where it comes from.
    fn facts(&self) -> Vec<Fact> {
        let mut facts = self.batch_facts();
        facts.extend(self.step_facts());
        facts.extend(self.swap_facts());
        facts
    }

    /// Microseconds to read `bytes` from this GPU's memory once.
    fn read_us(&self, bytes: f64) -> f64 {
        bytes / (self.gpu.bandwidth_gbs * 1e9) * 1e6
    }

    /// β`i` of the published fit if there is one, else `derived` (estimated, as `how` says).
    fn beta(&self, i: usize, derived: f64, how: &str) -> (f64, Provenance, String) {
        match self.fit {
            Some(f) => (
                f[i],
                Provenance::Published,
                "published fit (PAPERS.md §3)".to_string(),
            ),
            None => (derived, Provenance::Estimated, how.to_string()),
        }
    }

    /// The batch limits (`max_num_seqs`, `max_num_batched_tokens`) and the KV blocks.
    fn batch_facts(&self) -> Vec<Fact> {
        let (g, m) = (&self.gpu, &self.model);
        let (seqs, tokens) = self.batch_limits();
        let vllm = format!(
            "vLLM serve default for a {} MiB {} (vllm/engine/arg_utils.py, get_batch_defaults)",
            g.memory_mib, g.name
        );
        let kv_bytes =
            g.memory_mib * 1024.0 * 1024.0 * GPU_MEMORY_UTILIZATION - self.weight_bytes();
        let blocks = (kv_bytes / f64::from(BLOCK_TOKENS * m.kv_bytes_per_token)).floor();
        vec![
            fact(
                "max_num_seqs",
                (seqs as f64, Provenance::Published, vllm.clone()),
            ),
            fact(
                "max_num_batched_tokens",
                (f64::from(tokens), Provenance::Published, vllm),
            ),
            fact(
                "kv_blocks",
                (
                    blocks,
                    Provenance::Derived,
                    format!(
                        "({} MiB x 0.9 - {:.2} GB weights) / (16 x {} B per token)",
                        g.memory_mib,
                        self.weight_bytes() / 1e9,
                        m.kv_bytes_per_token
                    ),
                ),
            ),
        ]
    }

    /// The step-time coefficients β0–β3.
    fn step_facts(&self) -> [Fact; 4] {
        let (g, m) = (&self.gpu, &self.model);
        let peak_us = 2.0 * m.params_b * 1e9 / (g.bf16_tflops * 1e12) * 1e6;
        let beta1 = self.beta(
            1,
            peak_us * PREFILL_PER_PEAK,
            &format!("2 x {} B params / {} TFLOP/s", m.params_b, g.bf16_tflops),
        );
        let beta2 = self.beta(
            2,
            beta1.0 * DECODE_PER_PREFILL,
            "0.364 x beta1 (the published fits' mean ratio)",
        );
        let beta0 = self.beta(
            0,
            self.read_us(self.weight_bytes()) * FIXED_PER_WEIGHT_READ,
            &format!(
                "1.64 x weights / {} GB/s (the published fits' mean ratio)",
                g.bandwidth_gbs
            ),
        );
        [
            fact("beta0_us", beta0),
            fact("beta1_us_per_prefill_token", beta1),
            fact("beta2_us_per_decode_token", beta2),
            fact(
                "beta3_us_per_attended_token",
                (
                    self.read_us(f64::from(m.kv_bytes_per_token)),
                    Provenance::Derived,
                    format!(
                        "{} B per token / {} GB/s",
                        m.kv_bytes_per_token, g.bandwidth_gbs
                    ),
                ),
            ),
        ]
    }

    /// The swap costs (per token, and the host room) and the window.
    fn swap_facts(&self) -> [Fact; 3] {
        let (g, m) = (&self.gpu, &self.model);
        [
            fact(
                "swap_us_per_token",
                (
                    f64::from(m.kv_bytes_per_token) / (g.host_link_gbs * 1e9) * 1e6,
                    Provenance::Derived,
                    format!(
                        "{} B per token / {} GB/s host link (PCIe, per direction)",
                        m.kv_bytes_per_token, g.host_link_gbs
                    ),
                ),
            ),
            fact(
                "swap_tokens",
                (
                    (SWAP_GIB * 1024.0 * 1024.0 * 1024.0 / f64::from(m.kv_bytes_per_token)).floor(),
                    Provenance::Estimated,
                    format!(
                        "{SWAP_GIB} GiB host memory per GPU (a DGX A100's 1 TiB / 8) / {} B per token",
                        m.kv_bytes_per_token
                    ),
                ),
            ),
            fact(
                "max_model_len",
                (
                    f64::from(m.max_model_len),
                    Provenance::Published,
                    format!("{} max_position_embeddings", m.name),
                ),
            ),
        ]
    }

    fn config(&self) -> EngineConfig {
        let facts = self.facts();
        let get = |what: &str| {
            facts
                .iter()
                .find(|f| f.what == what)
                .map_or(0.0, |f| f.value)
        };
        EngineConfig {
            name: self.name,
            max_num_batched_tokens: get("max_num_batched_tokens") as u32,
            max_num_seqs: get("max_num_seqs") as usize,
            block_tokens: BLOCK_TOKENS,
            kv_blocks: get("kv_blocks") as u32,
            beta_us: [
                get("beta0_us"),
                get("beta1_us_per_prefill_token"),
                get("beta2_us_per_decode_token"),
            ],
            attend_us: get("beta3_us_per_attended_token"),
            max_model_len: get("max_model_len") as u32,
            swap_us_per_token: get("swap_us_per_token"),
            swap_tokens: get("swap_tokens") as u64,
        }
    }
}

/// The preset called `name`.
pub fn engine(name: &str) -> Option<EngineConfig> {
    PRESETS
        .iter()
        .find(|p| p.name == name)
        .map(Preset::config)
        .or_else(|| crate::measured::engine(name))
}

/// The default preset: Llama-3.1-8B on an A100-80G.
pub fn default_engine() -> EngineConfig {
    PRESETS[0].config()
}

/// Where each of the preset's numbers comes from (empty for an unknown name).
pub fn provenance(name: &str) -> Vec<Fact> {
    PRESETS
        .iter()
        .find(|p| p.name == name)
        .map_or_else(|| crate::measured::provenance(name), Preset::facts)
}

/// The preset's model and GPU, for reports.
pub fn describe(name: &str) -> String {
    PRESETS.iter().find(|p| p.name == name).map_or_else(
        || match name {
            crate::measured::SMOLLM2_CPU => {
                format!("{name} (SmolLM2-135M on vLLM's CPU build, 2 vCPUs, measured)")
            }
            _ => name.to_string(),
        },
        |p| format!("{name} ({} on {})", p.model.name, p.gpu.name),
    )
}

impl EngineConfig {
    /// Preset names.
    pub const PRESETS: &'static [&'static str] = NAMES;

    /// A preset: a model on a GPU at vLLM's server defaults (this module, with where each
    /// number comes from).
    pub fn preset(name: &str) -> Option<EngineConfig> {
        engine(name)
    }

    /// The CLI's default preset (Llama-3.1-8B on an A100-80G).
    pub fn default_preset() -> EngineConfig {
        default_engine()
    }

    /// This engine with what a replay changes, where it says: at most `max_num_seqs` requests
    /// at once (at least one), and the step time `beta_us` (`[β0, β1, β2]` in µs).
    pub fn with_overrides(
        mut self,
        max_num_seqs: Option<usize>,
        beta_us: Option<[f64; 3]>,
    ) -> EngineConfig {
        if let Some(n) = max_num_seqs {
            self.max_num_seqs = n.max(1);
        }
        if let Some(beta) = beta_us {
            self.beta_us = beta;
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_follow_vllms_defaults_and_the_memory_left_by_the_weights() {
        let a100 = engine("llama3.1-8b-a100").expect("a100");
        assert_eq!(
            (a100.max_num_seqs, a100.max_num_batched_tokens),
            (256, 2048)
        );
        let h100 = engine("llama3.1-8b-h100").expect("h100");
        assert_eq!(
            (h100.max_num_seqs, h100.max_num_batched_tokens),
            (1024, 8192)
        );
        let a40 = engine("llama3.1-8b-a40").expect("a40");
        assert_eq!((a40.max_num_seqs, a40.max_num_batched_tokens), (256, 2048));
        // (81920 MiB x 0.9 - 16.06 GB) / 2 MiB = 29 205.99 blocks.
        assert_eq!(a100.kv_blocks, 29_205);
        assert_eq!(a100.beta_us, [16_441.5, 47.84, 18.21]);
        // 128 KiB / 2039 GB/s.
        assert!(
            (a100.attend_us - 0.064_282).abs() < 1e-6,
            "{}",
            a100.attend_us
        );
        // Qwen3-32B leaves an H800 about 10.6 GiB: a memory-bound engine.
        let qwen = engine("qwen3-32b-h800").expect("qwen");
        assert!(
            (2_600..2_800).contains(&qwen.kv_blocks),
            "{}",
            qwen.kv_blocks
        );
        assert_eq!(qwen.max_model_len, 40_960);
        assert!(NAMES.iter().all(|n| engine(n).is_some()));
        assert!(engine("gpt-9").is_none());
    }

    #[test]
    fn overrides_change_only_what_they_name_and_keep_one_seat() {
        let a100 = engine("llama3.1-8b-a100").expect("a100");
        assert_eq!(a100.clone().with_overrides(None, None), a100);
        let changed = a100.clone().with_overrides(Some(0), Some([1.0, 2.0, 3.0]));
        assert_eq!(
            (changed.max_num_seqs, changed.beta_us),
            (1, [1.0, 2.0, 3.0])
        );
        assert_eq!(changed.kv_blocks, a100.kv_blocks);
    }

    #[test]
    fn every_number_says_where_it_comes_from() {
        let a40 = provenance("llama3.1-8b-a40");
        let beta1 = a40
            .iter()
            .find(|f| f.what == "beta1_us_per_prefill_token")
            .expect("beta1");
        assert_eq!(beta1.source, Provenance::Estimated);
        // 2 x 8.03e9 / 149.7e12 s.
        assert!((beta1.value - 107.28).abs() < 0.01, "{}", beta1.value);
        let a100 = provenance("llama3.1-8b-a100");
        assert!(
            a100.iter()
                .filter(|f| f.what.starts_with("beta") && f.what != "beta3_us_per_attended_token")
                .all(|f| f.source == Provenance::Published)
        );
        assert_eq!(a100.len(), 10);
    }
}
