//! The order saga against a running Sluice server: reserve inventory (HTTP), charge the payment
//! (a queue step answered through a reply queue), ship (HTTP). Two orders run: one within the
//! card's limit completes and ships; one above it is declined, so the orchestrator releases its
//! reservation and the order ends `compensated`. See README.md beside this file.

mod participants;

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use serde_json::{Value, json};
use sluice_api::{
    CreateQueueRequest, DefineSagaRequest, SagaCall, SagaHttpCall, SagaInstance, SagaQueueCall, SagaStep,
    StartSagaRequest,
};
use sluice_client::Client;

use participants::Participants;

/// The queue the payment service takes charges and refunds from, and the one it answers on.
const PAYMENTS: &str = "payments";
const PAYMENT_REPLIES: &str = "payments-replies";
/// How long the orders may take before the run gives up.
const SETTLE_WAIT: Duration = Duration::from_secs(60);

#[derive(Debug, Parser)]
#[command(about = "Runs the order saga (reserve, charge, ship) against a Sluice server")]
struct Args {
    /// The Sluice server.
    #[arg(long, env = "SLUICE_SERVER", default_value = "http://127.0.0.1:9324")]
    server: String,
    /// The largest charge the payment service accepts; the second order is above it.
    #[arg(long, default_value_t = 100)]
    charge_limit: i64,
    /// Print the instances and the participants' ledger as one JSON object.
    #[arg(long)]
    json: bool,
}

fn http(url: String, body: Value) -> SagaCall {
    SagaCall { http: Some(SagaHttpCall { url, method: None, body: Some(body) }), queue: None }
}

fn payment(body: Value) -> SagaCall {
    SagaCall {
        http: None,
        queue: Some(SagaQueueCall {
            queue: PAYMENTS.into(),
            body,
            reply_timeout_ms: Some(10_000),
            reply_queue: Some(PAYMENT_REPLIES.into()),
        }),
    }
}

/// The definition: three steps, the first two with a compensation.
fn order_saga(participants_url: &str) -> DefineSagaRequest {
    let step = |name: &str, action, compensation| SagaStep {
        name: name.into(),
        action,
        compensation,
        retry: None,
        timeout_ms: Some(10_000),
    };
    DefineSagaRequest {
        steps: vec![
            step(
                "reserve",
                http(
                    format!("{participants_url}/reserve"),
                    json!({ "order": "{{input.order}}", "sku": "{{input.sku}}", "qty": "{{input.qty}}" }),
                ),
                Some(http(format!("{participants_url}/release"), json!({ "hold": "{{steps.reserve.output.hold}}" }))),
            ),
            step(
                "charge",
                payment(json!({ "order": "{{input.order}}", "amount": "{{input.amount}}" })),
                Some(payment(json!({ "refund": "{{input.order}}" }))),
            ),
            step("ship", http(format!("{participants_url}/ship"), json!({ "order": "{{input.order}}" })), None),
        ],
    }
}

async fn settle(client: &Client, id: &str) -> anyhow::Result<SagaInstance> {
    let deadline = Instant::now() + SETTLE_WAIT;
    loop {
        let instance = client.get_saga_instance(id).await?;
        if !matches!(instance.status.as_str(), "running" | "compensating") {
            return Ok(instance);
        }
        if Instant::now() > deadline {
            bail!("instance {id} is still {} after {SETTLE_WAIT:?}", instance.status);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn print_instance(instance: &SagaInstance) {
    println!("{} ({}): {}", instance.correlation_id, instance.id, instance.status);
    for step in &instance.steps {
        let detail = match (&step.output, &step.error) {
            (_, Some(error)) => format!("error: {error}"),
            (Some(output), None) => format!("output: {output}"),
            (None, None) => String::new(),
        };
        println!("  {:<8} {:<12} attempts {}  {detail}", step.name, step.status, step.attempts);
    }
    if let Some(error) = &instance.error {
        println!("  why: {error}");
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let client = Client::new(&args.server).with_context(|| format!("a client for {}", args.server))?;
    for queue in [PAYMENTS, PAYMENT_REPLIES] {
        let request = CreateQueueRequest { name: queue.into(), ..Default::default() };
        client.create_queue(&request).await.with_context(|| format!("creating queue {queue} on {}", args.server))?;
    }
    let participants = Participants::new(&[("book-7", 10)], args.charge_limit);
    let participants_url = participants::serve_http(participants.clone()).await?;
    let payments = tokio::spawn(participants::serve_payments(participants.clone(), client.clone(), PAYMENTS.into()));

    let (saga, created) = client.define_saga("order", &order_saga(&participants_url)).await?;
    if !args.json {
        println!("saga order, version {} ({})", saga.version, if created { "new" } else { "unchanged" });
    }
    let orders = [("order-1", 40, 2), ("order-2", 500, 3)];
    let mut started = Vec::new();
    for (order, amount, qty) in orders {
        let request = StartSagaRequest {
            input: json!({ "order": order, "sku": "book-7", "qty": qty, "amount": amount }),
            correlation_id: Some(order.into()),
        };
        // Keyed by the order: a start retried after a lost answer starts nothing twice.
        started.push(client.start_saga_with_key("order", &request, &format!("start-{order}-{}", saga.version)).await?);
    }
    let mut settled = Vec::new();
    for instance in &started {
        settled.push(settle(&client, &instance.id).await?);
    }
    payments.abort();
    let ledger = participants.ledger();
    if args.json {
        println!("{}", json!({ "instances": settled, "ledger": ledger }));
    } else {
        for instance in &settled {
            print_instance(instance);
        }
        println!("participants: {}", serde_json::to_string_pretty(&ledger)?);
    }
    Ok(())
}
