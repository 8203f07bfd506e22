//! Forecast steps (`6`, `30m`, `12h`, `1d`, `0-6`): the one parser behind canonical key values,
//! `step=a/to/b/by/c` expansion and the order values are shown in, so all three agree on what a
//! step is.

/// A step as whole minutes: hours unless suffixed `m`, `h`, `d` or `s` (seconds, whole minutes
/// only), in either case, surrounding blanks ignored. A leading `-` is allowed only when `signed`
/// (range expansion walks downwards through negative steps; stored steps are never negative).
pub fn minutes(s: &str, signed: bool) -> Option<i64> {
    let s = s.trim();
    let (num, unit) = match s.as_bytes().last()?.to_ascii_lowercase() {
        b'm' => (&s[..s.len() - 1], 1),
        b'h' => (&s[..s.len() - 1], 60),
        b'd' => (&s[..s.len() - 1], 1440),
        b's' => (&s[..s.len() - 1], 0),
        _ => (s, 60),
    };
    let (negative, digits) = match num.strip_prefix('-') {
        Some(d) if signed => (true, d),
        _ => (false, num),
    };
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let n: i64 = digits.parse().ok()?;
    let m = if unit == 0 {
        // Seconds only make sense as whole minutes here.
        (n % 60 == 0).then_some(n / 60)?
    } else {
        n.checked_mul(unit)?
    };
    Some(if negative { -m } else { m })
}

/// A step or a step range `a-b`, as (start, end) minutes; a single step has both equal. The `-`
/// of a negative start (when `signed`) is not the separator.
pub fn range_minutes(s: &str, signed: bool) -> Option<(i64, i64)> {
    if let Some(m) = minutes(s, signed) {
        return Some((m, m));
    }
    let i = s.get(1..)?.find('-')? + 1;
    Some((minutes(&s[..i], signed)?, minutes(&s[i + 1..], signed)?))
}

/// How a step prints: whole hours bare (`60m` is `1`), others in minutes (`30m`).
pub fn print(minutes: i64) -> String {
    if minutes % 60 == 0 {
        (minutes / 60).to_string()
    } else {
        format!("{minutes}m")
    }
}

/// The canonical form of a stored step, or `None` if it is not one (negative steps are not
/// supported). Ranges keep both ends (`02-12` is `2-12`).
pub fn canonical(s: &str) -> Option<String> {
    let (a, b) = range_minutes(s, false)?;
    Some(if a == b && minutes(s, false).is_some() {
        print(a)
    } else {
        format!("{}-{}", print(a), print(b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn units_and_ranges() {
        assert_eq!(minutes("6", false), Some(360));
        assert_eq!(minutes(" 30M ", false), Some(30));
        assert_eq!(minutes("1d", false), Some(1440));
        assert_eq!(minutes("120s", false), Some(2));
        assert_eq!(minutes("90s", false), None);
        assert_eq!(minutes("-6", false), None);
        assert_eq!(minutes("-6", true), Some(-360));
        assert_eq!(minutes("+6", true), None);
        assert_eq!(minutes("m", false), None);
        assert_eq!(minutes("", false), None);
        assert_eq!(minutes("1.5h", false), None);
        assert_eq!(minutes("99999999999999999999", false), None);
        assert_eq!(range_minutes("0-6", false), Some((0, 360)));
        assert_eq!(range_minutes("-6-30m", true), Some((-360, 30)));
        assert_eq!(range_minutes("-6-30m", false), None);
        assert_eq!(range_minutes("6-", false), None);
        assert_eq!(canonical("30m-60m").as_deref(), Some("30m-1"));
        assert_eq!(canonical("6-6").as_deref(), Some("6-6"));
        assert_eq!(canonical("0--6"), None);
    }

    fn unit() -> impl Strategy<Value = (&'static str, i64)> {
        prop_oneof![
            Just(("", 60)),
            Just(("h", 60)),
            Just(("H", 60)),
            Just(("m", 1)),
            Just(("d", 1440)),
        ]
    }

    proptest! {
        /// Any spelling of a step means what its number and unit say, and its canonical form is
        /// a fixed point that means the same.
        #[test]
        fn canonical_round_trips(n in 0i64..100_000, zeros in 0usize..3, (u, mult) in unit()) {
            let text = format!("{}{n}{u}", "0".repeat(zeros));
            prop_assert_eq!(minutes(&text, false), Some(n * mult));
            let c = canonical(&text).unwrap();
            prop_assert_eq!(minutes(&c, false), Some(n * mult));
            prop_assert_eq!(canonical(&c), Some(c.clone()));
        }

        /// A range's canonical form keeps both ends, each canonical, and is a fixed point.
        #[test]
        fn ranges_round_trip(a in 0i64..10_000, b in 0i64..10_000, (u, mult) in unit()) {
            let c = canonical(&format!("{a}{u}-{b}{u}")).unwrap();
            prop_assert_eq!(range_minutes(&c, false), Some((a * mult, b * mult)));
            prop_assert_eq!(canonical(&c), Some(c.clone()));
        }

        /// Whatever the text, parsing never panics, and signed parsing accepts all unsigned does.
        #[test]
        fn never_panics(s in "[-0-9mhdsMHDS. ]{0,8}") {
            if let Some(m) = minutes(&s, false) {
                prop_assert_eq!(minutes(&s, true), Some(m));
            }
            let _ = canonical(&s);
        }
    }
}
