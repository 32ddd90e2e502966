//! Parsing a spec whose core keys may be ranges: validate it, then choose the versions of its
//! ranges ([`super::choose`]), so the spec handed to `resolve` is exact. A spec with other
//! problems still gets its ranges chosen, so that resolution problems are reported in the same
//! run. This module performs no I/O.

use super::choose::{choose, Held};
use crate::core::compat::Table;
use crate::core::spec::{parse_ranged, Format, Parsed, Spec, SpecErrors};

/// Parse and validate a spec ([`crate::core::spec::parse_ranged`]) and choose the versions of
/// its ranges. `file` names it in locations.
pub fn parse_spec(
    text: &str,
    format: Format,
    file: &str,
    table: &Table,
) -> Result<Spec, SpecErrors> {
    parse_spec_holding(text, format, file, table, &Held::new())
}

/// [`parse_spec`], keeping the previous lock's choices (`held`) while they still satisfy the
/// spec (`envbuild lock` without `--upgrade`).
pub fn parse_spec_holding(
    text: &str,
    format: Format,
    file: &str,
    table: &Table,
    held: &Held,
) -> Result<Spec, SpecErrors> {
    match parse_ranged(text, format, file, table) {
        Ok(Parsed::Exact(spec, _)) => Ok(*spec),
        Ok(Parsed::Ranged(u)) => choose(&u, table, held).map_err(|diagnostics| SpecErrors {
            diagnostics: locate(diagnostics, text, file),
            partial: None,
            unpinned: None,
        }),
        Err(mut e) => {
            if let Some(u) = e.unpinned.take() {
                if e.partial.is_none() {
                    e.partial = choose(&u, table, held).ok().map(Box::new);
                }
            }
            Err(e)
        }
    }
}

/// Give each diagnostic the location of the key it names.
fn locate(
    mut diags: Vec<crate::core::diag::Diagnostic>,
    text: &str,
    file: &str,
) -> Vec<crate::core::diag::Diagnostic> {
    let loc = crate::core::spec::Locator::new(text, file);
    for d in &mut diags {
        if d.location.is_none() {
            d.location = d.field.as_deref().and_then(|f| loc.find(f));
        }
    }
    diags
}
