//! Targets, parsed from the strings users write: `cpu`, `cpu -mcpu=native -num-cores=2`,
//! `cuda -arch=sm_90`, `opencl -device=mali`, `vta`.

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// The kind of device a target compiles for: `cpu` (built in), or any kind a backend
/// plugin provides. The set is open: `cuda`, `opencl`, `vta` and a vendor's own kind are
/// all plugin kinds, equal in every way to `cpu` once their plugin is loaded.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TargetKind(Cow<'static, str>);

/// A kind the core documents (its options and their meaning), whether or not a backend
/// for it is loaded.
struct KnownKind {
    name: &'static str,
    options: &'static [(&'static str, &'static str)],
}

const KNOWN: &[KnownKind] = &[
    KnownKind {
        name: "cpu",
        options: &[
            (
                "mcpu",
                "the CPU to compile for, passed to the C compiler as -march (default: native)",
            ),
            (
                "num-cores",
                "threads for parallel loops (default: the cores of this machine)",
            ),
        ],
    },
    KnownKind {
        name: "cuda",
        options: &[
            ("arch", "the GPU architecture, e.g. sm_80, sm_90"),
            ("max-threads-per-block", "threads per block limit"),
        ],
    },
    KnownKind {
        name: "opencl",
        options: &[
            ("device", "the device family, e.g. mali"),
            (
                "model",
                "the board or GPU model, e.g. rk3399 (informational)",
            ),
            ("max-threads-per-block", "threads per block limit"),
            (
                "max-shared-memory-per-block",
                "shared (__local) memory per block limit, in bytes",
            ),
            (
                "platform",
                "the platform, by a part of its name or vendor, e.g. NVIDIA, pocl",
            ),
            (
                "device-index",
                "the device among the matching platforms' devices, from 0",
            ),
        ],
    },
    KnownKind {
        name: "vta",
        options: &[(
            "config",
            "a vta_config.json (the default: 1x16_i8w8a32_15_15_18_17)",
        )],
    },
];

impl TargetKind {
    /// The host CPU, built into the core.
    pub const CPU: TargetKind = TargetKind(Cow::Borrowed("cpu"));
    pub const CUDA: TargetKind = TargetKind(Cow::Borrowed("cuda"));
    pub const OPENCL: TargetKind = TargetKind(Cow::Borrowed("opencl"));

    /// A kind by name (`llvm` is the CPU, as in TVM).
    pub fn new(name: &str) -> TargetKind {
        match name {
            "cpu" | "llvm" => TargetKind::CPU,
            "cuda" => TargetKind::CUDA,
            "opencl" => TargetKind::OPENCL,
            other => TargetKind(Cow::Owned(other.to_string())),
        }
    }

    pub fn name(&self) -> &str {
        &self.0
    }

    /// Whether this is the host CPU (the only kind without a plugin).
    pub fn is_cpu(&self) -> bool {
        self.0 == "cpu"
    }

    /// The options the core documents for this kind, with a word on each; `None` for a
    /// kind only a plugin knows (the plugin owns its options).
    pub fn known_options(&self) -> Option<&'static [(&'static str, &'static str)]> {
        KNOWN.iter().find(|k| k.name == self.0).map(|k| k.options)
    }

    /// The kinds the core documents.
    pub fn documented() -> Vec<TargetKind> {
        KNOWN.iter().map(|k| TargetKind::new(k.name)).collect()
    }
}

impl fmt::Display for TargetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A compilation target: a kind and its options.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Target {
    pub kind: TargetKind,
    pub options: BTreeMap<String, String>,
}

/// A target string that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("empty target string (known kinds: {})", known_kinds())]
    Empty,
    #[error("unknown target kind `{kind}` (known kinds: {})", known_kinds())]
    UnknownKind { kind: String },
    #[error("target `{kind}`: unknown option `{option}` (known: {known})")]
    UnknownOption {
        kind: String,
        option: String,
        known: String,
    },
    #[error("target `{kind}`: option `{option}` must be written -{option}=VALUE, got `{text}`")]
    Malformed {
        kind: String,
        option: String,
        text: String,
    },
    #[error("target `{kind}`: option `{option}`: {reason}")]
    BadValue {
        kind: String,
        option: String,
        reason: String,
    },
}

fn known_kinds() -> String {
    let mut v: Vec<&str> = KNOWN.iter().map(|k| k.name).collect();
    v.push("llvm (= cpu)");
    v.push("or a kind a loaded backend plugin provides");
    v.join(", ")
}

impl Target {
    /// The host CPU with default options.
    pub fn cpu() -> Target {
        Target {
            kind: TargetKind::CPU,
            options: BTreeMap::new(),
        }
    }

    pub fn option(&self, key: &str) -> Option<&str> {
        self.options.get(key).map(|s| s.as_str())
    }

    /// `-num-cores`, when given.
    pub fn num_cores(&self) -> Option<usize> {
        self.option("num-cores").and_then(|v| v.parse().ok())
    }
}

impl FromStr for Target {
    type Err = TargetError;

    fn from_str(s: &str) -> Result<Target, TargetError> {
        Target::parse_with(s, &[])
    }
}

impl Target {
    /// Parses a target string where `plugin_kinds` (the kinds loaded plugins provide) are
    /// known too. The core checks the options of the kinds it documents; a plugin kind's
    /// options are passed on unchecked: the plugin owns them. A documented kind that a
    /// plugin also provides is checked by the plugin, not here.
    pub fn parse_with(s: &str, plugin_kinds: &[String]) -> Result<Target, TargetError> {
        let mut words = s.split_whitespace();
        let kind_word = words.next().ok_or(TargetError::Empty)?;
        let kind = TargetKind::new(kind_word);
        let by_plugin = plugin_kinds.iter().any(|k| k == kind.name());
        let checked = if by_plugin {
            None
        } else {
            kind.known_options()
        };
        if checked.is_none() && !by_plugin {
            return Err(TargetError::UnknownKind {
                kind: kind_word.to_string(),
            });
        }
        Target::parse_options(kind, words, checked)
    }

    /// Parses a target string of any kind, checking only the options of the kinds the
    /// core documents: for targets read back from files the core wrote (records, jobs).
    pub fn parse_any(s: &str) -> Result<Target, TargetError> {
        let mut words = s.split_whitespace();
        let kind = TargetKind::new(words.next().ok_or(TargetError::Empty)?);
        let checked = kind.known_options();
        Target::parse_options(kind, words, checked)
    }

    fn parse_options<'a>(
        kind: TargetKind,
        words: impl Iterator<Item = &'a str>,
        known: Option<&[(&str, &str)]>,
    ) -> Result<Target, TargetError> {
        let mut options = BTreeMap::new();
        for w in words {
            let kname = kind.name().to_string();
            let body = w.strip_prefix('-').ok_or_else(|| TargetError::Malformed {
                kind: kname.clone(),
                option: w.to_string(),
                text: w.to_string(),
            })?;
            let (key, value) = body.split_once('=').ok_or_else(|| TargetError::Malformed {
                kind: kname.clone(),
                option: body.to_string(),
                text: w.to_string(),
            })?;
            if let Some(known) = known {
                if !known.iter().any(|(k, _)| *k == key) {
                    let names: Vec<&str> = known.iter().map(|(k, _)| *k).collect();
                    let known = if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    };
                    return Err(TargetError::UnknownOption {
                        kind: kname,
                        option: key.to_string(),
                        known,
                    });
                }
            }
            if value.is_empty() {
                return Err(TargetError::BadValue {
                    kind: kname,
                    option: key.to_string(),
                    reason: "the value is empty".into(),
                });
            }
            if key == "num-cores" || key == "max-threads-per-block" {
                match value.parse::<usize>() {
                    Ok(n) if n > 0 => {}
                    _ => {
                        return Err(TargetError::BadValue {
                            kind: kname,
                            option: key.to_string(),
                            reason: format!("`{value}` is not a positive integer"),
                        })
                    }
                }
            }
            options.insert(key.to_string(), value.to_string());
        }
        Ok(Target { kind, options })
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind.name())?;
        for (k, v) in &self.options {
            write!(f, " -{k}={v}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_users_write() {
        for s in [
            "cpu",
            "cpu -mcpu=native -num-cores=2",
            "cuda",
            "cuda -arch=sm_90",
            "opencl -device=mali",
            "vta",
        ] {
            let t: Target = s.parse().unwrap();
            let again: Target = t.to_string().parse().unwrap();
            assert_eq!(t, again, "{s}");
        }
        let t: Target = "llvm -num-cores=4".parse().unwrap();
        assert_eq!(t.kind, TargetKind::CPU);
        assert_eq!(t.num_cores(), Some(4));
    }

    #[test]
    fn errors_list_what_is_known() {
        let e = "tpu".parse::<Target>().unwrap_err().to_string();
        assert!(
            e.contains("unknown target kind `tpu`") && e.contains("cpu, cuda, opencl, vta"),
            "{e}"
        );
        let e = "cpu -arch=sm_90".parse::<Target>().unwrap_err().to_string();
        assert!(
            e.contains("unknown option `arch`") && e.contains("mcpu, num-cores"),
            "{e}"
        );
        assert!(matches!(
            "cpu mcpu=native".parse::<Target>(),
            Err(TargetError::Malformed { .. })
        ));
        assert!(matches!(
            "cpu -num-cores=0".parse::<Target>(),
            Err(TargetError::BadValue { .. })
        ));
        assert!(matches!(
            "cpu -num-cores=two".parse::<Target>(),
            Err(TargetError::BadValue { .. })
        ));
        assert!(matches!("".parse::<Target>(), Err(TargetError::Empty)));
        assert!(matches!(
            "vta -x=1".parse::<Target>(),
            Err(TargetError::UnknownOption { .. })
        ));
    }
}

#[cfg(test)]
mod plugin_kind_tests {
    use super::*;

    #[test]
    fn plugin_kinds_parse_only_when_a_plugin_provides_them() {
        assert!(matches!(
            "testdev".parse::<Target>(),
            Err(TargetError::UnknownKind { .. })
        ));
        let t = Target::parse_with("testdev -lanes=8", &["testdev".to_string()]).unwrap();
        assert_eq!((t.kind.name(), t.option("lanes")), ("testdev", Some("8")));
        assert_eq!(t.to_string(), "testdev -lanes=8");
        assert!(matches!(
            Target::parse_with("cpu -lanes=8", &["testdev".to_string()]),
            Err(TargetError::UnknownOption { .. })
        ));
    }
}
