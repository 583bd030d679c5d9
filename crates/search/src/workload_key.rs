//! Workload keys as people read them. A key has TVM's form `["hash", [shape], …]`
//! (`tessera_graph::Task::workload_key`); tables show its hash's first characters and
//! its shapes, and `tessera records show --workload` takes the whole key or a prefix of
//! its hash.

/// A key's hash and its shapes (`64x512`), if it has TVM's form.
pub fn parts(key: &str) -> Option<(String, Vec<String>)> {
    let v: serde_json::Value = serde_json::from_str(key).ok()?;
    let items = v.as_array()?;
    let hash = items.first()?.as_str()?.to_string();
    let shapes = items[1..]
        .iter()
        .map(|s| match s.as_array() {
            Some(dims) => dims
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("x"),
            None => s.to_string(),
        })
        .collect();
    Some((hash, shapes))
}

/// The first 8 characters of a key's hash, to tell tasks of one name apart.
pub fn hash_prefix(key: &str) -> String {
    match parts(key) {
        Some((hash, _)) => hash.chars().take(8).collect(),
        None => key.trim_start_matches(['[', '"']).chars().take(8).collect(),
    }
}

/// A key for a table: the hash's first 8 characters and the shapes, cut at `width`
/// characters (with `…`).
pub fn short(key: &str, width: usize) -> String {
    let text = match parts(key) {
        Some((hash, shapes)) => {
            let mut s: String = hash.chars().take(8).collect();
            for sh in shapes {
                s.push(' ');
                s.push_str(&sh);
            }
            s
        }
        None => key.to_string(),
    };
    if text.chars().count() > width {
        let cut: String = text.chars().take(width.saturating_sub(1)).collect();
        let mut s = cut.trim_end().to_string();
        s.push('…');
        s
    } else {
        text
    }
}

/// Whether `key` is `wanted`, or its hash starts with `wanted` (not empty).
pub fn matches(key: &str, wanted: &str) -> bool {
    key == wanted
        || (!wanted.is_empty() && parts(key).is_some_and(|(hash, _)| hash.starts_with(wanted)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = r#"["459e0d88d179c70df9b4b6e5b25cb49f", [64, 512], [86, 512, 16]]"#;

    #[test]
    fn a_key_reads_as_its_hash_and_shapes() {
        assert_eq!(short(KEY, 40), "459e0d88 64x512 86x512x16");
        assert_eq!(short(KEY, 12), "459e0d88 64…");
        assert_eq!(hash_prefix(KEY), "459e0d88");
        assert!(matches(KEY, "459e0d"));
        assert!(matches(KEY, KEY));
        assert!(!matches(KEY, ""));
        assert!(!matches(KEY, "59e0"));
        assert_eq!(short("not json", 40), "not json");
    }
}
