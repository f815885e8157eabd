//! The Query protocol's XML answers: `<{Action}Response><{Action}Result>...` and
//! `<ErrorResponse>`.
//!
//! Actions produce their output in the JSON protocol's shape; this module writes the same
//! value as XML. Lists and maps are flattened as the query model says: a member named in
//! [`element_hint`] repeats one element per item (`<QueueUrl>`, `<Message>`,
//! `<Attribute><Name/><Value/></Attribute>`), every other member is one element of its own
//! name. Text is escaped with quick-xml, plus `\r` as `&#xD;`: a literal carriage return would
//! be normalised away by the client's XML parser and break its MD5 check of the body.
//!
//! SNS wraps instead of flattening ([`Style::Wrapped`]): a list is `<Name><member>..</member></Name>`
//! and a map (`Attributes`) is `<Attributes><entry><key/><value/></entry></Attributes>`, as its
//! model (`shared/reference/aws-data/sns-query-model-2010-03-31.json`) has no flattened shapes.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

use super::errors::AwsError;

pub const SQS_NAMESPACE: &str = "http://queue.amazonaws.com/doc/2012-11-05/";
pub const STS_NAMESPACE: &str = "https://sts.amazonaws.com/doc/2011-06-15/";
pub const SNS_NAMESPACE: &str = "http://sns.amazonaws.com/doc/2010-03-31/";

const CONTENT_TYPE: &str = "text/xml";

/// How lists and maps are written: SQS's and STS's flattened, or SNS's wrapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Flattened,
    Wrapped,
}

/// How a member of an output is written.
enum Element {
    /// One `<name>` per item of the array.
    List(String),
    /// One `<name><key/><value/></name>` per entry of the object.
    Map { name: &'static str, key: &'static str, value: &'static str },
}

fn element_hint(style: Style, action: &str, member: &str) -> Option<Element> {
    let list = |name: &str| Some(Element::List(name.to_string()));
    if style == Style::Wrapped {
        return match member {
            "Attributes" => Some(Element::Map { name: "entry", key: "key", value: "value" }),
            _ => None,
        };
    }
    match member {
        "Attributes" => Some(Element::Map { name: "Attribute", key: "Name", value: "Value" }),
        "MessageAttributes" => Some(Element::Map { name: "MessageAttribute", key: "Name", value: "Value" }),
        "Tags" => Some(Element::Map { name: "Tag", key: "Key", value: "Value" }),
        "QueueUrls" | "queueUrls" => list("QueueUrl"),
        "Messages" => list("Message"),
        "Failed" => list("BatchResultErrorEntry"),
        // `SendMessageBatchResultEntry`, `DeleteMessageBatchResultEntry`,
        // `ChangeMessageVisibilityBatchResultEntry`, `ListMessageMoveTasksResultEntry`.
        "Successful" | "Results" => list(&format!("{action}ResultEntry")),
        _ => None,
    }
}

/// `200` with `<{action}Response>`; the `<{action}Result>` element only for actions that
/// have an output.
pub fn success(action: &str, output: Option<&Value>, namespace: &str, request_id: &str) -> Response {
    success_in(Style::Flattened, action, output, namespace, request_id)
}

/// [`success`] in a style.
pub fn success_in(style: Style, action: &str, output: Option<&Value>, namespace: &str, request_id: &str) -> Response {
    let mut out = String::with_capacity(256);
    out.push_str(&format!("<?xml version=\"1.0\"?><{action}Response xmlns=\"{namespace}\">"));
    if let Some(output) = output {
        out.push_str(&format!("<{action}Result>"));
        if let Value::Object(members) = output {
            write_members(&mut out, style, action, members);
        }
        out.push_str(&format!("</{action}Result>"));
    }
    out.push_str(&format!("<ResponseMetadata><RequestId>{}</RequestId></ResponseMetadata>", escape(request_id)));
    out.push_str(&format!("</{action}Response>"));
    reply(StatusCode::OK, out)
}

pub fn error(e: &AwsError, namespace: &str, request_id: &str) -> Response {
    // The Query protocol has always said this, and clients written against it may compare.
    let message = if e.shape == "QueueDoesNotExist" {
        "The specified queue does not exist for this wsdl version."
    } else {
        e.message.as_str()
    };
    let out = format!(
        "<?xml version=\"1.0\"?><ErrorResponse xmlns=\"{namespace}\"><Error><Type>{}</Type><Code>{}</Code><Message>{}</Message><Detail/></Error><RequestId>{}</RequestId></ErrorResponse>",
        e.fault(),
        escape(e.code),
        escape(message),
        escape(request_id),
    );
    reply(e.status, out)
}

fn reply(status: StatusCode, body: String) -> Response {
    (status, [(axum::http::header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response()
}

fn write_members(out: &mut String, style: Style, action: &str, members: &Map<String, Value>) {
    for (member, value) in members {
        let hint = element_hint(style, action, member);
        // Wrapped lists and maps sit inside an element of the member's own name.
        let wrapped = style == Style::Wrapped && (value.is_array() || (hint.is_some() && value.is_object()));
        if wrapped {
            out.push_str(&format!("<{member}>"));
        }
        match (hint, value) {
            (Some(Element::List(name)), Value::Array(items)) => {
                for item in items {
                    write_element(out, style, action, &name, item);
                }
            }
            (None, Value::Array(items)) if style == Style::Wrapped => {
                for item in items {
                    write_element(out, style, action, "member", item);
                }
            }
            (Some(Element::Map { name, key, value: value_name }), Value::Object(entries)) => {
                for (k, v) in entries {
                    out.push_str(&format!("<{name}><{key}>{}</{key}>", escape(k)));
                    write_element(out, style, action, value_name, v);
                    out.push_str(&format!("</{name}>"));
                }
            }
            (_, value) => write_element(out, style, action, member, value),
        }
        if wrapped {
            out.push_str(&format!("</{member}>"));
        }
    }
}

fn write_element(out: &mut String, style: Style, action: &str, name: &str, value: &Value) {
    out.push_str(&format!("<{name}>"));
    match value {
        Value::Object(members) => write_members(out, style, action, members),
        Value::String(s) => out.push_str(&escape(s)),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Null => {}
        // Every list of an output is named in `element_hint`; an unnamed one repeats its own
        // element name, which is what a flattened list would look like.
        Value::Array(items) => {
            for item in items {
                write_element(out, style, action, name, item);
            }
        }
    }
    out.push_str(&format!("</{name}>"));
}

/// XML text: quick-xml's escaping of `&<>'"`, with a carriage return written `&#xD;` as AWS
/// writes it. (quick-xml writes `&#13;`; after escaping, that text can only stand for a `\r`,
/// since a literal `&` in the input has become `&amp;`.)
pub fn escape(text: &str) -> String {
    let escaped = quick_xml::escape::escape(text);
    if escaped.contains('\r') || escaped.contains("&#13;") {
        escaped.replace("&#13;", "&#xD;").replace('\r', "&#xD;")
    } else {
        escaped.into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    async fn text(response: Response) -> String {
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[test]
    fn escaping_keeps_carriage_returns() {
        assert_eq!(escape("a\r\n<b>&\"'"), "a&#xD;\n&lt;b&gt;&amp;&quot;&apos;");
        assert_eq!(escape("&#13;"), "&amp;#13;");
    }

    #[tokio::test]
    async fn flattened_lists_and_maps() {
        let output = json!({
            "Messages": [{
                "Attributes": {"SentTimestamp": "1"},
                "Body": "x\ry",
                "MessageAttributes": {"Foo": {"DataType": "String", "StringValue": "Bar"}},
            }],
        });
        let body = text(success("ReceiveMessage", Some(&output), SQS_NAMESPACE, "rid")).await;
        assert_eq!(
            body,
            concat!(
                "<?xml version=\"1.0\"?><ReceiveMessageResponse xmlns=\"http://queue.amazonaws.com/doc/2012-11-05/\">",
                "<ReceiveMessageResult><Message>",
                "<Attribute><Name>SentTimestamp</Name><Value>1</Value></Attribute>",
                "<Body>x&#xD;y</Body>",
                "<MessageAttribute><Name>Foo</Name><Value><DataType>String</DataType><StringValue>Bar</StringValue></Value></MessageAttribute>",
                "</Message></ReceiveMessageResult>",
                "<ResponseMetadata><RequestId>rid</RequestId></ResponseMetadata></ReceiveMessageResponse>",
            )
        );
        let batch = json!({"Successful": [{"Id": "a"}], "Failed": [{"Id": "b", "SenderFault": true}]});
        let body = text(success("DeleteMessageBatch", Some(&batch), SQS_NAMESPACE, "r")).await;
        assert!(body.contains("<DeleteMessageBatchResultEntry><Id>a</Id></DeleteMessageBatchResultEntry>"), "{body}");
        assert!(
            body.contains("<BatchResultErrorEntry><Id>b</Id><SenderFault>true</SenderFault></BatchResultErrorEntry>"),
            "{body}"
        );
    }

    #[tokio::test]
    async fn sns_wraps_lists_and_maps() {
        let output = json!({
            "Attributes": {"DisplayName": "d", "Owner": "0"},
            "Successful": [{"Id": "a", "MessageId": "m"}],
            "Failed": [],
            "Subscriptions": [{"SubscriptionArn": "s"}],
        });
        let body = text(success_in(Style::Wrapped, "PublishBatch", Some(&output), SNS_NAMESPACE, "r")).await;
        assert!(
            body.contains(concat!(
                "<Attributes><entry><key>DisplayName</key><value>d</value></entry>",
                "<entry><key>Owner</key><value>0</value></entry></Attributes>"
            )),
            "{body}"
        );
        assert!(
            body.contains("<Successful><member><Id>a</Id><MessageId>m</MessageId></member></Successful>"),
            "{body}"
        );
        assert!(body.contains("<Failed></Failed>"), "{body}");
        assert!(
            body.contains("<Subscriptions><member><SubscriptionArn>s</SubscriptionArn></member></Subscriptions>"),
            "{body}"
        );
    }

    #[tokio::test]
    async fn actions_without_output_have_no_result_element() {
        let body = text(success("DeleteQueue", None, SQS_NAMESPACE, "r")).await;
        assert!(!body.contains("DeleteQueueResult"), "{body}");
        assert!(body.contains("<ResponseMetadata><RequestId>r</RequestId></ResponseMetadata>"), "{body}");
    }
}
