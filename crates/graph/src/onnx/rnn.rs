//! The recurrent layers `LSTM`, `GRU` and `RNN` as ONNX defines them (forward, reverse
//! and bidirectional; `sequence_lens` known at import, initial states, peepholes,
//! `clip`, the activation lists, `input_forget`, `linear_before_reset`, both layouts;
//! every output), unrolled over the sequence, whose length the shapes fix:
//!
//! - the input projection of every time step is one dense product, `[S·B, I] · Wᵀ`, with
//!   both biases added once;
//! - each step is a dense product of the previous state with `R` (the same kernel for
//!   every step: one workload key) and the cell's elementwise arithmetic, which reads
//!   each gate's sum from the product and the projection and which fusion makes one
//!   kernel of per state (an LSTM's cell state, then its hidden state);
//! - where a batch element's sequence ends early, its states stop changing and its
//!   outputs are zeros; a reverse direction reads each element's sequence from its own
//!   end (a constant reordering of the time axis).

use super::attrs::NodeCtx;
use super::{Importer, Outputs};
use crate::error::GraphError;
use crate::ir::{Binary, Op, Unary};
use petgraph::stable_graph::NodeIndex;
use tessera_te::ops::{Activation, MathFn};

/// Which cell.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cell {
    Lstm,
    Gru,
    Rnn,
}

impl Cell {
    /// Gates per hidden unit (the rows of `W` are `gates × hidden`).
    fn gates(self) -> i64 {
        match self {
            Cell::Lstm => 4,
            Cell::Gru => 3,
            Cell::Rnn => 1,
        }
    }

    /// The default activation list of one direction.
    fn default_activations(self) -> &'static [&'static str] {
        match self {
            Cell::Lstm => &["Sigmoid", "Tanh", "Tanh"],
            Cell::Gru => &["Sigmoid", "Tanh"],
            Cell::Rnn => &["Tanh"],
        }
    }
}

/// One activation of the node's list, with its parameters.
#[derive(Clone)]
struct Act {
    name: String,
    alpha: Option<f64>,
    beta: Option<f64>,
}

/// The layer being unrolled: the node, its sizes and what each step needs.
struct Layer<'c, 'n> {
    c: &'c NodeCtx<'n>,
    cell: Cell,
    seq: i64,
    batch: i64,
    hidden: i64,
    clip: Option<f64>,
    /// `[batch, 1]` masks, one per step, where sequences may end early.
    masks: Option<Vec<NodeIndex>>,
    /// The sequence lengths as int64 `[1, batch, 1]`, where they may end early.
    lengths: Option<NodeIndex>,
}

impl Layer<'_, '_> {
    fn name(&self, d: usize, what: &str) -> String {
        self.c.sub(&format!("d{d}_{what}"))
    }

    fn slice(
        &self,
        imp: &mut Importer,
        name: &str,
        x: NodeIndex,
        axis: usize,
        from: i64,
        to: i64,
    ) -> Result<NodeIndex, GraphError> {
        self.slice_axes(imp, name, x, &[(axis, from, to)])
    }

    /// `x` sliced along several axes at once, each `(axis, from, to)`.
    fn slice_axes(
        &self,
        imp: &mut Importer,
        name: &str,
        x: NodeIndex,
        ranges: &[(usize, i64, i64)],
    ) -> Result<NodeIndex, GraphError> {
        let shape = imp.shape(x);
        let mut begin = vec![0; shape.len()];
        let mut end = shape.clone();
        for &(axis, from, to) in ranges {
            begin[axis] = from;
            end[axis] = to;
        }
        let op = Op::StridedSlice {
            begin,
            end,
            strides: vec![1; shape.len()],
        };
        imp.op(name, op, &[x])
    }

    /// `act(x)`, clipped first when the node asks.
    fn activate(
        &self,
        imp: &mut Importer,
        name: &str,
        act: &Act,
        x: NodeIndex,
        clip: bool,
    ) -> Result<NodeIndex, GraphError> {
        let x = match (clip, self.clip) {
            (true, Some(cl)) => imp.op(
                &format!("{name}_clip"),
                Op::Clip { min: -cl, max: cl },
                &[x],
            )?,
            _ => x,
        };
        let a = |d: f64| act.alpha.unwrap_or(d);
        let b = |d: f64| act.beta.unwrap_or(d);
        let op = match act.name.as_str() {
            "Sigmoid" => Op::Unary(Unary::Sigmoid),
            "Tanh" => Op::Unary(Unary::Tanh),
            "Relu" => Op::Unary(Unary::Relu),
            "Softsign" => Op::Math(MathFn::Softsign),
            "Softplus" => Op::Math(MathFn::Softplus),
            "LeakyRelu" => Op::Activation(Activation::LeakyRelu { alpha: a(0.01) }),
            "ThresholdedRelu" => Op::Activation(Activation::ThresholdedRelu { alpha: a(1.0) }),
            "Elu" => Op::Activation(Activation::Elu { alpha: a(1.0) }),
            "HardSigmoid" => Op::Activation(Activation::HardSigmoid {
                alpha: a(0.2),
                beta: b(0.5),
            }),
            "Affine" | "ScaledTanh" => {
                let dt = imp.ty(x).dtype;
                let (alpha, beta) = (a(1.0), b(0.0));
                if act.name == "Affine" {
                    let s = imp.scalar(&format!("{name}_alpha"), dt, alpha)?;
                    let o = imp.scalar(&format!("{name}_beta"), dt, beta)?;
                    let m = imp.op(&format!("{name}_scaled"), Op::Binary(Binary::Mul), &[x, s])?;
                    return imp.op(name, Op::Binary(Binary::Add), &[m, o]);
                }
                let s = imp.scalar(&format!("{name}_beta"), dt, b(1.0))?;
                let m = imp.op(&format!("{name}_inner"), Op::Binary(Binary::Mul), &[x, s])?;
                let t = imp.op(&format!("{name}_tanh"), Op::Unary(Unary::Tanh), &[m])?;
                let o = imp.scalar(&format!("{name}_alpha"), dt, alpha)?;
                return imp.op(name, Op::Binary(Binary::Mul), &[t, o]);
            }
            other => {
                return Err(self.c.bad(format!(
                    "activation `{other}` is not defined for recurrent layers"
                )))
            }
        };
        imp.op(name, op, &[x])
    }

    /// `where(mask, new, old)` where sequences end early; `new` elsewhere.
    fn hold(
        &self,
        imp: &mut Importer,
        name: &str,
        step: usize,
        new: NodeIndex,
        old: NodeIndex,
    ) -> Result<NodeIndex, GraphError> {
        match &self.masks {
            Some(m) => imp.op(name, Op::Where, &[m[step], new, old]),
            None => Ok(new),
        }
    }
}

/// The activation list of each direction (the node's, or the cell's defaults), with
/// the alphas and betas handed out in order to those that take them.
fn activations(c: &NodeCtx, cell: Cell, dirs: usize) -> Result<Vec<Vec<Act>>, GraphError> {
    let per = cell.default_activations().len();
    let names: Vec<String> = match c.strings("activations") {
        Some(v) if !v.is_empty() => v,
        _ => (0..dirs)
            .flat_map(|_| cell.default_activations().iter().map(|s| s.to_string()))
            .collect(),
    };
    if names.len() != per * dirs {
        return Err(c.bad(format!(
            "{} activations for {dirs} direction(s) of {per}",
            names.len()
        )));
    }
    let mut alphas = c.floats("activation_alpha").unwrap_or_default().into_iter();
    let mut betas = c.floats("activation_beta").unwrap_or_default().into_iter();
    let mut out = Vec::new();
    for chunk in names.chunks(per) {
        let mut acts = Vec::new();
        for n in chunk {
            let takes_alpha = matches!(
                n.as_str(),
                "LeakyRelu" | "ThresholdedRelu" | "Elu" | "HardSigmoid" | "Affine" | "ScaledTanh"
            );
            let takes_beta = matches!(n.as_str(), "HardSigmoid" | "Affine" | "ScaledTanh");
            acts.push(Act {
                name: n.clone(),
                alpha: takes_alpha.then(|| alphas.next().map(f64::from)).flatten(),
                beta: takes_beta.then(|| betas.next().map(f64::from)).flatten(),
            });
        }
        out.push(acts);
    }
    Ok(out)
}

/// The projection of every time step of direction `d`: `[S, B, gates·H]`, both
/// biases added (and, for a reverse direction, the time axis read from each
/// sequence's end).
fn project_inputs(
    imp: &mut Importer,
    l: &Layer,
    x: NodeIndex,
    d: usize,
    reverse: bool,
) -> Result<NodeIndex, GraphError> {
    let c = l.c;
    let gh = l.cell.gates() * l.hidden;
    let w = l.slice(imp, &l.name(d, "w"), c.input(1)?, 0, d as i64, d as i64 + 1)?;
    let w = imp.reshape(&l.name(d, "w2"), w, vec![gh, imp.shape(x)[2]])?;
    let rows = imp.reshape(&l.name(d, "x2"), x, vec![l.seq * l.batch, imp.shape(x)[2]])?;
    let mut p = imp.op(&l.name(d, "x_proj"), Op::Dense, &[rows, w])?;
    if let Some(b) = c.opt(3) {
        let b = l.slice(imp, &l.name(d, "b"), b, 0, d as i64, d as i64 + 1)?;
        let b = imp.reshape(&l.name(d, "b2"), b, vec![2, gh])?;
        let wb = l.slice(imp, &l.name(d, "wb"), b, 0, 0, 1)?;
        let rb = l.slice(imp, &l.name(d, "rb"), b, 0, 1, 2)?;
        // GRU's recurrent bias of the candidate gate stays with the recurrent product
        // under linear_before_reset; every other bias folds into the projection
        let rb = if l.cell == Cell::Gru {
            let zr = l.slice(imp, &l.name(d, "rb_zr"), rb, 1, 0, 2 * l.hidden)?;
            let bdt = imp.ty(rb).dtype;
            let zero = imp.filled(&l.name(d, "rb_h0"), bdt, &[1, l.hidden], 0.0)?;
            let lbr = c.int("linear_before_reset", 0) != 0;
            let h = if lbr {
                zero
            } else {
                l.slice(imp, &l.name(d, "rb_h"), rb, 1, 2 * l.hidden, gh)?
            };
            imp.op(&l.name(d, "rb_folded"), Op::Concat { axis: 1 }, &[zr, h])?
        } else {
            rb
        };
        let bias = imp.op(&l.name(d, "bias"), Op::Binary(Binary::Add), &[wb, rb])?;
        p = imp.op(&l.name(d, "x_proj_b"), Op::Binary(Binary::Add), &[p, bias])?;
    }
    let p = imp.reshape(&l.name(d, "x_proj3"), p, vec![l.seq, l.batch, gh])?;
    // where sequences may end early, step k of a reverse direction reads time
    // len[b] - 1 - k of batch element b (else the steps just walk the time axis back)
    match l.lengths.filter(|_| reverse) {
        Some(lens) => {
            let idx = reverse_index(imp, l, lens, d, gh, "reverse_index", false)?;
            imp.op(
                &l.name(d, "x_rev"),
                Op::GatherElements { axis: 0 },
                &[p, idx],
            )
        }
        None => Ok(p),
    }
}

/// The `[S, B, width]` time index of each sequence read from its end: at step `k`,
/// `max(len - 1 - k, 0)`; with `keep_tail`, `k` itself from `len` on (the positions past
/// a sequence's end stay in place).
fn reverse_index(
    imp: &mut Importer,
    l: &Layer,
    lens: NodeIndex,
    d: usize,
    width: i64,
    tag: &str,
    keep_tail: bool,
) -> Result<NodeIndex, GraphError> {
    let i64t = tessera_ir::DataType::int64();
    let steps: Vec<i64> = (0..l.seq).collect();
    let k = imp.int_const(
        &l.name(d, &format!("{tag}_steps")),
        &[l.seq as usize, 1, 1],
        &steps,
    )?;
    let one = imp.scalar(&l.name(d, &format!("{tag}_one")), i64t, 1.0)?;
    let zero = imp.scalar(&l.name(d, &format!("{tag}_zero")), i64t, 0.0)?;
    let last = imp.op(
        &l.name(d, &format!("{tag}_last")),
        Op::Binary(Binary::Sub),
        &[lens, one],
    )?;
    let back = imp.op(
        &l.name(d, &format!("{tag}_back")),
        Op::Binary(Binary::Sub),
        &[last, k],
    )?;
    let idx = if keep_tail {
        let inside = imp.op(
            &l.name(d, &format!("{tag}_inside")),
            Op::BinaryFn(tessera_te::ops::BinaryFn::Less),
            &[k, lens],
        )?;
        imp.op(
            &l.name(d, &format!("{tag}_pick")),
            Op::Where,
            &[inside, back, k],
        )?
    } else {
        imp.op(
            &l.name(d, &format!("{tag}_clamped")),
            Op::Binary(Binary::Max),
            &[back, zero],
        )?
    };
    let shape = vec![l.seq, l.batch, width];
    imp.op(&l.name(d, tag), Op::BroadcastTo { shape }, &[idx])
}

/// The initial state `input k` of direction `d` as `[B, H]` (zeros when absent).
fn initial(
    imp: &mut Importer,
    l: &Layer,
    k: usize,
    d: usize,
    dt: tessera_ir::DataType,
    layout1: bool,
) -> Result<NodeIndex, GraphError> {
    match l.c.opt(k) {
        Some(h) => {
            let axis = if layout1 { 1 } else { 0 };
            let h = l.slice(
                imp,
                &l.name(d, &format!("init{k}")),
                h,
                axis,
                d as i64,
                d as i64 + 1,
            )?;
            imp.reshape(
                &l.name(d, &format!("init{k}_2d")),
                h,
                vec![l.batch, l.hidden],
            )
        }
        None => imp.filled(
            &l.name(d, &format!("zero{k}")),
            dt,
            &[l.batch, l.hidden],
            0.0,
        ),
    }
}

/// One direction: the hidden state of every step (in time order) and the last states.
fn direction(
    imp: &mut Importer,
    l: &Layer,
    x: NodeIndex,
    d: usize,
    reverse: bool,
    acts: &[Act],
    layout1: bool,
) -> Result<(Vec<NodeIndex>, NodeIndex, Option<NodeIndex>), GraphError> {
    let c = l.c;
    let dt = imp.ty(x).dtype;
    let h_ = l.hidden;
    let gh = l.cell.gates() * h_;
    let proj = project_inputs(imp, l, x, d, reverse)?;
    let r = l.slice(imp, &l.name(d, "r"), c.input(2)?, 0, d as i64, d as i64 + 1)?;
    let r = imp.reshape(&l.name(d, "r2"), r, vec![gh, h_])?;
    let mut h = initial(imp, l, 5, d, dt, layout1)?;
    let mut cstate = match l.cell {
        Cell::Lstm => Some(initial(imp, l, 6, d, dt, layout1)?),
        _ => None,
    };
    // peepholes [3H]: input, output, forget
    let peep = match (l.cell, c.opt(7)) {
        (Cell::Lstm, Some(p)) => {
            let p = l.slice(imp, &l.name(d, "p"), p, 0, d as i64, d as i64 + 1)?;
            let p = imp.reshape(&l.name(d, "p2"), p, vec![3, 1, h_])?;
            let part = |imp: &mut Importer, k: i64, tag: &str| -> Result<NodeIndex, GraphError> {
                let s = l.slice(imp, &l.name(d, tag), p, 0, k, k + 1)?;
                imp.reshape(&l.name(d, &format!("{tag}_2d")), s, vec![1, h_])
            };
            Some([
                part(imp, 0, "p_i")?,
                part(imp, 1, "p_o")?,
                part(imp, 2, "p_f")?,
            ])
        }
        _ => None,
    };
    let gru_rh = match (l.cell, c.opt(3)) {
        (Cell::Gru, Some(b)) if c.int("linear_before_reset", 0) != 0 => {
            let b = l.slice(imp, &l.name(d, "gb"), b, 0, d as i64, d as i64 + 1)?;
            let b = imp.reshape(&l.name(d, "gb2"), b, vec![1, 2 * gh])?;
            Some(l.slice(imp, &l.name(d, "rbh"), b, 1, gh + 2 * h_, 2 * gh)?)
        }
        _ => None,
    };
    // GRU's recurrent weights split once per direction (a slice per step would be a
    // constant per step: the weights copied S times). With `linear_before_reset` one
    // product per step computes all three gates' recurrent terms.
    let gru_split = match l.cell {
        Cell::Gru if c.int("linear_before_reset", 0) == 0 => Some((
            l.slice(imp, &l.name(d, "r_zr"), r, 0, 0, 2 * h_)?,
            l.slice(imp, &l.name(d, "r_h"), r, 0, 2 * h_, 3 * h_)?,
        )),
        _ => None,
    };
    let mut ys = vec![NodeIndex::end(); l.seq as usize];
    for k in 0..l.seq as usize {
        // step k of a reverse direction is time S - 1 - k; where sequences end early the
        // projection is already in each sequence's reverse order (`project_inputs`)
        let t = if reverse && l.lengths.is_none() {
            l.seq as usize - 1 - k
        } else {
            k
        };
        let n = |what: &str| l.name(d, &format!("t{k}_{what}"));
        let xt = StepInput { proj, t: t as i64 };
        let w = Weights {
            r,
            gru_split,
            peep,
            gru_rh,
            acts,
        };
        let (h_new, c_new) = cell_step(imp, l, &n, &w, &xt, h, cstate)?;
        h = l.hold(imp, &n("h_held"), k, h_new, h)?;
        if let (Some(cn), Some(cp)) = (c_new, cstate) {
            cstate = Some(l.hold(imp, &n("c_held"), k, cn, cp)?);
        }
        let y = match &l.masks {
            Some(m) => {
                let zero = imp.scalar(&n("y_zero"), dt, 0.0)?;
                imp.op(&n("y"), Op::Where, &[m[k], h_new, zero])?
            }
            None => h_new,
        };
        ys[t] = y;
    }
    if let Some(lens) = l.lengths.filter(|_| reverse) {
        // back to time order: the same per-sequence reversal
        let stacked = stack(imp, l, &ys, d, "y_rev")?;
        let idx = reverse_index(imp, l, lens, d, h_, "y_reverse_index", true)?;
        let y = imp.op(
            &l.name(d, "y_time"),
            Op::GatherElements { axis: 0 },
            &[stacked, idx],
        )?;
        let mut out = Vec::new();
        for k in 0..l.seq {
            let s = l.slice(imp, &l.name(d, &format!("y{k}")), y, 0, k, k + 1)?;
            out.push(imp.reshape(&l.name(d, &format!("y{k}_2d")), s, vec![l.batch, h_])?);
        }
        ys = out;
    }
    Ok((ys, h, cstate))
}

/// The input projection `[S, B, gates·H]` at one time step. Each use slices the columns
/// it reads straight from the projection (one strided slice and a reshape, which fuse
/// into the reader): a step's `[B, gates·H]` taken first would be read by every gate,
/// so it would be a copy of its own per step.
struct StepInput {
    proj: NodeIndex,
    t: i64,
}

impl StepInput {
    /// Columns `from..to` of the step's projection, `[B, to - from]`.
    fn cols(
        &self,
        imp: &mut Importer,
        l: &Layer,
        name: &str,
        from: i64,
        to: i64,
    ) -> Result<NodeIndex, GraphError> {
        let ranges = [(0, self.t, self.t + 1), (2, from, to)];
        let s = l.slice_axes(imp, name, self.proj, &ranges)?;
        imp.reshape(&format!("{name}_2d"), s, vec![l.batch, to - from])
    }
}

/// What every step of one direction reads: the recurrent weights `[gates·H, H]` (for a
/// GRU without `linear_before_reset`, split into the update and reset gates' `[2H, H]`
/// and the candidate's `[H, H]`), the peepholes (input, output, forget), GRU's recurrent
/// candidate bias under `linear_before_reset`, and the activations.
struct Weights<'a> {
    r: NodeIndex,
    gru_split: Option<(NodeIndex, NodeIndex)>,
    peep: Option<[NodeIndex; 3]>,
    gru_rh: Option<NodeIndex>,
    acts: &'a [Act],
}

/// One step of the cell: the new hidden state (and cell state, for an LSTM) from the
/// step's input projection `xt` `[B, gates·H]` and the previous states.
fn cell_step(
    imp: &mut Importer,
    l: &Layer,
    n: &dyn Fn(&str) -> String,
    w: &Weights,
    xt: &StepInput,
    h: NodeIndex,
    cstate: Option<NodeIndex>,
) -> Result<(NodeIndex, Option<NodeIndex>), GraphError> {
    let (c, h_, acts, r, peep, gru_rh) = (l.c, l.hidden, w.acts, w.r, w.peep, w.gru_rh);
    let dt = imp.ty(xt.proj).dtype;
    let gh = l.cell.gates() * h_;
    let gate = |imp: &mut Importer, v: NodeIndex, g: i64, tag: &str| {
        l.slice(imp, &n(tag), v, 1, g * h_, (g + 1) * h_)
    };
    let add = |imp: &mut Importer, tag: &str, a: NodeIndex, b: NodeIndex| {
        imp.op(&n(tag), Op::Binary(Binary::Add), &[a, b])
    };
    let mul = |imp: &mut Importer, tag: &str, a: NodeIndex, b: NodeIndex| {
        imp.op(&n(tag), Op::Binary(Binary::Mul), &[a, b])
    };
    // gate g's sum of the step's projection and the recurrent product `rec`, each read
    // in the cell's kernel: one sum of every gate would be read by each gate, a kernel
    // of its own per step; the product's epilogue would read the projection at an offset
    // of the step's own, so the product stays a plain dense, one kernel for every step
    let sum = |imp: &mut Importer, rec: NodeIndex, g: i64, tag: &str| {
        let a = xt.cols(imp, l, &n(&format!("{tag}_x")), g * h_, (g + 1) * h_)?;
        let b = gate(imp, rec, g, &format!("{tag}_r"))?;
        add(imp, tag, a, b)
    };
    Ok(match l.cell {
        Cell::Rnn => {
            let rec = imp.op(&n("rec"), Op::Dense, &[h, r])?;
            let x = xt.cols(imp, l, &n("x"), 0, gh)?;
            let s = add(imp, "sum", x, rec)?;
            (l.activate(imp, &n("h"), &acts[0], s, true)?, None)
        }
        Cell::Lstm => {
            let rec = imp.op(&n("rec"), Op::Dense, &[h, r])?;
            let sum = |imp: &mut Importer, g: i64, tag: &str| sum(imp, rec, g, tag);
            let cprev = cstate.expect("an LSTM has a cell state");
            let (mut si, mut so, mut sf) =
                (sum(imp, 0, "gi")?, sum(imp, 1, "go")?, sum(imp, 2, "gf")?);
            let sc = sum(imp, 3, "gc")?;
            if let Some([pi, _, pf]) = peep {
                let a = mul(imp, "pi", pi, cprev)?;
                si = add(imp, "gi_p", si, a)?;
                let b = mul(imp, "pf", pf, cprev)?;
                sf = add(imp, "gf_p", sf, b)?;
            }
            let i = l.activate(imp, &n("i"), &acts[0], si, true)?;
            let f = if c.int("input_forget", 0) != 0 {
                let one = imp.scalar(&n("one"), dt, 1.0)?;
                imp.op(&n("f"), Op::Binary(Binary::Sub), &[one, i])?
            } else {
                l.activate(imp, &n("f"), &acts[0], sf, true)?
            };
            let g = l.activate(imp, &n("g"), &acts[1], sc, true)?;
            let fc = mul(imp, "fc", f, cprev)?;
            let ig = mul(imp, "ig", i, g)?;
            let cnew = add(imp, "c", fc, ig)?;
            if let Some([_, po, _]) = peep {
                let a = mul(imp, "po", po, cnew)?;
                so = add(imp, "go_p", so, a)?;
            }
            let o = l.activate(imp, &n("o"), &acts[0], so, true)?;
            let hc = l.activate(imp, &n("hc"), &acts[2], cnew, false)?;
            (mul(imp, "h", o, hc)?, Some(cnew))
        }
        Cell::Gru => {
            // the recurrent terms of the update and reset gates, and under
            // `linear_before_reset` the candidate's from the same product
            let rec = match w.gru_split {
                Some((rz, _)) => imp.op(&n("rec"), Op::Dense, &[h, rz])?,
                None => imp.op(&n("rec"), Op::Dense, &[h, r])?,
            };
            let (sz, sr) = (sum(imp, rec, 0, "gz")?, sum(imp, rec, 1, "gr")?);
            let z = l.activate(imp, &n("z"), &acts[0], sz, true)?;
            let rg = l.activate(imp, &n("r"), &acts[0], sr, true)?;
            let xh = xt.cols(imp, l, &n("x_h"), 2 * h_, 3 * h_)?;
            let hh = match w.gru_split {
                Some((_, rh)) => {
                    let rhp = mul(imp, "reset", rg, h)?;
                    imp.op(&n("rec_h"), Op::Dense, &[rhp, rh])?
                }
                None => {
                    let mut lin = gate(imp, rec, 2, "rec_h")?;
                    if let Some(b) = gru_rh {
                        lin = add(imp, "rec_hb", lin, b)?;
                    }
                    mul(imp, "reset", rg, lin)?
                }
            };
            let sh = add(imp, "sum_h", xh, hh)?;
            let cand = l.activate(imp, &n("cand"), &acts[1], sh, true)?;
            // (1 - z) · cand + z · h = cand + z · (h - cand)
            let diff = imp.op(&n("diff"), Op::Binary(Binary::Sub), &[h, cand])?;
            let zd = mul(imp, "zd", z, diff)?;
            (add(imp, "h", cand, zd)?, None)
        }
    })
}

/// `[B, H]` values stacked into `[S, B, H]`: concatenated as they are (`[S·B, H]`), then
/// reshaped once. (Each reshaped to `[1, B, H]` first, a step's hidden state — which the
/// next step's product also reads — was copied by a kernel of its own per step.)
fn stack(
    imp: &mut Importer,
    l: &Layer,
    ys: &[NodeIndex],
    d: usize,
    tag: &str,
) -> Result<NodeIndex, GraphError> {
    let rows = match ys {
        [one] => *one,
        _ => imp.op(&l.name(d, tag), Op::Concat { axis: 0 }, ys)?,
    };
    imp.reshape(
        &l.name(d, &format!("{tag}_3d")),
        rows,
        vec![ys.len() as i64, l.batch, l.hidden],
    )
}

/// `LSTM`, `GRU` and `RNN`.
pub(super) fn recurrent(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let cell = match c.op {
        "LSTM" => Cell::Lstm,
        "GRU" => Cell::Gru,
        _ => Cell::Rnn,
    };
    let layout1 = c.int("layout", 0) != 0;
    let mut x = c.input(0)?;
    let xs = imp.shape(x);
    if xs.len() != 3 {
        return Err(c.bad(format!("the input has shape {xs:?}, needs 3 dimensions")));
    }
    if layout1 {
        x = imp.op(
            &c.sub("x_seq_first"),
            Op::Transpose {
                axes: vec![1, 0, 2],
            },
            &[x],
        )?;
    }
    let (seq, batch) = (imp.shape(x)[0], imp.shape(x)[1]);
    let dirs_name = c.string("direction").unwrap_or_else(|| "forward".into());
    let dirs: Vec<bool> = match dirs_name.as_str() {
        "forward" => vec![false],
        "reverse" => vec![true],
        "bidirectional" => vec![false, true],
        other => return Err(c.bad(format!("direction `{other}` is not defined"))),
    };
    let ws = imp.shape(c.input(1)?);
    let hidden = match c.has("hidden_size") {
        true => c.int("hidden_size", 0),
        false => ws.get(1).copied().unwrap_or(0) / cell.gates(),
    };
    if hidden < 1 || ws.len() != 3 || ws[0] != dirs.len() as i64 || ws[1] != cell.gates() * hidden {
        return Err(c.bad(format!(
            "W of shape {ws:?} does not fit {} direction(s) of {} gates × hidden size {hidden}",
            dirs.len(),
            cell.gates()
        )));
    }
    // sequence_lens, unless known to be the full length everywhere
    let lengths = match c.opt(4) {
        Some(n) => match imp.ints_of(n) {
            Some(v) if v.len() != batch as usize || v.iter().any(|&l| l < 0 || l > seq) => {
                return Err(c.bad(format!(
                    "sequence_lens {v:?} do not fit {batch} sequences of {seq}"
                )))
            }
            Some(v) if v.iter().all(|&l| l == seq) => None,
            _ => {
                let i64t = tessera_ir::DataType::int64();
                let n = imp.op(&c.sub("lens_i64"), Op::Cast { dtype: i64t }, &[n])?;
                Some(imp.reshape(&c.sub("lens"), n, vec![1, batch, 1])?)
            }
        },
        None => None,
    };
    let masks = match lengths {
        Some(lens) => {
            let lens2 = imp.reshape(&c.sub("lens_2d"), lens, vec![batch, 1])?;
            let mut m = Vec::with_capacity(seq as usize);
            for k in 0..seq {
                let step = imp.scalar(
                    &c.sub(&format!("step{k}")),
                    tessera_ir::DataType::int64(),
                    k as f64,
                )?;
                let less = Op::BinaryFn(tessera_te::ops::BinaryFn::Less);
                m.push(imp.op(&c.sub(&format!("mask{k}")), less, &[step, lens2])?);
            }
            Some(m)
        }
        None => None,
    };
    let layer = Layer {
        c,
        cell,
        seq,
        batch,
        hidden,
        clip: c.has("clip").then(|| c.float("clip", 0.0) as f64),
        masks,
        lengths,
    };
    let acts = activations(c, cell, dirs.len())?;
    let mut ys = Vec::new();
    let mut hs = Vec::new();
    let mut cs = Vec::new();
    for (d, &reverse) in dirs.iter().enumerate() {
        let (y, h, cst) = direction(imp, &layer, x, d, reverse, &acts[d], layout1)?;
        // [S, 1, B, H]
        let s = stack(imp, &layer, &y, d, "y_stack")?;
        ys.push(imp.reshape(&layer.name(d, "y4"), s, vec![seq, 1, batch, hidden])?);
        hs.push(imp.reshape(&layer.name(d, "h3"), h, vec![1, batch, hidden])?);
        if let Some(cst) = cst {
            cs.push(imp.reshape(&layer.name(d, "c3"), cst, vec![1, batch, hidden])?);
        }
    }
    let cat = |imp: &mut Importer, name: &str, v: &[NodeIndex], axis: i64| {
        if v.len() == 1 {
            Ok(v[0])
        } else {
            imp.op(name, Op::Concat { axis }, v)
        }
    };
    let mut y = cat(imp, &c.sub("y"), &ys, 1)?;
    let mut yh = cat(imp, &c.sub("y_h"), &hs, 0)?;
    let mut yc = if cs.is_empty() {
        None
    } else {
        Some(cat(imp, &c.sub("y_c"), &cs, 0)?)
    };
    if layout1 {
        // Y [B, S, dirs, H]; Y_h, Y_c [B, dirs, H]
        y = imp.op(
            &c.sub("y_batch_first"),
            Op::Transpose {
                axes: vec![2, 0, 1, 3],
            },
            &[y],
        )?;
        yh = imp.op(
            &c.sub("y_h_batch_first"),
            Op::Transpose {
                axes: vec![1, 0, 2],
            },
            &[yh],
        )?;
        if let Some(v) = yc {
            yc = Some(imp.op(
                &c.sub("y_c_batch_first"),
                Op::Transpose {
                    axes: vec![1, 0, 2],
                },
                &[v],
            )?);
        }
    }
    let mut outs = vec![y, yh];
    if let Some(v) = yc {
        outs.push(v);
    }
    Ok(outs)
}
