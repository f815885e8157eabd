//! Targets: a name, or a pattern where `*` stands for any run of characters (none included)
//! and `?` for exactly one. `*` alone matches everything.

use sluice_core::ValidationError;

/// Checks a target: 1 to `len_max` bytes, no control characters.
pub fn validate(target: &str, len_max: usize) -> Result<(), ValidationError> {
    if target.is_empty() || target.len() > len_max || target.chars().any(char::is_control) {
        return Err(ValidationError::new(
            "target",
            format!("a target is a name or a pattern with * and ?, 1 to {len_max} bytes without control characters"),
        ));
    }
    Ok(())
}

/// Whether `name` matches `pattern`. Linear in the product of their lengths at worst (both are
/// bounded), by the classic backtrack-to-the-last-star walk.
pub fn matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((star_pi, star_ni)) = star {
            pi = star_pi + 1;
            ni = star_ni + 1;
            star = Some((star_pi, star_ni + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_as_globs() {
        let table = [
            ("*", "anything", true),
            ("*", "", true),
            ("orders", "orders", true),
            ("orders", "orders-dlq", false),
            ("orders-*", "orders-dlq", true),
            ("orders-*", "orders", false),
            ("*-dlq", "jobs-dlq", true),
            ("*-dlq", "jobs-dlq-2", false),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "aXXbYY", false),
            ("orders/*", "orders/0192-ab", true),
            ("**", "x", true),
        ];
        for (pattern, name, expected) in table {
            assert_eq!(matches(pattern, name), expected, "{pattern:?} against {name:?}");
        }
    }

    #[test]
    fn targets_have_a_bounded_length() {
        assert!(validate("orders-*", 256).is_ok());
        assert!(validate("", 256).is_err());
        assert!(validate(&"a".repeat(257), 256).is_err());
        assert!(validate("a\nb", 256).is_err());
    }
}
