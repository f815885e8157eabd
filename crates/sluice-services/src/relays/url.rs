//! Source URLs: which database a relay reads, told apart by the URL's scheme and checked by
//! that database's driver.

use sluice_core::ValidationError;

use super::redact::scrub;

/// Where a relay reads from, as its URL names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceUrl {
    Postgres(String),
    Mysql(String),
    /// A file path (`sqlite:///abs/path.db`, or `sqlite://relative.db`).
    Sqlite(String),
}

impl SourceUrl {
    pub fn parse(url: &str) -> Result<SourceUrl, ValidationError> {
        let scheme = url.split("://").next().unwrap_or("");
        let rest = url.get(scheme.len() + 3..).unwrap_or("");
        match scheme {
            "postgres" | "postgresql" => {
                url.parse::<tokio_postgres::Config>()
                    .map_err(|e| ValidationError::new("source", scrub(&format!("not a PostgreSQL URL: {e}"), url)))?;
                Ok(SourceUrl::Postgres(url.to_string()))
            }
            "mysql" | "mariadb" => {
                let url = format!("mysql://{rest}");
                mysql_async::Opts::from_url(&url)
                    .map_err(|e| ValidationError::new("source", scrub(&format!("not a MySQL URL: {e}"), &url)))?;
                Ok(SourceUrl::Mysql(url))
            }
            "sqlite" if !rest.is_empty() => Ok(SourceUrl::Sqlite(rest.to_string())),
            _ => Err(ValidationError::new(
                "source",
                "a source is postgres://USER@HOST/DB, mysql://USER@HOST/DB (MariaDB too) or sqlite:///PATH",
            )),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            SourceUrl::Postgres(_) => "postgres",
            SourceUrl::Mysql(_) => "mysql",
            SourceUrl::Sqlite(_) => "sqlite",
        }
    }
}
