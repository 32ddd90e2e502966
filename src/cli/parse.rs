//! The value parsers of the command line, one per argument type; each wraps the one core parser
//! of that type and words its refusal for clap. This module performs no I/O.

use crate::core::rules::{parse_size, SizeError};

/// A size for `--shm-size`: `1073741824`, `512m`, `512mb`, `2g`, `64k` (docker's grammar, binary
/// units; see `core::rules::parse_size`), more than zero and at most what the Engine API takes.
pub fn size(s: &str) -> Result<u64, String> {
    match parse_size(s) {
        Ok(size) if size.bytes > 0 && size.bytes <= i64::MAX as u64 => Ok(size.bytes),
        Ok(_) | Err(SizeError::TooLarge) => Err(format!("`{s}` is not a usable size")),
        Err(SizeError::Syntax) => Err(format!(
            "`{s}` is not a size such as 1073741824, 512m or 2g"
        )),
    }
}

/// A repository for `image --push`: `[HOST[:PORT]/]PATH` (see `core::image_ref::Repository`).
pub fn repository(s: &str) -> Result<crate::core::image_ref::Repository, String> {
    crate::core::image_ref::Repository::parse(s)
}

/// A platform for `image --platform`: `linux-64`, `linux-aarch64` (see
/// `core::platform::parse_image_platform`).
pub fn image_platform(s: &str) -> Result<crate::core::spec::Platform, String> {
    crate::core::platform::parse_image_platform(s)
}

/// An image for `image --cache-from`: `[HOST[:PORT]/]PATH:TAG` (see
/// `core::image_ref::parse_cache_source`).
pub fn cache_source(s: &str) -> Result<String, String> {
    crate::core::image_ref::parse_cache_source(s)
}

/// The mirrors of `image`/`render --pip-mirror` and `--conda-mirror` (see
/// `core::closure::pip_mirror` and `conda_mirror`), checked by the command (a usage error that
/// never shows the URL's credentials).
pub fn mirrors(
    pip: Option<&str>,
    conda: Option<&str>,
) -> Result<crate::core::closure::Mirrors, crate::core::diag::Failure> {
    let usage = |m| crate::core::diag::Failure::usage(m, None);
    Ok(crate::core::closure::Mirrors {
        pip: pip
            .map(crate::core::closure::pip_mirror)
            .transpose()
            .map_err(usage)?,
        conda: conda
            .map(crate::core::closure::conda_mirror)
            .transpose()
            .map_err(usage)?,
    })
}

/// A day for `table learn --date`: `YYYY-MM-DD` (see `core::learn::is_date`).
pub fn date(s: &str) -> Result<String, String> {
    if crate::core::learn::is_date(s) {
        Ok(s.to_string())
    } else {
        Err(format!("`{s}` is not a date such as 2026-12-01"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_year_month_day() {
        assert_eq!(date("2026-12-01"), Ok("2026-12-01".to_string()));
        for bad in [
            "2026-13-01",
            "2026-12-00",
            "26-12-01",
            "2026/12/01",
            "2026-12-1",
            "",
        ] {
            assert!(date(bad).unwrap_err().contains("not a date"), "{bad}");
        }
    }

    #[test]
    fn shm_sizes_take_every_docker_spelling() {
        for (text, want) in [
            ("1g", 1u64 << 30),
            ("1073741824", 1 << 30),
            ("512m", 512 << 20),
            ("512mb", 512 << 20),
            ("512MB", 512 << 20),
            ("512MiB", 512 << 20),
            ("64k", 64 << 10),
            ("100b", 100),
            ("+2g", 2 << 30),
        ] {
            assert_eq!(size(text), Ok(want), "{text}");
        }
        assert!(size("0").unwrap_err().contains("not a usable size"));
        assert!(size("9999999999g")
            .unwrap_err()
            .contains("not a usable size"));
        assert!(size("lots").unwrap_err().contains("such as"));
        assert!(size("1t").unwrap_err().contains("such as"));
    }
}
