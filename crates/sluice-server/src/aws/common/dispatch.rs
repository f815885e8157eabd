//! What the SQS and SNS action layers share: the macro that declares a service's closed enum
//! of actions with its parser, and the request's host. Each service keeps its own `dispatch`
//! `match`, context, parameter parsing and error texts, which differ on the wire.

use axum::http::request::Parts;

/// Declares `pub enum Action` with one variant per action name and `Action::parse`, which
/// maps the wire name (the variant's name) to the variant.
macro_rules! aws_actions {
    ($(#[$doc:meta])* $($variant:ident),* $(,)?) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Action { $($variant,)* }

        impl Action {
            pub fn parse(name: &str) -> Option<Action> {
                match name { $(stringify!($variant) => Some(Action::$variant),)* _ => None }
            }
        }
    };
}
pub(crate) use aws_actions;

/// The request's `Host` header, which URLs in answers echo.
pub fn host_header(parts: &Parts) -> Option<String> {
    parts.headers.get(axum::http::header::HOST).and_then(|v| v.to_str().ok()).map(str::to_string)
}

#[cfg(test)]
mod tests {
    aws_actions! {
        /// A test service.
        Foo,
        BarBaz,
    }

    #[test]
    fn actions_parse_by_name() {
        assert_eq!(Action::parse("BarBaz"), Some(Action::BarBaz));
        assert_eq!(Action::parse("Foo"), Some(Action::Foo));
        assert_eq!(Action::parse("foo"), None);
    }
}
