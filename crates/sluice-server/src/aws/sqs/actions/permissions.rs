//! AddPermission and RemovePermission: they edit the queue's `Policy` document, one statement
//! per label, exactly as AWS writes it. Sluice keeps the policy and returns it; it does not
//! enforce it (any authenticated caller may use any queue).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use sluice_core::QueueAttributesPatch;

use super::Ctx;
use crate::aws::common::AwsError;
use crate::aws::common::input::{parse, required};
use crate::aws::sqs::limits::{LABEL_LEN_MAX, PERMISSION_ACTIONS_MAX};
use crate::aws::sqs::queue_attributes::{self, POLICY};

type Outcome = Result<Option<Value>, AwsError>;

/// Actions a permission may grant: the queue-level actions of the API other than the owner's
/// (below), or `*`.
const GRANTABLE: &[&str] = &[
    "*",
    "ChangeMessageVisibility",
    "ChangeMessageVisibilityBatch",
    "DeleteMessage",
    "DeleteMessageBatch",
    "GetQueueAttributes",
    "GetQueueUrl",
    "ListDeadLetterSourceQueues",
    "ListMessageMoveTasks",
    "PurgeQueue",
    "ReceiveMessage",
    "SendMessage",
    "SendMessageBatch",
    "StartMessageMoveTask",
    "CancelMessageMoveTask",
];

/// Actions only the queue's owner may call, which no permission can grant: those whose
/// reference page (and the API model's documentation) says "Cross-account permissions don't
/// apply to this action".
const OWNER_ONLY: &[&str] = &[
    "AddPermission",
    "CreateQueue",
    "DeleteQueue",
    "ListQueues",
    "ListQueueTags",
    "RemovePermission",
    "SetQueueAttributes",
    "TagQueue",
    "UntagQueue",
];

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct AddPermissionInput {
    queue_url: Option<String>,
    label: Option<String>,
    #[serde(rename = "AWSAccountIds")]
    account_ids: Option<Vec<String>>,
    actions: Option<Vec<String>>,
}

pub async fn add_permission(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: AddPermissionInput = parse(input)?;
    let name = ctx.queue_name(&input.queue_url)?;
    let label = required(&input.label, "Label")?;
    let actions = input.actions.unwrap_or_default();
    if let Err(e) = check(label, input.account_ids.as_deref(), &actions) {
        return Err(ctx.after_queue_check(&name, e).await);
    }
    let accounts = input.account_ids.unwrap_or_default();
    let view = ctx.queue(&name).await?;
    let arn = ctx.queue_arn(&name);
    let mut policy = current_policy(view.attributes.sqs_attributes.get(POLICY), &arn);
    let mut statements = take_statements(&mut policy);
    if statements.iter().any(|s| s.get("Sid").and_then(Value::as_str) == Some(label)) {
        return Err(AwsError::invalid_value("Label", label, "Already exists."));
    }
    let principals: Vec<String> = accounts.iter().map(|a| format!("arn:aws:iam::{a}:root")).collect();
    let granted: Vec<String> = actions.iter().map(|a| format!("SQS:{a}")).collect();
    statements.push(json!({
        "Sid": label,
        "Effect": "Allow",
        "Principal": { "AWS": one_or_many(principals) },
        "Action": one_or_many(granted),
        "Resource": arn,
    }));
    policy.insert("Statement".into(), Value::Array(statements));
    write(ctx, &name, Some(Value::Object(policy))).await
}

/// AWS's checks of an `AddPermission`, in AWS's words. `accounts` is `None` when the
/// parameter is absent; an empty list (what both protocols send for `AWSAccountIds=[]`) is a
/// principal AWS cannot verify.
fn check(label: &str, accounts: Option<&[String]>, actions: &[String]) -> Result<(), AwsError> {
    let label_ok =
        label.len() <= LABEL_LEN_MAX && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !label_ok {
        return Err(AwsError::invalid_value(
            "Label",
            label,
            "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length.",
        ));
    }
    if actions.is_empty() {
        return Err(AwsError::missing_parameter("Actions"));
    }
    match accounts {
        None => return Err(AwsError::missing_parameter("AWSAccountIds")),
        Some([]) => return Err(AwsError::invalid_value("PrincipalId", "[]", "Unable to verify.")),
        Some(_) => {}
    }
    if actions.len() > PERMISSION_ACTIONS_MAX {
        return Err(AwsError::over_limit(format!(
            "{} Actions were found, maximum allowed is {PERMISSION_ACTIONS_MAX}.",
            actions.len()
        )));
    }
    if let Some(owners) = actions.iter().find(|a| OWNER_ONLY.contains(&a.as_str())) {
        return Err(AwsError::invalid_value(
            "ActionName",
            format!("SQS:{owners}"),
            "Only the queue owner is allowed to invoke this action.",
        ));
    }
    if let Some(bad) = actions.iter().find(|a| !GRANTABLE.contains(&a.as_str())) {
        return Err(AwsError::invalid_value(
            "ActionName",
            format!("SQS:{bad}"),
            "Please refer to the appropriate WSDL for a list of valid actions. ",
        ));
    }
    Ok(())
}

/// AWS writes a single principal or action as a string, several as a list.
fn one_or_many(mut items: Vec<String>) -> Value {
    if items.len() == 1 { Value::String(items.remove(0)) } else { json!(items) }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct RemovePermissionInput {
    queue_url: Option<String>,
    label: Option<String>,
}

pub async fn remove_permission(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: RemovePermissionInput = parse(input)?;
    let name = ctx.queue_name(&input.queue_url)?;
    let label = required(&input.label, "Label")?;
    let view = ctx.queue(&name).await?;
    let arn = ctx.queue_arn(&name);
    let mut policy = current_policy(view.attributes.sqs_attributes.get(POLICY), &arn);
    let mut statements = take_statements(&mut policy);
    let before = statements.len();
    statements.retain(|s| s.get("Sid").and_then(Value::as_str) != Some(label));
    if statements.len() == before {
        return Err(AwsError::invalid_value("Label", label, "can't find label."));
    }
    // A policy left without statements is removed, as AWS does.
    let policy = (!statements.is_empty()).then(|| {
        policy.insert("Statement".into(), Value::Array(statements));
        Value::Object(policy)
    });
    write(ctx, &name, policy).await
}

/// The queue's policy document, or the empty one AWS starts from.
fn current_policy(text: Option<&String>, arn: &str) -> Map<String, Value> {
    match text.map(|t| serde_json::from_str::<Value>(t)) {
        Some(Ok(Value::Object(policy))) => policy,
        // Policies are checked to be JSON objects when set, so only an empty one gets here.
        _ => {
            let mut policy = Map::new();
            policy.insert("Version".into(), json!("2008-10-17"));
            policy.insert("Id".into(), json!(format!("{arn}/SQSDefaultPolicy")));
            policy.insert("Statement".into(), json!([]));
            policy
        }
    }
}

/// Takes the policy's statements out as a list (a policy may hold a single statement, or
/// none); the caller puts the edited list back.
fn take_statements(policy: &mut Map<String, Value>) -> Vec<Value> {
    match policy.remove("Statement") {
        Some(Value::Array(items)) => items,
        Some(Value::Null) | None => Vec::new(),
        Some(single) => vec![single],
    }
}

async fn write(ctx: &Ctx<'_>, name: &str, policy: Option<Value>) -> Outcome {
    let patch = QueueAttributesPatch {
        sqs_attributes: BTreeMap::from([(POLICY.to_string(), policy.map(|p| p.to_string()))]),
        ..Default::default()
    };
    match ctx.store().update_queue(name, patch).await {
        Ok(_) => Ok(None),
        Err(sluice_store::StoreError::Broker(sluice_core::BrokerError::Invalid(v))) => {
            Err(queue_attributes::core_error(v))
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_accounts_and_actions() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let one = s(&["111"]);
        let none: &[String] = &[];
        let verdict = |label, accounts: Option<&[String]>, actions: &[&str]| check(label, accounts, &s(actions));
        assert!(verdict("perm-1_a", Some(one.as_slice()), &["ReceiveMessage", "*"]).is_ok());
        assert_eq!(verdict("bad label", Some(one.as_slice()), &["*"]).unwrap_err().code, "InvalidParameterValue");
        assert_eq!(verdict("l", None, &["*"]).unwrap_err().code, "MissingParameter");
        assert_eq!(verdict("l", Some(one.as_slice()), &[]).unwrap_err().code, "MissingParameter");
        assert!(verdict("l", Some(one.as_slice()), &["FooBar"]).unwrap_err().message.contains("SQS:FooBar"));
        // AWS's answers (issue 25; moto's AWS-derived tests assert the same texts).
        let e = verdict("l", Some(none), &["ReceiveMessage"]).unwrap_err();
        assert_eq!(
            (e.code, e.status.as_u16(), e.message.as_str()),
            ("InvalidParameterValue", 400, "Value [] for parameter PrincipalId is invalid. Reason: Unable to verify.")
        );
        let eight = ["SendMessage"; 8];
        let e = verdict("l", Some(one.as_slice()), &eight).unwrap_err();
        assert_eq!(
            (e.shape, e.code, e.status.as_u16(), e.message.as_str()),
            ("OverLimit", "OverLimit", 403, "8 Actions were found, maximum allowed is 7.")
        );
        assert!(verdict("l", Some(one.as_slice()), &eight[..7]).is_ok());
        for owners in OWNER_ONLY {
            let e = verdict("l", Some(one.as_slice()), &["ReceiveMessage", owners]).unwrap_err();
            assert_eq!(
                e.message,
                format!(
                    "Value SQS:{owners} for parameter ActionName is invalid. Reason: Only the queue owner is allowed to invoke this action."
                )
            );
        }
        assert!(GRANTABLE.iter().all(|a| !OWNER_ONLY.contains(a)));
    }

    #[test]
    fn statement_lists_are_made_lists() {
        let mut p = current_policy(Some(&r#"{"Statement":{"Sid":"a"}}"#.to_string()), "arn");
        assert_eq!(take_statements(&mut p).len(), 1);
        let mut fresh = current_policy(None, "arn:q");
        assert_eq!(fresh["Id"], "arn:q/SQSDefaultPolicy");
        assert!(take_statements(&mut fresh).is_empty());
    }
}
