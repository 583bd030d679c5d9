//! The lowering passes' before/after filetests, beside the verifier's (Cranelift's
//! habit): each file of `filetests/passes/` is a function in the printer's text form,
//! a `// pass: NAME [ARG]` line naming the pass of `transform` to run on its body, and
//! after a `// after:` line the function the pass must print, each line behind `// `.
//!
//! Both the input and the pass's output must pass the verifier. A file whose expected
//! text differs fails with both texts; `TESSERA_BLESS=1` writes the pass's output into
//! the file instead (then read the diff before committing it). Every file is checked
//! and the failures are reported together.

mod common;

use std::path::Path;
use tessera_ir::parser::parse_func;
use tessera_ir::transform::{
    auto_unroll, hoist_size_arith, lower_floor_div, split_wide_vectors, unroll_loops,
    unswitch_guards, vectorize_loops,
};
use tessera_ir::verify::verify;
use tessera_ir::Stmt;

const AFTER: &str = "// after:";

/// Runs the pass `name` (with its argument, where it takes one) on `body`.
fn run_pass(name: &str, arg: Option<&str>, body: &Stmt) -> Result<Stmt, String> {
    Ok(match name {
        "unroll_loops" => unroll_loops(body),
        "auto_unroll" => auto_unroll(body),
        "unswitch_guards" => unswitch_guards(body),
        "vectorize_loops" => {
            let (s, refused) = vectorize_loops(body);
            if let Some(r) = refused.first() {
                return Err(format!("not vectorized: {}", r.reason));
            }
            s
        }
        "lower_floor_div" => lower_floor_div(body),
        "hoist_size_arith" => hoist_size_arith(body),
        "split_wide_vectors" => {
            let bytes = arg
                .and_then(|a| a.parse().ok())
                .ok_or("split_wide_vectors takes the register's bytes")?;
            split_wide_vectors(body, bytes)
        }
        other => return Err(format!("unknown pass `{other}`")),
    })
}

/// The pass's output for the file's input, as text.
fn output(text: &str) -> Result<String, String> {
    let input = text.split(AFTER).next().unwrap_or(text);
    let pass = input
        .lines()
        .find_map(|l| l.trim().strip_prefix("// pass:"))
        .ok_or("no `// pass:` line")?;
    let mut words = pass.split_whitespace();
    let name = words.next().ok_or("`// pass:` names no pass")?;
    let mut func = parse_func(input).map_err(|e| format!("read: {e}"))?;
    verify(&func).map_err(|e| format!("the input is refused: {e}"))?;
    func.body = run_pass(name, words.next(), &func.body)?;
    verify(&func).map_err(|e| format!("the pass's output is refused: {e}\n{func}"))?;
    Ok(func.to_string())
}

/// The expected text of a file: the lines after `// after:`, without their `// `.
fn expected(text: &str) -> Option<String> {
    let (_, after) = text.split_once(AFTER)?;
    let lines: Vec<&str> = after
        .lines()
        .skip(1)
        .map(|l| l.strip_prefix("// ").or(l.strip_prefix("//")).unwrap_or(l))
        .collect();
    Some(lines.join("\n") + "\n")
}

/// The failure of one file, if it fails (or, blessing, writes the output into it).
fn check(path: &Path, bless: bool) -> Option<String> {
    let text = std::fs::read_to_string(path).expect("a readable filetest");
    let got = match output(&text) {
        Ok(g) => g,
        Err(e) => return Some(e),
    };
    if bless {
        let input = text.split(AFTER).next().unwrap_or(&text).trim_end();
        let after: Vec<String> = got.lines().map(|l| format!("// {l}")).collect();
        let blessed = format!("{input}\n{AFTER}\n{}\n", after.join("\n"));
        std::fs::write(path, blessed).expect("a writable filetest");
        return None;
    }
    match expected(&text) {
        None => Some(format!("no `{AFTER}` section; the pass prints\n{got}")),
        Some(want) if want.trim_end() == got.trim_end() => None,
        Some(want) => Some(format!("expected\n{want}the pass prints\n{got}")),
    }
}

#[test]
fn pass_filetests() {
    let bless = std::env::var("TESSERA_BLESS").is_ok_and(|v| v == "1");
    let files = common::tir_files("passes");
    assert!(files.len() >= 7, "{} filetests", files.len());
    let failures: Vec<String> = files
        .iter()
        .filter_map(|p| check(p, bless).map(|why| format!("{}: {why}", p.display())))
        .collect();
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}
