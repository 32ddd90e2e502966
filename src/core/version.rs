//! Small version types shared by the resolver, `doctor` and the smoke test: dotted numeric
//! versions (drivers, CUDA, Python, torch), compute capabilities, and the rule that decides
//! whether a build's GPU code runs on a device. This module performs no I/O.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// A dotted numeric version such as `535.104.05`, `12.4.1` or `3.10`. Comparison is numeric per
/// component and missing components count as zero (`12.4` == `12.4.0`), while the text as
/// written is kept for display (`535.104.05` keeps its leading zero).
#[derive(Debug, Clone, Eq)]
pub struct Version {
    parts: Vec<u64>,
    text: String,
}

impl Version {
    pub fn parse(s: &str) -> Option<Version> {
        let s = s.trim();
        if s.is_empty() || s.len() > 32 {
            return None;
        }
        let mut parts = Vec::new();
        for p in s.split('.') {
            if p.is_empty() || p.len() > 9 || !p.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            parts.push(p.parse().ok()?);
        }
        Some(Version {
            parts,
            text: s.to_string(),
        })
    }

    pub fn parts(&self) -> &[u64] {
        &self.parts
    }

    pub fn major(&self) -> u64 {
        self.parts[0]
    }

    pub fn minor(&self) -> u64 {
        self.parts.get(1).copied().unwrap_or(0)
    }

    /// `major.minor` as text, e.g. `12.4` for `12.4.1`.
    pub fn major_minor(&self) -> String {
        format!("{}.{}", self.major(), self.minor())
    }

    /// Number of components as written (`3.10` has 2, `3.10.14` has 3).
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// True when `self` names the same release line as `prefix` (`12.4.1` starts with `12.4`).
    pub fn starts_with(&self, prefix: &Version) -> bool {
        prefix.parts.len() <= self.parts.len() && self.parts[..prefix.parts.len()] == prefix.parts
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// `0`, below every real version: the bound of a fact nothing bounds from below.
    pub fn zero() -> Version {
        Version {
            parts: vec![0],
            text: "0".into(),
        }
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        let n = self.parts.len().max(other.parts.len());
        for i in 0..n {
            let a = self.parts.get(i).copied().unwrap_or(0);
            let b = other.parts.get(i).copied().unwrap_or(0);
            match a.cmp(&b) {
                Ordering::Equal => continue,
                o => return o,
            }
        }
        Ordering::Equal
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for Version {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Version::parse(s).ok_or_else(|| format!("`{s}` is not a dotted numeric version"))
    }
}

impl Serialize for Version {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Version::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("bad version `{s}`")))
    }
}

/// A CUDA compute capability such as 8.9 (`sm_89`) or 12.0 (`sm_120`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cc {
    pub major: u32,
    pub minor: u32,
}

impl Cc {
    pub const fn new(major: u32, minor: u32) -> Cc {
        Cc { major, minor }
    }

    /// Parse `8.9`, `sm_89`, `sm89`, `compute_89`, `sm_120`, `12.0`. The last digit of the
    /// `sm_` form is the minor version (`sm_100` is 10.0, `sm_103` is 10.3).
    pub fn parse(s: &str) -> Option<Cc> {
        let t = s.trim().to_ascii_lowercase();
        let digits = t
            .strip_prefix("sm_")
            .or_else(|| t.strip_prefix("sm"))
            .or_else(|| t.strip_prefix("compute_"));
        if let Some(d) = digits {
            let d = d.strip_suffix('a').unwrap_or(d);
            if d.len() < 2 || d.len() > 3 || !d.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let (maj, min) = d.split_at(d.len() - 1);
            return Some(Cc::new(maj.parse().ok()?, min.parse().ok()?));
        }
        let (maj, min) = t.split_once('.')?;
        if maj.is_empty()
            || min.len() != 1
            || maj.len() > 2
            || !maj.bytes().all(|b| b.is_ascii_digit())
            || !min.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        Some(Cc::new(maj.parse().ok()?, min.parse().ok()?))
    }

    /// `sm_89` form.
    pub fn sm(&self) -> String {
        format!("sm_{}{}", self.major, self.minor)
    }
}

impl fmt::Display for Cc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl FromStr for Cc {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Cc::parse(s).ok_or_else(|| format!("`{s}` is not a compute capability"))
    }
}

impl Serialize for Cc {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Cc {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Cc::parse(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("bad compute capability `{s}`")))
    }
}

/// How a build's GPU code reaches a device, if at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    /// A cubin for this exact architecture or an older minor of the same major.
    Cubin(Cc),
    /// Only through PTX that the driver JIT-compiles (slower first start, needs a new driver).
    Ptx(Cc),
    /// No kernel image: "no kernel image is available for execution on the device".
    None,
}

/// Whether code built for `cubins` (+ `ptx`) runs on a device of capability `device`.
///
/// An sm_XY cubin runs on sm_XZ with Z >= Y (same major only); PTX compute_XY is JIT-compiled
/// for any newer device, never an older one.
pub fn coverage(cubins: &[Cc], ptx: &[Cc], device: Cc) -> Coverage {
    let best_cubin = cubins
        .iter()
        .filter(|c| c.major == device.major && c.minor <= device.minor)
        .max();
    if let Some(c) = best_cubin {
        return Coverage::Cubin(*c);
    }
    match ptx.iter().filter(|p| **p <= device).max() {
        Some(p) => Coverage::Ptx(*p),
        None => Coverage::None,
    }
}

/// The PTX a build could carry when the table does not know its PTX: PTX compute_XY is emitted
/// while compiling for XY (`+PTX` on an entry of the build's architecture list), so only the
/// build's own architectures are candidates, and the lowest of them bounds what any PTX serves.
pub fn possible_ptx(cubins: &[Cc]) -> Vec<Cc> {
    cubins.to_vec()
}

/// How a driver runs code built with a CUDA toolkit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// At or above the driver the toolkit shipped with.
    Native,
    /// Below that, at or above its major's minor-version compatibility floor.
    MinorCompat,
    /// Neither.
    TooOld,
}

/// The route by which `driver` runs a toolkit that needs `native` natively, within a family
/// whose minor-version compatibility floor is `floor` (none before CUDA 11). `native = None`:
/// no driver is known to run it natively.
///
/// A family floor bounds every toolkit of the family: no toolkit of CUDA X needs less than the
/// floor natively, and nothing below the floor runs any of them ([`lowest_native`]).
pub fn route(driver: &Version, native: Option<&Version>, floor: Option<&Version>) -> Route {
    if native.is_some_and(|n| driver >= n) {
        Route::Native
    } else if floor.is_some_and(|f| driver >= f) {
        Route::MinorCompat
    } else {
        Route::TooOld
    }
}

/// The lowest driver a toolkit of a family could need natively: the family floor (a toolkit
/// never needs less than the driver of its major's first release), or any driver at all when
/// the family has no floor.
pub fn lowest_native(floor: Option<&Version>) -> Version {
    floor.cloned().unwrap_or_else(Version::zero)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn versions_compare_numerically() {
        assert!(v("535.104.05") > v("535.54.03"));
        assert!(v("3.10") > v("3.9"));
        assert_eq!(v("12.4"), v("12.4.0"));
        assert!(v("12.4.1").starts_with(&v("12.4")));
        assert!(!v("12.40").starts_with(&v("12.4")));
        assert_eq!(v("535.104.05").to_string(), "535.104.05");
        for bad in ["", "1..2", "a.b", "1.2-rc", " ", "1.2.", "12345678901.1"] {
            assert!(Version::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn compute_capabilities_parse_in_every_spelling() {
        assert_eq!(Cc::parse("8.9"), Some(Cc::new(8, 9)));
        assert_eq!(Cc::parse("sm_89"), Some(Cc::new(8, 9)));
        assert_eq!(Cc::parse("SM89"), Some(Cc::new(8, 9)));
        assert_eq!(Cc::parse("sm_120"), Some(Cc::new(12, 0)));
        assert_eq!(Cc::parse("compute_90"), Some(Cc::new(9, 0)));
        assert_eq!(Cc::parse("sm_90a"), Some(Cc::new(9, 0)));
        assert_eq!(Cc::parse("12.1"), Some(Cc::new(12, 1)));
        for bad in ["8", "8.", ".9", "sm_", "sm_8", "8.10", "A100", "sm_1234"] {
            assert!(Cc::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn cubins_serve_newer_minors_of_the_same_major_only() {
        let cubins = [Cc::new(8, 0), Cc::new(8, 6), Cc::new(9, 0)];
        assert_eq!(
            coverage(&cubins, &[], Cc::new(8, 9)),
            Coverage::Cubin(Cc::new(8, 6))
        );
        assert_eq!(
            coverage(&cubins, &[], Cc::new(8, 0)),
            Coverage::Cubin(Cc::new(8, 0))
        );
        assert_eq!(coverage(&cubins, &[], Cc::new(10, 0)), Coverage::None);
        assert_eq!(coverage(&cubins, &[], Cc::new(7, 5)), Coverage::None);
    }

    #[test]
    fn ptx_only_runs_forward() {
        let cubins = [Cc::new(9, 0), Cc::new(10, 0), Cc::new(12, 0)];
        let ptx = [Cc::new(12, 0)];
        assert_eq!(
            coverage(&cubins, &ptx, Cc::new(12, 1)),
            Coverage::Cubin(Cc::new(12, 0))
        );
        assert_eq!(
            coverage(&cubins, &ptx, Cc::new(13, 0)),
            Coverage::Ptx(Cc::new(12, 0))
        );
        // Jetson Thor (11.0) is older than the PTX and has no 11.x cubin.
        assert_eq!(coverage(&cubins, &ptx, Cc::new(11, 0)), Coverage::None);
    }

    #[test]
    fn no_possible_ptx_serves_a_device_older_than_the_lowest_cubin() {
        // torch 2.8 cu128: sm_70 and up, PTX unknown. A P100 (sm_60) is out of reach however
        // the PTX question is answered.
        let cubins = [Cc::new(7, 0), Cc::new(8, 0), Cc::new(9, 0), Cc::new(12, 0)];
        for ptx in [vec![], possible_ptx(&cubins)] {
            assert_eq!(coverage(&cubins, &ptx, Cc::new(6, 0)), Coverage::None);
        }
        // A device above the lowest cubin could be served by some PTX of the build.
        assert_eq!(
            coverage(&cubins, &possible_ptx(&cubins), Cc::new(11, 0)),
            Coverage::Ptx(Cc::new(9, 0))
        );
    }

    #[test]
    fn routes_follow_the_native_driver_and_the_family_floor() {
        let (native, floor) = (v("580.95.05"), v("580.65.06"));
        assert_eq!(
            route(&v("590.44.01"), Some(&native), Some(&floor)),
            Route::Native
        );
        assert_eq!(
            route(&v("580.82.07"), Some(&native), Some(&floor)),
            Route::MinorCompat
        );
        assert_eq!(
            route(&v("550.54.15"), Some(&native), Some(&floor)),
            Route::TooOld
        );
        // Below the floor no reading of the native driver helps: it is at least the floor.
        for n in [Some(lowest_native(Some(&floor))), None] {
            assert_eq!(
                route(&v("550.54.15"), n.as_ref(), Some(&floor)),
                Route::TooOld
            );
        }
        // CUDA 10: no floor, so an unknown native driver could be anything.
        assert_eq!(
            route(&v("418.39"), Some(&lowest_native(None)), None),
            Route::Native
        );
        assert_eq!(route(&v("418.39"), Some(&v("440.33")), None), Route::TooOld);
    }
}
