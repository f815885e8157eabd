//! STS `GetCallerIdentity`: scripts and SDK credential checks call it to learn the account,
//! so it answers with the configured account and the caller's access key id.

use serde_json::{Value, json};

use crate::ServerConfig;
use crate::aws::common::AwsError;

pub fn dispatch(config: &ServerConfig, action: &str, caller: Option<&str>) -> Result<Option<Value>, AwsError> {
    match action {
        "GetCallerIdentity" => Ok(Some(caller_identity(config, caller))),
        other => Err(AwsError::invalid_action(other)),
    }
}

/// The account's root identity: AWS answers `UserId` with the access key's user id, which for
/// Sluice is the access key id (or the account when the request was not signed).
fn caller_identity(config: &ServerConfig, caller: Option<&str>) -> Value {
    json!({
        "Account": config.account,
        "Arn": format!("arn:aws:iam::{}:root", config.account),
        "UserId": caller.unwrap_or(&config.account),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_is_the_configured_account() {
        let config = ServerConfig { account: "123456789012".into(), ..Default::default() };
        let out = dispatch(&config, "GetCallerIdentity", Some("AKID")).unwrap().unwrap();
        assert_eq!(out, json!({"Account": "123456789012", "Arn": "arn:aws:iam::123456789012:root", "UserId": "AKID"}));
        let out = dispatch(&config, "GetCallerIdentity", None).unwrap().unwrap();
        assert_eq!(out["UserId"], "123456789012");
        assert_eq!(dispatch(&config, "AssumeRole", None).unwrap_err().code, "InvalidAction");
    }
}
