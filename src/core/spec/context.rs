//! The context every validation concern reports into: the problems found so far, each located
//! in the spec text, and the character rules every value passes. Shared by `validate` and the
//! concerns it runs, so none of them depends on another's internals. This module performs no
//! I/O.

use super::locator::Locator;
use super::safety::refusal;
use crate::core::diag::Diagnostic;

/// The problems found so far, located in the spec text.
pub(super) struct Ctx<'a> {
    loc: &'a Locator<'a>,
    diags: Vec<Diagnostic>,
}

impl<'a> Ctx<'a> {
    pub(super) fn new(loc: &'a Locator<'a>) -> Self {
        Ctx {
            loc,
            diags: Vec::new(),
        }
    }

    /// Every problem found, in the order found.
    pub(super) fn take(&mut self) -> Vec<Diagnostic> {
        std::mem::take(&mut self.diags)
    }

    pub(super) fn err(
        &mut self,
        code: &'static str,
        key: &str,
        message: String,
        hint: Option<String>,
    ) {
        let mut d = Diagnostic::error(code, message).with_location(self.loc.find(key));
        d.hint = hint;
        self.diags.push(d);
    }

    /// Refuse characters that could end a Dockerfile line, a YAML scalar or a shell word (see
    /// [`refusal`]); true when `value` is safe.
    pub(super) fn safe(&mut self, key: &str, value: &str) -> bool {
        match refusal(key, value) {
            Some((message, hint)) => {
                self.err(super::codes::UNSAFE_VALUE, key, message, Some(hint.into()));
                false
            }
            None => true,
        }
    }
}
