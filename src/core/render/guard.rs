//! The size guard of the filters a template may call. This module performs no I/O.
//!
//! minijinja's fuel charges most of what a template makes, but some built-in filters build
//! their result before it is charged: `join` of a list that repeats a long string, `string` of
//! such a list, `sort` and `min` comparing long strings, each many times the size of what the
//! template made (a list of one long string repeated is a few slots). Every such filter is
//! wrapped here: before it runs, the size of what it is given (every string's bytes, every
//! item, and each argument once per item) is measured, and more than [`MAX_INPUT`] is refused
//! with the template budget's message. Templates give filters kilobytes.

use minijinja::value::{Rest, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State};

/// The most a filter may be given, in bytes: as much as a whole rendered file may hold.
pub const MAX_INPUT: u64 = 8 << 20;

/// The message of a filter refused by the guard (`budget_failure` reads it).
pub const INPUT_SPENT: &str = "a filter was given more than its size cap";

/// How deep nested lists and maps are measured; deeper is refused (a template can nest a list
/// in itself thousands of times in a loop).
const MAX_DEPTH: usize = 64;

/// What one item costs besides its contents: its slot.
const SLOT: u64 = 8;

/// Add the size of `v` to `total`; false once it passes [`MAX_INPUT`] (the walk stops there,
/// so a lazily repeated list of millions of items costs at most that many steps).
fn measure(v: &Value, total: &mut u64, depth: usize) -> bool {
    *total = total.saturating_add(SLOT);
    if *total > MAX_INPUT || depth > MAX_DEPTH {
        return false;
    }
    match v.kind() {
        ValueKind::String | ValueKind::Bytes => {
            let len = v
                .as_str()
                .map_or_else(|| v.as_bytes().map_or(0, <[u8]>::len), str::len);
            *total = total.saturating_add(len as u64);
            *total <= MAX_INPUT
        }
        ValueKind::Seq | ValueKind::Iterable => match v.try_iter() {
            Ok(items) => {
                for item in items {
                    if !measure(&item, total, depth + 1) {
                        return false;
                    }
                }
                true
            }
            Err(_) => true,
        },
        ValueKind::Map => match v.try_iter() {
            Ok(keys) => {
                for key in keys {
                    let item = v.get_item(&key).unwrap_or_default();
                    if !measure(&key, total, depth + 1) || !measure(&item, total, depth + 1) {
                        return false;
                    }
                }
                true
            }
            Err(_) => true,
        },
        _ => true,
    }
}

/// How many times a filter may use each argument: once per item of a list or map.
fn uses(v: &Value) -> u64 {
    match v.kind() {
        ValueKind::Seq | ValueKind::Map | ValueKind::Iterable => {
            v.len().map_or(MAX_INPUT, |n| n as u64).max(1)
        }
        _ => 1,
    }
}

/// Refuse `value` and `args` when together they pass [`MAX_INPUT`].
pub fn check(value: &Value, args: &[Value]) -> Result<(), Error> {
    let mut total = 0;
    let mut fits = measure(value, &mut total, 0);
    let times = uses(value);
    for arg in args {
        if !fits {
            break;
        }
        let mut one = 0;
        fits = measure(arg, &mut one, 0);
        total = total.saturating_add(one.saturating_mul(times));
        fits &= total <= MAX_INPUT;
    }
    if fits {
        Ok(())
    } else {
        Err(Error::new(ErrorKind::InvalidOperation, INPUT_SPENT))
    }
}

/// `builtin`, run only after [`check`].
fn guarded(builtin: Value) -> impl Fn(&mut State, Value, Rest<Value>) -> Result<Value, Error> {
    move |state: &mut State, value: Value, args: Rest<Value>| {
        check(&value, &args)?;
        let mut all = Vec::with_capacity(args.len() + 1);
        all.push(value);
        all.extend(args.iter().cloned());
        builtin.call(state, &all)
    }
}

/// Replace the built-in filters that can build or compare more than they are charged for
/// with guarded ones of the same name and behaviour.
pub fn install(env: &mut Environment<'_>) {
    use minijinja::filters as f;
    let builtins = [
        ("join", Value::from_function(f::join)),
        ("string", Value::from_function(f::string)),
        ("sort", Value::from_function(f::sort)),
        ("unique", Value::from_function(f::unique)),
        ("min", Value::from_function(f::min)),
        ("max", Value::from_function(f::max)),
        ("list", Value::from_function(f::list)),
        ("sum", Value::from_function(f::sum)),
        ("map", Value::from_function(f::map)),
        ("select", Value::from_function(f::select)),
        ("reject", Value::from_function(f::reject)),
        ("selectattr", Value::from_function(f::selectattr)),
        ("rejectattr", Value::from_function(f::rejectattr)),
        ("chain", Value::from_function(f::chain)),
        ("zip", Value::from_function(f::zip)),
        ("batch", Value::from_function(f::batch)),
        ("slice", Value::from_function(f::slice)),
        ("split", Value::from_function(f::split)),
        ("lines", Value::from_function(f::lines)),
        ("title", Value::from_function(f::title)),
        ("capitalize", Value::from_function(f::capitalize)),
        ("upper", Value::from_function(f::upper)),
        ("lower", Value::from_function(f::lower)),
        ("trim", Value::from_function(f::trim)),
        ("format", Value::from_function(f::format)),
    ];
    for (name, builtin) in builtins {
        env.add_filter(name, guarded(builtin));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_given_more_than_its_cap_is_refused_before_it_runs() {
        let long = Value::from("x".repeat(1 << 20));
        let many = Value::from(vec![long.clone(); 16]);
        assert!(check(&many, &[]).is_err());
        assert!(check(&Value::from(vec![Value::from("a"); 1000]), &[long]).is_err());
        assert!(check(
            &Value::from(vec![Value::from("abc"); 1000]),
            &[Value::from(", ")]
        )
        .is_ok());
        let mut nested = Value::from(1);
        for _ in 0..100 {
            nested = Value::from(vec![nested]);
        }
        assert!(check(&nested, &[]).is_err());
    }
}
