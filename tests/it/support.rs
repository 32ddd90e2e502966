//! The `it` target's helpers: everything the shared test-support crate (tests/support) offers,
//! plus the helpers that read envbuild's own types (smoke report checks).

pub use envbuild_test_support::*;

/// The check `name` of a smoke report (panics, listing the checks, when it is missing).
pub fn check_named<'a>(
    report: &'a envbuild::core::smoke::SmokeReport,
    name: &str,
) -> &'a envbuild::core::report::Check {
    report
        .checks
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no check {name} in {:#?}", report.checks))
}

/// Asserts the status and code of the check `name`; returns it.
pub fn assert_check<'a>(
    report: &'a envbuild::core::smoke::SmokeReport,
    name: &str,
    status: envbuild::core::report::Status,
    code: &str,
) -> &'a envbuild::core::report::Check {
    let c = check_named(report, name);
    assert_eq!(
        (c.status, c.code.as_str()),
        (status, code),
        "{name}: {}",
        c.detail
    );
    c
}
