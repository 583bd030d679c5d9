//! The verifier's filetests (Cranelift's habit): each file of `filetests/verify/` is a
//! function in the printer's text form with, in a comment, what must happen to it —
//!
//! - `// verify: ok`: it reads and the verifier accepts it;
//! - `// verify: error: MESSAGE`: it reads and the verifier refuses it with MESSAGE;
//! - `// parse: error: MESSAGE`: the reader refuses it with MESSAGE.
//!
//! A file that reads also prints back to text that reads into the same printed form.
//! Every file is checked and the failures are reported together.

mod common;

use std::path::Path;
use tessera_ir::parser::parse_func;
use tessera_ir::verify::verify;

/// What a file expects, from its comment.
enum Expect {
    Ok,
    VerifyError(String),
    ParseError(String),
}

fn expectation(text: &str) -> Option<Expect> {
    text.lines().find_map(|l| {
        let l = l.trim().strip_prefix("//")?.trim();
        if l == "verify: ok" {
            Some(Expect::Ok)
        } else if let Some(m) = l.strip_prefix("verify: error: ") {
            Some(Expect::VerifyError(m.to_string()))
        } else {
            l.strip_prefix("parse: error: ")
                .map(|m| Expect::ParseError(m.to_string()))
        }
    })
}

/// The failure of one file, if it fails.
fn check(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).expect("a readable filetest");
    let Some(expect) = expectation(&text) else {
        return Some("no `// verify:` or `// parse:` line".into());
    };
    let func = match (parse_func(&text), &expect) {
        (Err(e), Expect::ParseError(m)) if e.to_string() == *m => return None,
        (Err(e), _) => return Some(format!("read: {e}")),
        (Ok(_), Expect::ParseError(m)) => return Some(format!("read, expected `{m}`")),
        (Ok(f), _) => f,
    };
    let printed = func.to_string();
    match parse_func(&printed) {
        Ok(again) if again.to_string() == printed => {}
        Ok(again) => return Some(format!("prints\n{printed}and reads back as\n{again}")),
        Err(e) => return Some(format!("its printed form does not read: {e}\n{printed}")),
    }
    match (verify(&func), expect) {
        (Ok(()), Expect::Ok) => None,
        (Err(e), Expect::VerifyError(m)) if e.to_string() == m => None,
        (Err(e), Expect::VerifyError(m)) => Some(format!("refused with `{e}`, expected `{m}`")),
        (Err(e), _) => Some(format!("refused: {e}")),
        (Ok(()), _) => Some("accepted, expected a refusal".into()),
    }
}

#[test]
fn verifier_filetests() {
    let files = common::tir_files("verify");
    assert!(files.len() >= 20, "{} filetests", files.len());
    let failures: Vec<String> = files
        .iter()
        .filter_map(|p| check(p).map(|why| format!("{}: {why}", p.display())))
        .collect();
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
