//! Queue URLs and ARNs: how Sluice writes them, and how it finds a queue from one.
//!
//! A queue is found by account and name only. The host and port of a URL are ignored, because
//! clients reach the server under many names (localhost, a container name, a load balancer)
//! and emulators that compared hosts were the most common complaint (reference §0.9).

use crate::aws::common::AwsError;

/// `<scheme>://<host the client used>/<account>/<name>` (`https` when the port serves TLS).
pub fn queue_url(scheme: &str, host: &str, account: &str, name: &str) -> String {
    format!("{scheme}://{host}/{account}/{name}")
}

/// `arn:aws:sqs:<region>:<account>:<name>`.
pub fn queue_arn(region: &str, account: &str, name: &str) -> String {
    format!("arn:aws:sqs:{region}:{account}:{name}")
}

/// The queue named by a `QueueUrl` parameter, or by the request path when there is none.
///
/// Accepted forms: a full URL (`http://host:port/<account>/<name>`), a path (`/<account>/<name>`,
/// also ElasticMQ's `/queue/<name>`) and a bare queue name (AWS accepts one too). A URL naming
/// another account names no queue of this server.
pub fn queue_name(queue_url: Option<&str>, request_path: &str, account: &str) -> Result<String, AwsError> {
    let (text, from_parameter) = match queue_url {
        Some(url) if !url.is_empty() => (url, true),
        _ => (request_path, false),
    };
    let path = match text.split_once("://") {
        // Everything after the host; a URL without a path names no queue.
        Some((_, rest)) => rest.find('/').map_or("", |i| &rest[i..]),
        None => text,
    };
    let path = path.split(['?', '#']).next().unwrap_or("");
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let Some((&name, before)) = segments.split_last() else {
        return Err(if from_parameter {
            AwsError::queue_does_not_exist()
        } else {
            AwsError::missing_parameter("QueueUrl")
        });
    };
    if let Some(&owner) = before.last()
        && is_account_id(owner)
        && owner != account
    {
        return Err(AwsError::queue_does_not_exist());
    }
    Ok(name.to_string())
}

fn is_account_id(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// Why an ARN names no queue of this server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArnError {
    /// Not `arn:<partition>:sqs:<region>:<account>:<name>`.
    Malformed,
    /// Well formed, but another account's.
    OtherAccount,
}

/// The queue name of an SQS ARN of this account. The region is not compared: ARNs this server
/// hands out carry its configured region, and a client that signs for another region still
/// means the same queue.
pub fn queue_name_from_arn<'a>(arn: &'a str, account: &str) -> Result<&'a str, ArnError> {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let [prefix, _partition, service, _region, owner, name] = parts[..] else {
        return Err(ArnError::Malformed);
    };
    if prefix != "arn" || service != "sqs" || name.is_empty() || name.contains(':') {
        return Err(ArnError::Malformed);
    }
    if owner != account {
        return Err(ArnError::OtherAccount);
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_urls_paths_and_bare_names() {
        let acct = "000000000000";
        let table: &[(Option<&str>, &str, Result<&str, &str>)] = &[
            (Some("http://localhost:9324/000000000000/orders"), "/", Ok("orders")),
            (Some("https://sqs.us-east-1.amazonaws.com/000000000000/orders"), "/", Ok("orders")),
            (Some("http://elsewhere:1/000000000000/orders?x=1"), "/000000000000/other", Ok("orders")),
            (Some("orders"), "/", Ok("orders")),
            (None, "/000000000000/orders", Ok("orders")),
            (Some(""), "/000000000000/orders", Ok("orders")),
            (None, "/queue/orders", Ok("orders")),
            (Some("http://localhost:9324/111111111111/orders"), "/", Err("AWS.SimpleQueueService.NonExistentQueue")),
            (Some("http://localhost:9324"), "/", Err("AWS.SimpleQueueService.NonExistentQueue")),
            (None, "/", Err("MissingParameter")),
        ];
        for (url, path, want) in table {
            let got = queue_name(*url, path, acct).map_err(|e| e.code);
            assert_eq!(got.as_deref().map_err(|e| *e), *want, "url={url:?} path={path}");
        }
    }

    #[test]
    fn arns() {
        assert_eq!(queue_name_from_arn("arn:aws:sqs:us-east-1:000000000000:dlq", "000000000000"), Ok("dlq"));
        assert_eq!(queue_name_from_arn("arn:aws:sqs:eu-west-1:000000000000:dlq", "000000000000"), Ok("dlq"));
        assert_eq!(queue_name_from_arn("arn:aws:sqs:us-east-1:111:dlq", "000000000000"), Err(ArnError::OtherAccount));
        for bad in ["dlq", "arn:aws:sns:us-east-1:000000000000:t", "arn:aws:sqs:us-east-1:000000000000:", ""] {
            assert_eq!(queue_name_from_arn(bad, "000000000000"), Err(ArnError::Malformed), "{bad}");
        }
        assert_eq!(queue_arn("us-east-1", "1", "q"), "arn:aws:sqs:us-east-1:1:q");
        assert_eq!(queue_url("http", "h:1", "1", "q"), "http://h:1/1/q");
        assert_eq!(queue_url("https", "h:1", "1", "q"), "https://h:1/1/q");
    }
}
