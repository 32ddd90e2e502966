//! Readings of unconfirmed facts. A rule is judged with the facts as the table states them and
//! again with every unconfirmed fact at the other values physics leaves open for it (absent, or
//! at its worst or best). A conclusion that every reading supports is certain, whatever the
//! unconfirmed facts say; only a conclusion that the readings disagree on rests on an
//! unconfirmed fact and becomes an `UNCONFIRMED_FACT` warning. This module performs no I/O.

use super::codes::UNCONFIRMED_FACT;
use crate::core::diag::Diagnostic;

/// How one reading comes out for a rule, from good to bad.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Grade {
    /// Passes with nothing to say.
    Clean,
    /// Passes with a warning (minor-version compatibility, PTX JIT).
    Warned,
    /// Fails.
    Failed,
}

/// What the readings of a rule say together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Judged {
    /// The reading with the facts as stated.
    pub stated: Grade,
    /// The best and the worst of all readings (the stated one included).
    pub best: Grade,
    pub worst: Grade,
}

impl Judged {
    /// Every reading fails: the error holds whatever the unconfirmed facts say.
    pub fn fails_certainly(&self) -> bool {
        self.best == Grade::Failed
    }

    /// Some reading is worse than the stated one: the stated conclusion rests on an unconfirmed
    /// fact.
    pub fn stated_is_uncertain(&self) -> bool {
        self.worst > self.stated
    }
}

/// Judge the grades of a rule's readings; the first is the stated reading.
pub(super) fn judge(grades: impl IntoIterator<Item = Grade>) -> Judged {
    let mut it = grades.into_iter();
    let stated = it.next().unwrap_or(Grade::Clean);
    let (mut best, mut worst) = (stated, stated);
    for g in it {
        best = best.min(g);
        worst = worst.max(g);
    }
    Judged {
        stated,
        best,
        worst,
    }
}

/// The stated reading's error: kept when every reading fails, an `UNCONFIRMED_FACT` warning when
/// some reading passes.
pub(super) fn decide(error: Diagnostic, judged: &Judged) -> Diagnostic {
    if judged.fails_certainly() || !error.is_error() {
        return error;
    }
    let mut w = Diagnostic::warning(
        UNCONFIRMED_FACT,
        format!(
            "{} (the table marks this fact unconfirmed, so it does not fail the lock)",
            error.message
        ),
    );
    w.hint = error.hint;
    w.field = error.field;
    w
}

#[cfg(test)]
mod tests {
    use super::Grade::*;
    use super::*;

    #[test]
    fn a_conclusion_every_reading_supports_is_certain() {
        let j = judge([Failed, Failed, Failed]);
        assert!(j.fails_certainly());
        let e = Diagnostic::error("X", "bad");
        assert!(decide(e, &j).is_error());
    }

    #[test]
    fn readings_that_disagree_make_the_error_a_warning() {
        let j = judge([Failed, Clean]);
        assert!(!j.fails_certainly());
        let d = decide(Diagnostic::error("X", "bad"), &j);
        assert_eq!(d.code, UNCONFIRMED_FACT);
        assert!(!d.is_error());
    }

    #[test]
    fn a_pass_that_some_reading_contradicts_is_uncertain() {
        assert!(judge([Clean, Warned]).stated_is_uncertain());
        assert!(judge([Warned, Failed]).stated_is_uncertain());
        assert!(!judge([Warned, Clean]).stated_is_uncertain());
        assert!(!judge([Clean]).stated_is_uncertain());
    }
}
