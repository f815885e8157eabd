//! Source URLs carry passwords (`postgres://app:secret@db/orders`). They are stored as given,
//! because the relay needs them, and shown or logged only through [`redact`], which replaces
//! the password in the user part and every `password=` query parameter with `***`.

const MASK: &str = "***";

/// The URL with its passwords masked: `postgres://app:***@db/orders`.
pub fn redact(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => (&url[..i + 3], &url[i + 3..]),
        None => ("", url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rfind('@') {
        Some(at) => {
            let (user_info, host) = authority.split_at(at);
            match user_info.find(':') {
                Some(colon) => format!("{}:{MASK}{host}", &user_info[..colon]),
                None => authority.to_string(),
            }
        }
        None => authority.to_string(),
    };
    let tail = match tail.find('?') {
        Some(q) => {
            let (path, query) = tail.split_at(q + 1);
            let masked: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}={MASK}"),
                    _ => pair.to_string(),
                })
                .collect();
            format!("{path}{}", masked.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{scheme}{authority}{tail}")
}

/// `text` with every occurrence of the source's password masked, for driver errors that might
/// repeat parts of the URL.
pub fn scrub(text: &str, url: &str) -> String {
    match password_of(url) {
        Some(password) if password.len() >= 3 => text.replace(&password, MASK),
        _ => text.to_string(),
    }
}

fn password_of(url: &str) -> Option<String> {
    let rest = &url[url.find("://")? + 3..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let user_info = &authority[..authority.rfind('@')?];
    Some(user_info.split_once(':')?.1.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_masked_and_nothing_else() {
        let table = [
            ("postgres://app:secret@db:5432/orders", "postgres://app:***@db:5432/orders"),
            ("postgres://app@db/orders", "postgres://app@db/orders"),
            ("mysql://root:p%40ss@127.0.0.1:3306/test", "mysql://root:***@127.0.0.1:3306/test"),
            (
                "postgres://db/orders?user=app&password=secret&sslmode=disable",
                "postgres://db/orders?user=app&password=***&sslmode=disable",
            ),
            ("postgres://u:a@b@host/db", "postgres://u:***@host/db"),
            ("sqlite:///var/lib/app.db", "sqlite:///var/lib/app.db"),
        ];
        for (url, shown) in table {
            assert_eq!(redact(url), shown, "{url}");
        }
        assert_eq!(scrub("login failed for secret", "postgres://app:secret@db/x"), "login failed for ***");
    }
}
