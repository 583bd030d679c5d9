//! Targets, parsed from the strings users write: `cpu`, `cpu -mcpu=native -num-cores=2`,
//! `cuda -arch=sm_90`, `opencl -device=mali`, `vta`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// The kind of device a target compiles for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum TargetKind {
    Cpu,
    Cuda,
    OpenCl,
    Vta,
    /// A kind only a plugin knows; its name is `Target::plugin`.
    Plugin,
}

impl TargetKind {
    /// The kinds the core knows.
    pub const ALL: [TargetKind; 4] = [
        TargetKind::Cpu,
        TargetKind::Cuda,
        TargetKind::OpenCl,
        TargetKind::Vta,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TargetKind::Cpu => "cpu",
            TargetKind::Cuda => "cuda",
            TargetKind::OpenCl => "opencl",
            TargetKind::Vta => "vta",
            TargetKind::Plugin => "plugin",
        }
    }

    /// The options this kind accepts, with a word on each.
    pub fn known_options(self) -> &'static [(&'static str, &'static str)] {
        match self {
            TargetKind::Cpu => &[
                (
                    "mcpu",
                    "the CPU to compile for, passed to the C compiler as -march (default: native)",
                ),
                (
                    "num-cores",
                    "threads for parallel loops (default: the cores of this machine)",
                ),
            ],
            TargetKind::Cuda => &[
                ("arch", "the GPU architecture, e.g. sm_80, sm_90"),
                ("max-threads-per-block", "threads per block limit"),
            ],
            TargetKind::OpenCl => &[("device", "the device family, e.g. mali")],
            TargetKind::Vta => &[],
            TargetKind::Plugin => &[],
        }
    }
}

/// A compilation target: a kind and its options.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Target {
    pub kind: TargetKind,
    pub options: BTreeMap<String, String>,
    /// For `TargetKind::Plugin`: the kind's name, as the plugin declares it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
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
    let mut v: Vec<&str> = TargetKind::ALL.iter().map(|k| k.name()).collect();
    v.push("llvm (= cpu)");
    v.join(", ")
}

impl Target {
    /// The host CPU with default options.
    pub fn cpu() -> Target {
        Target {
            kind: TargetKind::Cpu,
            options: BTreeMap::new(),
            plugin: None,
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
    /// known too. A plugin kind's options are passed on unchecked: the plugin owns them.
    pub fn parse_with(s: &str, plugin_kinds: &[String]) -> Result<Target, TargetError> {
        let mut words = s.split_whitespace();
        let kind_word = words.next().ok_or(TargetError::Empty)?;
        let kind = match kind_word {
            "cpu" | "llvm" => TargetKind::Cpu,
            "cuda" => TargetKind::Cuda,
            "opencl" => TargetKind::OpenCl,
            "vta" => TargetKind::Vta,
            other if plugin_kinds.iter().any(|k| k == other) => TargetKind::Plugin,
            other => {
                return Err(TargetError::UnknownKind {
                    kind: other.to_string(),
                })
            }
        };
        let plugin = (kind == TargetKind::Plugin).then(|| kind_word.to_string());
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
            if kind != TargetKind::Plugin && !kind.known_options().iter().any(|(k, _)| *k == key) {
                let known: Vec<&str> = kind.known_options().iter().map(|(k, _)| *k).collect();
                let known = if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                };
                return Err(TargetError::UnknownOption {
                    kind: kname,
                    option: key.to_string(),
                    known,
                });
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
        Ok(Target {
            kind,
            options,
            plugin,
        })
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.plugin.as_deref().unwrap_or(self.kind.name()))?;
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
        assert_eq!(t.kind, TargetKind::Cpu);
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
        assert_eq!(
            (t.kind, t.plugin.as_deref(), t.option("lanes")),
            (TargetKind::Plugin, Some("testdev"), Some("8"))
        );
        assert_eq!(t.to_string(), "testdev -lanes=8");
        assert!(matches!(
            Target::parse_with("cpu -lanes=8", &["testdev".to_string()]),
            Err(TargetError::UnknownOption { .. })
        ));
    }
}
