//! The spec's JSON Schema (draft 2020-12), for editors (taplo / Even Better TOML,
//! yaml-language-server) and CI validators: every key of the as-written spec with its type, its
//! description, its allowed values and, where the validator has a plain grammar, its pattern;
//! unknown keys are refused (`additionalProperties: false`), as the parser's
//! `deny_unknown_fields` refuses them. This module performs no I/O.
//!
//! One place: the keys and their types are [`KEYS`] here; each description is the key's row of
//! the key table in docs/spec.md (embedded at build time), so the schema, the docs and the
//! parser cannot drift apart (the tests check the schema's keys against the parser's and every
//! key against the docs). Built from `serde_json` values rather than derived (`schemars`): the
//! as-written structs hold plain strings that validation narrows, the descriptions come from
//! the docs, and the schema must accept what a newer parser accepts (ranges for the core keys,
//! one GPU as a string), which a derive from today's field types would refuse.
//!
//! The schema is a superset of what validates: it checks shape, types and the plain grammars;
//! the resolver's rules (which releases exist, what runs on which driver) stay envbuild's.
//! Only keywords that every draft since 4 reads alike are used, so older validators (taplo's)
//! agree with 2020-12 ones.

use super::{Platform, Source, Variant};
use serde_json::{json, Map, Value};

/// docs/spec.md, whose `## Keys` table gives each key its description.
const SPEC_DOC: &str = include_str!("../../../docs/spec.md");

/// The JSON Schema dialect the schema declares.
pub const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// Every source, platform and variant: the values the schema allows for `source`,
/// `[target] platform` and `[image] variants` (a test matches each list to its enum).
const SOURCES: [Source; 4] = [
    Source::PytorchChannel,
    Source::CondaForge,
    Source::PytorchIndex,
    Source::Pypi,
];
const PLATFORMS: [Platform; 3] = [Platform::Linux64, Platform::LinuxAarch64, Platform::Win64];
const VARIANTS: [Variant; 2] = [Variant::Runtime, Variant::Dev];

/// The sections, as docs/spec.md names them (`[target] driver`), with what each is for.
const SECTIONS: &[(&str, &str)] = &[
    (
        "target",
        "where the image will run: the lowest NVIDIA driver of those machines, their GPUs, the \
         platform and glibc; never guessed from the machine envbuild runs on",
    ),
    (
        "image",
        "the image around the environment: base, variants, local wheels, SSH and JupyterLab",
    ),
    (
        "run",
        "how the run snippets start a container: shared memory, port, mounts",
    ),
    (
        "lock",
        "what the lock records: the whole closure, its index, the base image's digest",
    ),
];

/// The shape of a key's value.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Any string (validation narrows it): versions and ranges, names, references.
    Text,
    /// A string matching a pattern (the validator's plain grammar).
    Pattern(&'static str),
    /// One of these strings.
    OneOf(fn() -> Vec<&'static str>),
    /// A list of strings.
    List,
    /// A list of at least one of these strings.
    ListOf(fn() -> Vec<&'static str>),
    /// A string or a list of strings (`[target] gpus`: one GPU, or several).
    TextOrList,
    /// `true`/`false`, or a version or range string (the companions).
    FlagOrText,
    Flag,
    /// A TCP port.
    Port,
}

/// Every key of the spec, as docs/spec.md names it, with the shape of its value.
const KEYS: &[(&str, Kind)] = &[
    ("name", Kind::Pattern(r"^[a-z0-9][a-z0-9._-]{0,63}$")),
    // The core keys take an exact version or a range (PEP 440 for pip sources, a conda match
    // spec for conda ones, `latest`): strings; which ones lock is the resolver's to say.
    ("python", Kind::Text),
    ("pytorch", Kind::Text),
    ("source", Kind::OneOf(sources)),
    ("pytorch-cuda", Kind::Text),
    ("cuda", Kind::Text),
    ("cuda-version", Kind::Text),
    ("channels", Kind::List),
    ("torchvision", Kind::FlagOrText),
    ("torchaudio", Kind::FlagOrText),
    ("conda", Kind::List),
    ("pip", Kind::List),
    ("pip-index-url", Kind::Pattern(r"^https?://")),
    ("pip-extra-index-urls", Kind::List),
    ("pip-find-links", Kind::List),
    // A driver version (`535.104.05`) or a branch (`550`, `R550`).
    (
        "[target] driver",
        Kind::Pattern(r"^[Rr]?[0-9]{3,}(\.[0-9]+)*$"),
    ),
    ("[target] gpus", Kind::TextOrList),
    ("[target] platform", Kind::OneOf(platforms)),
    ("[target] platforms", Kind::ListOf(platforms)),
    ("[target] glibc", Kind::Pattern(r"^2\.[0-9]+$")),
    ("[target] forward-compat", Kind::Flag),
    ("[image] base", Kind::Text),
    ("[image] variants", Kind::ListOf(variants)),
    ("[image] base-provides", Kind::List),
    (
        "[image] wheels",
        Kind::Pattern(r"^[A-Za-z0-9._][A-Za-z0-9._/-]*$"),
    ),
    ("[image] ssh", Kind::Flag),
    (
        "[image] jupyterlab",
        Kind::Pattern(r"^([0-9]+!)?[A-Za-z0-9][A-Za-z0-9._+-]*$"),
    ),
    ("[image] ca-bundle", Kind::Text),
    ("[run] shm-size", Kind::Pattern(r"^[0-9]+[kKmMgG]?$")),
    ("[run] port", Kind::Port),
    ("[run] datasets", Kind::Pattern(r"^/[A-Za-z0-9._/-]*$")),
    ("[run] checkpoints", Kind::Pattern(r"^/[A-Za-z0-9._/-]*$")),
    ("[lock] closure", Kind::Flag),
    ("[lock] index-url", Kind::Pattern(r"^(https?|file)://")),
    ("[lock] base-digest", Kind::Flag),
];

fn sources() -> Vec<&'static str> {
    SOURCES.iter().map(|s| s.as_str()).collect()
}

fn platforms() -> Vec<&'static str> {
    PLATFORMS.iter().map(|p| p.as_str()).collect()
}

fn variants() -> Vec<&'static str> {
    VARIANTS.iter().map(|v| v.as_str()).collect()
}

/// The JSON Schema of the value of a key of this kind.
fn value_schema(kind: Kind) -> Value {
    let strings = json!({ "type": "string" });
    match kind {
        Kind::Text => strings,
        Kind::Pattern(p) => json!({ "type": "string", "pattern": p }),
        Kind::OneOf(values) => json!({ "type": "string", "enum": values() }),
        Kind::List => json!({ "type": "array", "items": strings }),
        Kind::ListOf(values) => json!({
            "type": "array",
            "minItems": 1,
            "items": { "type": "string", "enum": values() },
        }),
        Kind::TextOrList => json!({ "type": ["string", "array"], "items": strings }),
        Kind::FlagOrText => json!({ "type": ["boolean", "string"] }),
        Kind::Flag => json!({ "type": "boolean" }),
        Kind::Port => json!({ "type": "integer", "minimum": 1, "maximum": 65535 }),
    }
}

/// The descriptions of docs/spec.md's `## Keys` table, by key as its first cell names it
/// (`name`, `[target] driver`): the rest of the row, with the table's escaped `\|` unescaped.
pub fn descriptions(doc: &str) -> Vec<(String, String)> {
    let Some(start) = doc.find("\n## Keys\n") else {
        return Vec::new();
    };
    let section = &doc[start + 1..];
    let end = section[1..].find("\n## ").map_or(section.len(), |i| i + 1);
    section[..end]
        .lines()
        .filter_map(|line| {
            let row = line.strip_prefix("| `")?;
            let (key, rest) = row.split_once("` | ")?;
            let text = rest.trim_end().strip_suffix('|').unwrap_or(rest).trim();
            Some((key.to_string(), text.replace("\\|", "|")))
        })
        .collect()
}

/// An object schema that refuses unknown keys.
fn object(description: &str, properties: Map<String, Value>) -> Value {
    json!({
        "type": "object",
        "description": description,
        "properties": properties,
        "additionalProperties": false,
    })
}

/// The spec's JSON Schema, as `envbuild schema` prints it.
pub fn schema() -> Value {
    let docs: std::collections::BTreeMap<String, String> =
        descriptions(SPEC_DOC).into_iter().collect();
    let mut top = Map::new();
    let mut sections: Vec<(&str, Map<String, Value>)> =
        SECTIONS.iter().map(|(s, _)| (*s, Map::new())).collect();
    for (key, kind) in KEYS {
        let mut value = value_schema(*kind);
        if let (Some(text), Some(map)) = (docs.get(*key), value.as_object_mut()) {
            map.insert("description".into(), Value::String(text.clone()));
        }
        match key.strip_prefix('[').and_then(|k| k.split_once("] ")) {
            Some((section, name)) => {
                if let Some((_, props)) = sections.iter_mut().find(|(s, _)| *s == section) {
                    props.insert(name.to_string(), value);
                }
            }
            None => {
                top.insert(key.to_string(), value);
            }
        }
    }
    for ((name, props), (_, about)) in sections.into_iter().zip(SECTIONS) {
        top.insert(name.to_string(), object(about, props));
    }
    let mut root = object(
        "An envbuild spec (envbuild.toml, or YAML with the same keys): the environment a team \
         wants, which `envbuild lock` resolves into a lock. Keys: docs/spec.md.",
        top,
    );
    if let Some(map) = root.as_object_mut() {
        map.insert("$schema".into(), Value::String(DIALECT.into()));
        map.insert("title".into(), Value::String("envbuild spec".into()));
    }
    root
}

/// Every key the schema names, as docs/spec.md names them (`name`, `[target] driver`).
pub fn keys() -> Vec<String> {
    KEYS.iter().map(|(k, _)| k.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::spec::raw::{RawImage, RawLock, RawRun, RawSpec, RawTarget};
    use std::collections::BTreeSet;

    /// The fields serde's derive accepts for `T`, read from its own refusal of an unknown key
    /// ("unknown field `…`, expected one of `a`, `b`"): the parser's key set, not a list kept
    /// beside it.
    fn serde_fields<T: serde::de::DeserializeOwned + std::fmt::Debug>() -> Vec<String> {
        let err = serde_json::from_value::<T>(json!({ "\u{1}not-a-key": 1 }))
            .expect_err("an unknown key is refused")
            .to_string();
        let expected = err
            .split_once("expected")
            .map(|(_, rest)| rest)
            .unwrap_or_else(|| panic!("no field list in {err:?}"));
        expected
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn the_schemas_keys_are_the_parsers_keys() {
        let mut parser = BTreeSet::new();
        let sections: Vec<(&str, Vec<String>)> = vec![
            ("target", serde_fields::<RawTarget>()),
            ("image", serde_fields::<RawImage>()),
            ("run", serde_fields::<RawRun>()),
            ("lock", serde_fields::<RawLock>()),
        ];
        for key in serde_fields::<RawSpec>() {
            if !sections.iter().any(|(s, _)| *s == key) {
                parser.insert(key);
            }
        }
        for (section, fields) in &sections {
            for f in fields {
                parser.insert(format!("[{section}] {f}"));
            }
        }
        assert!(parser.len() >= 30, "{parser:?}");
        let named: BTreeSet<String> = keys().into_iter().collect();
        assert_eq!(
            named.difference(&parser).collect::<Vec<_>>(),
            Vec::<&String>::new(),
            "keys in the schema that the parser refuses"
        );
        assert_eq!(
            parser.difference(&named).collect::<Vec<_>>(),
            Vec::<&String>::new(),
            "keys the parser takes that the schema lacks"
        );
        // The printed schema holds exactly those keys, each section an object of its own.
        let printed = schema();
        let mut walked = BTreeSet::new();
        for (k, v) in printed["properties"].as_object().unwrap() {
            match v["properties"].as_object() {
                Some(inner) => walked.extend(inner.keys().map(|i| format!("[{k}] {i}"))),
                None => {
                    walked.insert(k.clone());
                }
            }
        }
        assert_eq!(walked, parser);
    }

    #[test]
    fn every_key_has_the_docs_description_and_refuses_unknown_keys() {
        let printed = schema();
        assert_eq!(printed["$schema"], DIALECT);
        assert_eq!(printed["additionalProperties"], false);
        let docs: std::collections::BTreeMap<String, String> =
            descriptions(SPEC_DOC).into_iter().collect();
        for key in keys() {
            let value = match key.strip_prefix('[').and_then(|k| k.split_once("] ")) {
                Some((s, k)) => {
                    assert_eq!(printed["properties"][s]["additionalProperties"], false);
                    &printed["properties"][s]["properties"][k]
                }
                None => &printed["properties"][key.as_str()],
            };
            let described = value["description"].as_str();
            assert!(
                described.is_some_and(|d| !d.is_empty())
                    && docs.get(&key).map(String::as_str) == described,
                "{key}: {value}"
            );
        }
    }

    #[test]
    fn the_allowed_values_are_every_variant_of_their_enums() {
        // Exhaustive matches: a new source, platform or variant fails to compile here until
        // its list above has it.
        for s in SOURCES {
            match s {
                Source::PytorchChannel
                | Source::CondaForge
                | Source::PytorchIndex
                | Source::Pypi => {}
            }
            assert_eq!(Source::parse(s.as_str()), Some(s));
        }
        for p in PLATFORMS {
            match p {
                Platform::Linux64 | Platform::LinuxAarch64 | Platform::Win64 => {}
            }
            assert_eq!(Platform::parse(p.as_str()), Some(p));
        }
        for v in VARIANTS {
            match v {
                Variant::Runtime | Variant::Dev => {}
            }
        }
        let printed = schema();
        assert_eq!(
            printed["properties"]["source"]["enum"],
            json!(["pytorch-channel", "conda-forge", "pytorch-index", "pypi"])
        );
        assert_eq!(
            printed["properties"]["image"]["properties"]["variants"]["items"]["enum"],
            json!(["runtime", "dev"])
        );
    }

    #[test]
    fn the_descriptions_come_from_the_key_table_only() {
        let doc = "# t\n\n| `x` | not in Keys |\n\n## Keys\n\n| key | meaning |\n|---|---|\n\
                   | `a` | first \\| second |\n| `[s] b` | in a section |\n\n## Next\n\n| `c` | no |\n";
        assert_eq!(
            descriptions(doc),
            vec![
                ("a".to_string(), "first | second".to_string()),
                ("[s] b".to_string(), "in a section".to_string()),
            ]
        );
        assert!(descriptions("no table").is_empty());
    }
}
