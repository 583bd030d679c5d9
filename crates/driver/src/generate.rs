//! Greedy generation from one module of a decoder exported with its KV cache (issue
//! 61): the prompt prefilled on an empty cache, then one token at a time, each step
//! feeding the cache the step before returned. The module is compiled for ranges of two
//! sizes, the cache's length and the new tokens' (`tessera compile --shape
//! input_ids=1,seq:1..S --shape past_key_values.0.key=1,H,past:0..P,D …`), as Hugging
//! Face's and optimum's exports lay a decoder out: inputs `input_ids`, optionally
//! `attention_mask` (`[1, past + seq]`, all ones here) and `position_ids` (`past ..
//! past + seq`), then the cache's tensors; outputs the logits `[1, seq, vocab]`, then
//! the cache's tensors grown by the new tokens, in the order of the inputs they follow.
//! The cache stays on the device: each step's grown keys and values are copied into
//! the next step's inputs there ([`GraphModule::set_input_from_output`]), never read
//! back. Per-token latency is what users compare: each step is timed from its first
//! input set to its cache fed back.

use crate::run::Events;
use crate::{DriverError, Toolchain};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tessera_graph::executor::GraphModule;
use tessera_ir::DataType;
use tessera_runtime::NDArray;

/// What `tessera generate` asks.
#[derive(Clone, Debug)]
pub struct GenerateRequest {
    /// A module file of a decoder with its cache (see the module header).
    pub module: PathBuf,
    /// The prompt's token ids.
    pub prompt: Vec<i64>,
    /// Tokens decoded after the prompt.
    pub steps: usize,
    /// Where to write every step's logits (`step000` the prefill's), a `.npz`.
    pub save_logits: Option<PathBuf>,
}

/// What a generation did: the tokens chosen (one after the prompt, then one per step)
/// and each step's time.
#[derive(Clone, Debug)]
pub struct GenerateReport {
    pub tokens: Vec<i64>,
    pub prefill: Duration,
    /// Each decode step's time, in order.
    pub steps: Vec<Duration>,
}

impl GenerateReport {
    /// The median decode step, in milliseconds.
    pub fn median_ms(&self) -> f64 {
        let mut ms: Vec<f64> = self.steps.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        ms.get(ms.len() / 2).copied().unwrap_or(f64::NAN)
    }

    /// The report as JSON: tokens, prefill and per-step milliseconds.
    pub fn to_json(&self) -> serde_json::Value {
        let ms = |d: &Duration| d.as_secs_f64() * 1e3;
        serde_json::json!({
            "tokens": self.tokens,
            "prefill_ms": ms(&self.prefill),
            "step_ms": self.steps.iter().map(ms).collect::<Vec<_>>(),
            "median_step_ms": self.median_ms(),
        })
    }
}

/// Where a module's decoder inputs are: the ids, the optional mask and positions, and
/// the cache's tensors with the dimension that is the cache's length.
struct Layout {
    ids: DataType,
    mask: Option<DataType>,
    positions: Option<DataType>,
    /// `(name, shape at the largest sizes, dtype, the cache's dimension)`.
    cache: Vec<(String, Vec<i64>, DataType, usize)>,
}

impl Layout {
    fn of(m: &GraphModule) -> Result<Layout, DriverError> {
        let bad = |why: String| DriverError::Request(format!("generate: {why}"));
        let (mut ids, mut mask, mut positions, mut cache) = (None, None, None, Vec::new());
        for (name, ty) in m.inputs() {
            match name {
                "input_ids" => ids = Some(ty.dtype),
                "attention_mask" => mask = Some(ty.dtype),
                "position_ids" => positions = Some(ty.dtype),
                _ => {
                    let dims = m.input_size_dims(name);
                    let [d] = dims else {
                        return Err(bad(format!(
                            "input `{name}` is no cache tensor with one dimension that is the \
                             cache's length (it follows the sizes in {} dimensions)",
                            dims.len()
                        )));
                    };
                    cache.push((name.to_string(), ty.shape.clone(), ty.dtype, d.dim));
                }
            }
        }
        let (Some(ids), false) = (ids, cache.is_empty()) else {
            return Err(bad(
                "the module must take `input_ids` and the cache's tensors (a decoder exported \
                 with its past keys and values)"
                    .into(),
            ));
        };
        let outputs = m.output_types().count();
        if outputs != cache.len() + 1 {
            return Err(bad(format!(
                "the module has {outputs} outputs: logits and one per cache input ({}) expected",
                cache.len()
            )));
        }
        Ok(Layout {
            ids,
            mask,
            positions,
            cache,
        })
    }

    /// Whether the module's ranges take a prompt of `prompt` tokens and `steps` steps:
    /// the prompt as new tokens, then one at a time; an empty cache, and a cache of
    /// every token but the last one's at the last step.
    fn check_fits(&self, m: &GraphModule, prompt: usize, steps: usize) -> Result<(), DriverError> {
        let ranges = m.size_ranges();
        let range_of = |name: &str| {
            m.input_size_dims(name)
                .first()
                .and_then(|d| d.sizes.first())
                .and_then(|&k| ranges.get(k))
        };
        let last = (prompt + steps).saturating_sub(1) as i64;
        let needs = [
            (
                range_of("input_ids"),
                if steps > 0 { 1 } else { prompt as i64 },
                prompt as i64,
                "new tokens",
            ),
            (range_of(&self.cache[0].0), 0, last, "a cache's length"),
        ];
        for (range, lo, hi, what) in needs {
            match range {
                Some(r) if r.min <= lo && hi <= r.max => {}
                Some(r) => {
                    return Err(DriverError::Request(format!(
                        "generate: a prompt of {prompt} tokens and {steps} steps need {what} \
                         in {lo}..{hi}; the module runs {r}: compile it for those"
                    )))
                }
                None if lo == hi => {}
                None => {
                    return Err(DriverError::Request(format!(
                        "generate: a prompt of {prompt} tokens and {steps} steps need {what} \
                         in {lo}..{hi}; the module takes one value: compile it with a range \
                         (`--shape NAME=…,SIZE:MIN..MAX`)"
                    )))
                }
            }
        }
        Ok(())
    }

    /// Sets the inputs of a step over `tokens` whose first `past` are in the cache: the
    /// new ones' ids, the mask (all ones) and their positions.
    fn set_tokens(
        &self,
        m: &mut GraphModule,
        tokens: &[i64],
        past: usize,
    ) -> Result<(), DriverError> {
        let t = tokens.len() - past;
        let ids: Vec<f64> = tokens[past..].iter().map(|&v| v as f64).collect();
        m.set_input("input_ids", &NDArray::from_f64(self.ids, &[1, t], &ids)?)?;
        if let Some(dt) = self.mask {
            let ones = vec![1.0; past + t];
            m.set_input(
                "attention_mask",
                &NDArray::from_f64(dt, &[1, past + t], &ones)?,
            )?;
        }
        if let Some(dt) = self.positions {
            let pos: Vec<f64> = (past..past + t).map(|p| p as f64).collect();
            m.set_input("position_ids", &NDArray::from_f64(dt, &[1, t], &pos)?)?;
        }
        Ok(())
    }
}

impl Toolchain {
    /// Greedy generation of `req.steps` tokens after `req.prompt` from the module file
    /// `req.module` (see the module header).
    pub fn generate(
        &self,
        req: &GenerateRequest,
        events: &mut dyn Events,
    ) -> Result<GenerateReport, DriverError> {
        if req.prompt.is_empty() {
            return Err(DriverError::Request("generate: the prompt is empty".into()));
        }
        let compiled = self.read_module(&req.module, None)?;
        let mut m = self.load(compiled)?;
        let layout = Layout::of(&m)?;
        layout.check_fits(&m, req.prompt.len(), req.steps)?;
        // an empty cache for the prompt; then each step's presents are the next step's
        // pasts, on the device
        for (name, shape, dtype, dim) in &layout.cache {
            let mut s: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
            s[*dim] = 0;
            m.set_input(name, &NDArray::zeros(*dtype, &s)?)?;
        }
        let mut tokens = req.prompt.clone();
        let mut logits: Vec<NDArray> = Vec::new();
        let mut times = Vec::with_capacity(req.steps + 1);
        // the prompt run once untimed: a process's first run starts what kernels keep
        // (threads, pages), which no later run pays
        layout.set_tokens(&mut m, &tokens, 0)?;
        m.run()?;
        let mut past = 0usize;
        for step in 0..=req.steps {
            let t = tokens.len() - past;
            let start = Instant::now();
            layout.set_tokens(&mut m, &tokens, past)?;
            m.run()?;
            let out = m.get_output(0)?;
            if step < req.steps {
                for (k, (name, ..)) in layout.cache.iter().enumerate() {
                    m.set_input_from_output(name, k + 1)?;
                }
            }
            times.push(start.elapsed());
            tokens.push(last_argmax(&out)?);
            if req.save_logits.is_some() {
                logits.push(out);
            }
            past += t;
        }
        if let Some(path) = &req.save_logits {
            let names: Vec<String> = (0..logits.len()).map(|k| format!("step{k:03}")).collect();
            let arrays: Vec<(&str, &NDArray)> =
                names.iter().map(String::as_str).zip(&logits).collect();
            NDArray::save_npz(path, &arrays)?;
            events.out(&format!(
                "wrote {} ({} steps' logits: step000 the prompt's)\n",
                path.display(),
                logits.len()
            ));
        }
        let prefill = times.remove(0);
        Ok(GenerateReport {
            tokens: tokens.split_off(req.prompt.len()),
            prefill,
            steps: times,
        })
    }
}

/// The id of the largest logit at the last position of `[1, seq, vocab]` logits.
fn last_argmax(logits: &NDArray) -> Result<i64, DriverError> {
    let shape = logits.shape();
    let vocab = *shape.last().unwrap_or(&0);
    let values = logits.to_f64_vec();
    if vocab == 0 || values.len() < vocab {
        return Err(DriverError::Request(format!(
            "generate: the first output is {shape:?}, not logits [1, seq, vocab]"
        )));
    }
    let last = &values[values.len() - vocab..];
    let best = (0..vocab)
        .max_by(|&a, &b| last[a].total_cmp(&last[b]).then(b.cmp(&a)))
        .unwrap_or(0);
    Ok(best as i64)
}
